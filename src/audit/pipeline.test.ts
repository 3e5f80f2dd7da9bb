import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { auditPlugin } from '../strategies/builtin-plugins.js';
import type { AuditEvent } from './events.js';
import { type AuditAlarm, createAuditPipeline } from './pipeline.js';
import { listSpillFiles, SpillStore } from './spill.js';

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'floe-audit-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const quiet = { info() {}, warn() {}, error() {} };
const ev = (i: number): AuditEvent => ({
  type: 'sdk_issued',
  worker: 1,
  token: 1,
  first: i,
  last: i,
  count: 1,
});

async function rowsIn(dir: string): Promise<string[]> {
  const s = new SpillStore({ dir });
  const out: string[] = [];
  for (const f of listSpillFiles(dir))
    for (const fr of (await s.read(f)).frames) out.push(...fr.payload.toString().trim().split('\n'));
  return out;
}

describe('audit pipeline, embedded default (no ClickHouse)', () => {
  it('writes every event to spill-format files under the data dir', async () => {
    const dir = tmp();
    const p = await createAuditPipeline({
      spillDir: dir,
      batchSize: 100,
      flushIntervalMs: 10,
      logger: quiet,
    });
    for (let i = 0; i < 1234; i++) p.emit(ev(i));
    await p.flush();
    expect(p.stats()).toMatchObject({ mode: 'embedded', emitted: 1234, spilled: 1234, dropped: 0 });
    await p.close();
    const rows = await rowsIn(dir);
    expect(rows).toHaveLength(1234);
    expect(JSON.parse(rows[1233]!).first_id).toBe('1233');
  });

  it('spill full: loud alarm, dropped counted in the metric, emit stays synchronous', async () => {
    const dir = tmp();
    const registry = new Registry();
    const p = await createAuditPipeline({
      spillDir: dir,
      maxQueued: 50,
      batchSize: 50,
      spillMaxBytes: 20_000,
      logger: quiet,
      metrics: registry,
    });
    const alarms: AuditAlarm[] = [];
    p.on('alarm', (a) => alarms.push(a));
    for (let i = 0; i < 5000; i++) expect(p.emit(ev(i))).toBeUndefined();
    await p.flush();
    const st = p.stats();
    expect(alarms.filter((a) => a.kind === 'spill_full')).toHaveLength(1);
    expect(alarms[0]!.message).toMatch(/DROPPED/);
    expect(st.dropped).toBeGreaterThan(0);
    expect(st.spilled + st.dropped).toBe(5000);
    expect(await registry.getSingleMetricAsString('floe_audit_events_dropped_total')).toContain(
      `floe_audit_events_dropped_total ${st.dropped}`,
    );
    await p.close();
    expect(await rowsIn(dir)).toHaveLength(st.spilled);
  });

  it('is the sink of the strategies audit plugin', async () => {
    const dir = tmp();
    const p = await createAuditPipeline({ spillDir: dir, logger: quiet });
    let tally: { count: number; first: unknown; last: unknown } | undefined = {
      count: 3,
      first: 10n,
      last: 12n,
    };
    const plugin = auditPlugin(p.sink, { source: () => ({ app: 'shop', workerId: 7, token: 5 }) });
    plugin.attached?.({ takeTally: () => [tally, (tally = undefined)][0] }, 'order');
    plugin.stop();
    await p.close();
    const [row] = await rowsIn(dir);
    expect(JSON.parse(row!)).toMatchObject({
      type: 'sdk_issued',
      app: 'shop',
      key: 'order',
      worker_id: 7,
      token: '5',
      first_id: '10',
      last_id: '12',
      id_count: '3',
    });
  });

  it('one pipeline per directory; emit after close is counted as dropped, not queued for no one', async () => {
    const dir = tmp();
    const p = await createAuditPipeline({ spillDir: dir, logger: quiet });
    await expect(createAuditPipeline({ spillDir: dir, logger: quiet })).rejects.toThrow(
      new RegExp(`locked by live process ${process.pid}`),
    );
    p.emit(ev(1));
    await p.close();
    expect(() => p.emit(ev(2))).not.toThrow();
    expect(p.stats()).toMatchObject({ emitted: 1, spilled: 1, dropped: 1 });
    const again = await createAuditPipeline({ spillDir: dir, logger: quiet }); // lock released
    await again.close();
  });

  it('a malformed event raises an alarm and never reaches the caller', async () => {
    const dir = tmp();
    const p = await createAuditPipeline({ spillDir: dir, logger: quiet });
    const alarms: AuditAlarm[] = [];
    p.on('alarm', (a) => alarms.push(a));
    expect(() =>
      p.emit({ type: 'sdk_issued', worker: 1, token: 'x', first: 1, last: 1, count: 1 }),
    ).not.toThrow();
    await p.flush();
    expect(p.stats().invalid).toBe(1);
    expect(alarms[0]!.message).toMatch(/token must be an unsigned 64-bit integer/);
    await p.close();
  });
});
