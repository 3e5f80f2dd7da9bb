/**
 * The audit pipeline against a REAL ClickHouse (Debian's 18.16 clickhouse-server, started here on a
 * free 127.0.0.1 port with its own config, stopped by PID). Skipped, saying so, only when
 * /usr/sbin/clickhouse-server is not installed (CI installs it: .ci/run).
 *
 * FLOE_AUDIT_CH_DOWN_MS sets how long ClickHouse stays killed under load (default 5,000 ms here;
 * `npm run test:audit-ch-down-30s` runs the 30 s).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClickHouseProcess, clickhouseServerAvailable, startClickHouse } from './clickhouse-process.js';
import { ClickHouseAuditSink } from './clickhouse-sink.js';
import { type AuditEvent, auditEventToRow } from './events.js';
import { type AuditAlarm, type AuditMode, createAuditPipeline } from './pipeline.js';
import { listSpillFiles, SpillStore } from './spill.js';

const have = clickhouseServerAvailable();
if (!have)
  console.warn('SKIPPED: /usr/sbin/clickhouse-server is not installed (apt-get install clickhouse-server)');
// The issue asks for 30 s down under load; FLOE_AUDIT_CH_DOWN_MS shortens it for quick local runs.
const DOWN_MS = Number(process.env.FLOE_AUDIT_CH_DOWN_MS ?? 30_000);
const quiet = { info() {}, warn() {}, error() {} };

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'floe-audit-ch-'));
  dirs.push(d);
  return d;
};

/** Event i: every 10th a cluster lease event keyed by a Raft index, the rest SDK summaries. */
const ev = (i: number): AuditEvent =>
  i % 10 === 0
    ? { type: 'lease_renewed', app: 'shop', workerId: i % 1024, holder: `n${i % 3}`, token: i, raftIndex: i }
    : {
        type: 'sdk_issued',
        app: 'shop',
        worker: i % 1024,
        token: 1,
        first: i * 1000,
        last: i * 1000 + 999,
        count: 1000,
      };

describe.skipIf(!have)('audit pipeline with a real ClickHouse 18.16', () => {
  let ch: ClickHouseProcess;
  beforeAll(async () => {
    ch = await startClickHouse();
  }, 60_000);
  afterAll(async () => {
    await ch?.stop();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  async function table(name: string): Promise<ClickHouseAuditSink> {
    const sink = new ClickHouseAuditSink({ url: ch.url, table: name });
    const stmts = await sink.init();
    expect(stmts[1]).toMatch(/ReplacingMergeTree\(\)/);
    expect(stmts[1]).not.toMatch(/non_replicated_deduplication_window/); // 18.16 has no such setting
    return sink;
  }

  it(
    `ClickHouse SIGKILLed for ${DOWN_MS} ms under load: 0 lost, 0 counted twice`,
    async () => {
      const sink = await table('audit_down');
      const p = await createAuditPipeline({
        clickhouse: { url: ch.url, table: 'audit_down', requestTimeoutMs: 5000 },
        spillDir: tmp(),
        batchSize: 2000,
        flushIntervalMs: 50,
        retryMs: 200,
        maxRetryMs: 1000,
        logger: quiet,
      });
      const modes: AuditMode[] = [];
      p.on('mode', (m) => modes.push(m));
      let n = 0;
      let maxEmitMs = 0;
      const before = 1500;
      const after = 1500;
      const end = Date.now() + before + DOWN_MS + after;
      const producing = new Promise<void>((resolve) => {
        const tick = () => {
          for (let k = 0; k < 100; k++) {
            const t0 = performance.now();
            p.emit(ev(n++));
            maxEmitMs = Math.max(maxEmitMs, performance.now() - t0);
          }
          if (Date.now() < end) setTimeout(tick, 5);
          else resolve();
        };
        tick();
      });
      const killed = new Promise<void>((resolve, reject) => {
        setTimeout(() => {
          ch.kill()
            .then(() => new Promise((r) => setTimeout(r, DOWN_MS)))
            .then(() => ch.restart())
            .then(resolve, reject);
        }, before);
      });
      await Promise.all([producing, killed]);
      await p.flush();
      await p.settled();
      await p.flush();
      const st = p.stats();
      const distinct = await sink.countDistinct();
      const final = await sink.countFinal();
      const raw = await sink.countRaw();
      console.log(
        `ch down ${DOWN_MS} ms: emitted ${n}, inserted ${st.inserted}, spilled ${st.spilled}, replayed ${st.replayed}, insert failures ${st.insertFailures}; rows: distinct ${distinct}, FINAL ${final}, raw ${raw}; max emit ${maxEmitMs.toFixed(3)} ms; modes ${modes.join(' → ')}`,
      );
      expect(st.emitted).toBe(n);
      expect(st.dropped).toBe(0);
      expect(st.insertFailures).toBeGreaterThan(0); // the kill was felt...
      expect(st.spilled).toBeGreaterThan(0); // ...events went to disk...
      expect(st.replayed).toBeGreaterThanOrEqual(st.spilled); // ...and came back
      expect(distinct).toBe(BigInt(n)); // 0 lost
      expect(final).toBe(BigInt(n)); // 0 counted twice
      // A batch delivered twice (an INSERT that committed but whose answer was lost, then replayed):
      // physical rows double, the counting queries do not.
      const again = Array.from({ length: 1000 }, (_, i) => JSON.stringify(auditEventToRow(ev(i))));
      await sink.insertPayload(`${again.join('\n')}\n`, again.length);
      expect(await sink.countRaw()).toBe(raw + 1000n);
      expect(await sink.countDistinct()).toBe(BigInt(n));
      expect(await sink.countFinal()).toBe(BigInt(n));
      await p.close();
      await sink.close();
    },
    DOWN_MS + 120_000,
  );

  it('spill full while ClickHouse is down: alarm, emit stays synchronous, the kept events arrive once', async () => {
    const sink = await table('audit_full');
    const p = await createAuditPipeline({
      clickhouse: { url: ch.url, table: 'audit_full', requestTimeoutMs: 5000 },
      spillDir: tmp(),
      maxQueued: 1000,
      batchSize: 1000,
      flushIntervalMs: 20,
      spillMaxBytes: 300_000,
      retryMs: 100,
      maxRetryMs: 200,
      logger: quiet,
    });
    const alarms: AuditAlarm[] = [];
    p.on('alarm', (a) => alarms.push(a));
    await ch.kill();
    let maxEmitMs = 0;
    const total = 20_000;
    for (let i = 0; i < total; i++) {
      const t0 = performance.now();
      const r = p.emit(ev(1_000_000 + i));
      maxEmitMs = Math.max(maxEmitMs, performance.now() - t0);
      expect(r).toBeUndefined(); // synchronous: no promise to await
    }
    await p.flush();
    const st = p.stats();
    console.log(
      `spill full: emitted ${total}, spilled ${st.spilled}, dropped ${st.dropped}, spill ${st.spillBytes}/${st.spillMaxBytes} bytes, max emit ${maxEmitMs.toFixed(3)} ms`,
    );
    expect(alarms.some((a) => a.kind === 'spill_full' && /DROPPED/.test(a.message))).toBe(true);
    expect(st.spillFull).toBe(true);
    expect(st.dropped).toBeGreaterThan(0);
    expect(st.spilled + st.dropped).toBe(total);
    await ch.restart();
    await p.settled();
    expect(await sink.countDistinct()).toBe(BigInt(st.spilled));
    expect(await sink.countFinal()).toBe(BigInt(st.spilled));
    expect(p.stats().spillFull).toBe(false);
    await p.close();
    await sink.close();
  }, 120_000);

  it('a corrupt spill file is refused naming file and offset; the rest is replayed', async () => {
    const sink = await table('audit_corrupt');
    const dir = tmp();
    const store = new SpillStore({ dir });
    await store.open();
    let id = 2_000_000;
    const frame = () => Array.from({ length: 100 }, () => JSON.stringify(auditEventToRow(ev(id++))));
    for (let f = 0; f < 3; f++) {
      for (let k = 0; k < 3; k++) await store.append(frame());
      store.rotate();
    }
    await store.close();
    const files = listSpillFiles(dir);
    expect(files).toHaveLength(3);
    const bad = files[1]!;
    const bytes = readFileSync(bad);
    const second = (await store.read(bad)).frames[1]!;
    bytes.writeUInt8(bytes.readUInt8(second.offset + 40) ^ 0xff, second.offset + 40);
    writeFileSync(bad, bytes);

    const alarms: AuditAlarm[] = [];
    const p = await createAuditPipeline({
      clickhouse: { url: ch.url, table: 'audit_corrupt' },
      spillDir: dir,
      logger: quiet,
    });
    p.on('alarm', (a) => alarms.push(a));
    await p.settled();
    const corrupt = alarms.filter((a) => a.kind === 'corrupt_spill');
    expect(corrupt).toHaveLength(1);
    expect(corrupt[0]).toMatchObject({ file: bad, offset: second.offset });
    expect(corrupt[0]!.message).toContain(`${bad} refused at byte offset ${second.offset}: CRC mismatch`);
    // Files 1 and 3 whole, and file 2's first frame: 7 frames of 100.
    expect(await sink.countDistinct()).toBe(700n);
    expect(await sink.countFinal()).toBe(700n);
    expect(existsSync(`${bad}.corrupt`)).toBe(true);
    expect(listSpillFiles(dir).map((f) => basename(f))).toEqual([]);
    await p.close();
    await sink.close();
  }, 60_000);
});
