import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseHistoryText, readHistoryFiles, toOperations } from './history-file.js';
import { checkHistory } from './linearizability.js';
import { decodeRegisterRecord, kvModel } from './models/register.js';
import { HistoryRecorder, monotonicNowNs } from './recorder.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'floe-rec-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const fakeClock = () => {
  let t = 0;
  return () => (t += 10);
};

describe('HistoryRecorder', () => {
  it('records ok, unknown and failed calls in memory', () => {
    const rec = new HistoryRecorder({ clientId: 'c1', now: fakeClock() });
    rec.invoke('write', 'k', 1).ok(null);
    rec.invoke('write', 'k', 2).unknown();
    rec.invoke('write', 'k', 3).failed();
    rec.invoke('read', 'k', null, 'other').ok(1);
    expect(rec.records()).toEqual([
      { clientId: 'c1', op: 'write', key: 'k', input: 1, output: null, invokeTime: 10, returnTime: 20 },
      { clientId: 'c1', op: 'write', key: 'k', input: 2, output: null, invokeTime: 30, returnTime: null },
      { clientId: 'other', op: 'read', key: 'k', input: null, output: 1, invokeTime: 50, returnTime: 60 },
    ]);
  });

  it('refuses to settle a call twice', () => {
    const rec = new HistoryRecorder();
    const call = rec.invoke('read', 'k', null);
    call.ok(1);
    expect(() => call.unknown()).toThrow(/already settled/);
  });

  it('tracks promises: ok on resolve, unknown on reject unless told it failed', async () => {
    const rec = new HistoryRecorder({ now: fakeClock() });
    await expect(
      rec.track('read', 'k', null, async () => ({ value: 7 }), { output: (r) => r.value }),
    ).resolves.toEqual({
      value: 7,
    });
    await expect(rec.track('write', 'k', 1, () => Promise.reject(new Error('timeout')))).rejects.toThrow(
      'timeout',
    );
    await expect(
      rec.track('write', 'k', 2, () => Promise.reject(new Error('NOPERM')), { onError: () => 'failed' }),
    ).rejects.toThrow('NOPERM');
    expect(rec.records().map((r) => [r.op, r.output, r.returnTime === null])).toEqual([
      ['read', 7, false],
      ['write', null, true],
    ]);
  });

  it('close() records calls still in flight as unknown, once', () => {
    const path = join(dir, 'h.jsonl');
    const rec = new HistoryRecorder({ path, now: fakeClock(), keepInMemory: true });
    const call = rec.invoke('write', 'k', 1);
    expect(rec.inFlight).toBe(1);
    rec.close();
    rec.close();
    call.ok(null); // arrives too late: already recorded as unknown
    expect(() => rec.invoke('read', 'k', null)).toThrow(/closed/);
    const { records } = parseHistoryText(readFileSync(path, 'utf8'));
    expect(records).toHaveLength(1);
    expect(records[0]!.returnTime).toBeNull();
  });

  it('leaves a call in flight at a crash as an unknown outcome in the file', () => {
    const path = join(dir, 'h.jsonl');
    const rec = new HistoryRecorder({ path, clientId: 'p1' });
    rec.invoke('write', 'k', 1).ok(null);
    rec.invoke('write', 'k', 2); // the process dies here: no settle, no close
    const { records } = parseHistoryText(readFileSync(path, 'utf8'));
    expect(records.map((r) => [r.input, r.returnTime === null])).toEqual([
      [1, false],
      [2, true],
    ]);
  });

  it('merges files written by several recorders into one checkable history', async () => {
    const clock = fakeClock();
    const a = new HistoryRecorder({ path: join(dir, 'a.jsonl'), clientId: 'a', now: clock });
    const b = new HistoryRecorder({ path: join(dir, 'b.jsonl'), clientId: 'b', now: clock });
    const w1 = a.invoke('write', 'x', 1);
    const r1 = b.invoke('read', 'x', null);
    w1.ok(null);
    r1.ok(1); // concurrent with the write: fine
    b.invoke('read', 'y', null).ok(null);
    const stale = a.invoke('read', 'x', null);
    stale.ok(null); // after the write completed: stale
    a.close();
    b.close();
    const { records } = await readHistoryFiles([join(dir, 'a.jsonl'), join(dir, 'b.jsonl')]);
    const res = checkHistory(kvModel(), toOperations(records, decodeRegisterRecord));
    expect(res.result).toBe('illegal');
    expect(res.illegal.map((p) => p.key)).toEqual(['x']);
    expect(res.partitions.find((p) => p.key === 'y')?.result).toBe('ok');
  });

  it('writes bigints as decimal strings', () => {
    const path = join(dir, 'h.jsonl');
    const rec = new HistoryRecorder({ path, writeInvokes: false });
    rec.invoke('issue', '', null).ok(2n ** 63n);
    rec.close();
    expect(parseHistoryText(readFileSync(path, 'utf8')).records[0]!.output).toBe('9223372036854775808');
  });
});

describe('monotonicNowNs', () => {
  it('never goes backwards', () => {
    let prev = monotonicNowNs();
    for (let i = 0; i < 1000; i++) {
      const t = monotonicNowNs();
      expect(t).toBeGreaterThanOrEqual(prev);
      prev = t;
    }
  });
});
