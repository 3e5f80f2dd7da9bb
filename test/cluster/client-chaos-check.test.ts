// The chaos checker (scripts/chaos-check.ts) must find each violation it counts: synthetic runs, one fault each.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkChaosRun } from '../../scripts/chaos-check.js';
import { CHAOS_LAYOUTS } from '../../scripts/chaos-layouts.js';
import { compose } from '../../src/id/index.js';

const T = Date.UTC(2026, 6, 1);
let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

interface L {
  workerId: number;
  token: number;
  highWaterMs: number;
  startMono: number;
  endMono: number;
  ceilingMs?: number;
  /** The process was killed: no end line; its IDs carry burst times [count so far, mono] (default: none). */
  killed?: boolean;
  bursts?: Array<[number, number]>;
  layout?: 'floe' | 'coarse';
  /** [timestamp, sequence] pairs; worker defaults to the lease's. */
  ids: Array<[number, number, number?]>;
}

function run(clients: Record<string, L[]>, kills: Record<string, number> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'floe-check-'));
  dirs.push(dir);
  for (const [name, leases] of Object.entries(clients)) {
    const all: bigint[] = [];
    const lines: string[] = [];
    const bursts: number[] = [];
    for (const l of leases) {
      const idStart = all.length;
      const layout = CHAOS_LAYOUTS[l.layout ?? 'floe'];
      for (const [ts, seq, w] of l.ids)
        all.push(compose({ timestamp: ts, worker: w ?? l.workerId, sequence: seq }, layout));
      for (const [n, mono] of l.bursts ?? []) bursts.push(idStart + n, mono);
      const common = { client: name, workerId: l.workerId, token: l.token, idStart, startMono: l.startMono };
      lines.push(
        JSON.stringify({ type: 'begin', ...common, highWaterMs: l.highWaterMs, layout: l.layout ?? 'floe' }),
      );
      if (l.killed) continue;
      lines.push(
        JSON.stringify({
          type: 'end',
          ...common,
          idEnd: all.length,
          endMono: l.endMono,
          ceilingMs: l.ceilingMs ?? T + 1e6,
          ended: 'release',
        }),
      );
    }
    writeFileSync(join(dir, `ids-${name}.bin`), new Uint8Array(BigInt64Array.from(all).buffer));
    writeFileSync(join(dir, `bursts-${name}.bin`), new Uint8Array(Float64Array.from(bursts).buffer));
    writeFileSync(join(dir, `leases-${name}.jsonl`), `${lines.join('\n')}\n`);
  }
  const k = Object.entries(kills).map(([client, mono]) => JSON.stringify({ client, mono }));
  if (k.length > 0) writeFileSync(join(dir, 'kills.jsonl'), `${k.join('\n')}\n`);
  return dir;
}

const ok: Record<string, L[]> = {
  a: [
    {
      workerId: 1,
      token: 5,
      highWaterMs: T,
      startMono: 100,
      endMono: 200,
      ids: [
        [T + 1, 0],
        [T + 1, 1],
        [T + 2, 0],
      ],
    },
  ],
  b: [{ workerId: 1, token: 9, highWaterMs: T + 2, startMono: 300, endMono: 400, ids: [[T + 3, 0]] }],
};

describe('chaos checker', () => {
  it('passes a clean history and counts what it saw', () => {
    const r = checkChaosRun(run(ok));
    expect(r).toMatchObject({
      ids: 4,
      duplicates: 0,
      overlappingHolders: 0,
      tokenRegressions: 0,
      highWaterViolations: 0,
      timestampReuse: 0,
      leases: 2,
      reusedWorkerIds: 1,
    });
  });

  it('finds a duplicate ID', () => {
    const r = checkChaosRun(
      run({
        ...ok,
        c: [{ workerId: 2, token: 3, highWaterMs: 0, startMono: 0, endMono: 1, ids: [[T + 1, 0, 1]] }],
      }),
    );
    expect(r.duplicates).toBe(1);
    expect(r.highWaterViolations).toBe(1); // and the worker field is not the lease's
  });

  it('finds two holders of one worker ID at overlapping times', () => {
    const b = [{ ...(ok.b?.[0] as L), startMono: 150 }];
    expect(checkChaosRun(run({ a: ok.a as L[], b })).overlappingHolders).toBe(1);
  });

  it('finds a token regression', () => {
    const b = [{ ...(ok.b?.[0] as L), token: 4 }];
    expect(checkChaosRun(run({ a: ok.a as L[], b })).tokenRegressions).toBe(1);
  });

  it('finds IDs at or below the high-water mark, or above the ceiling', () => {
    const b = [
      {
        ...(ok.b?.[0] as L),
        ids: [
          [T + 2, 5],
          [T + 9, 0],
        ] as Array<[number, number]>,
        ceilingMs: T + 5,
      },
    ];
    const r = checkChaosRun(run({ a: ok.a as L[], b }));
    expect(r.highWaterViolations).toBe(2);
    expect(r.timestampReuse).toBe(1);
  });

  // Issue 9 item 8: these failed on the checker before it (a lease with no end line was left out of the interval
  // check; last use was the last deadline check, not the last ID; IDs were decoded with the floe layout only).
  it('a killed lease (no end line) still takes part in the interval check: it ends at its last burst', () => {
    const a: L[] = [
      {
        ...(ok.a?.[0] as L),
        killed: true,
        bursts: [
          [2, 180],
          [3, 260],
        ],
      },
    ];
    const b = [{ ...(ok.b?.[0] as L), startMono: 250 }];
    const r = checkChaosRun(run({ a, b }, { a: 270 }));
    expect(r.overlappingHolders).toBe(1);
    expect(r.killedLeases).toBe(1);
    expect(r.examples.join('\n')).toMatch(/used until 260\.000 ms \(burst\)/);
    // Had it stopped at 180 (its last burst before b began), no overlap.
    const early: L[] = [{ ...(ok.a?.[0] as L), killed: true, bursts: [[3, 180]] }];
    expect(checkChaosRun(run({ a: early, b }, { a: 270 })).overlappingHolders).toBe(0);
  });

  it('a killed lease with no burst time ends at the kill; a burst after the kill is a record error', () => {
    const a: L[] = [{ ...(ok.a?.[0] as L), killed: true }];
    const b = [{ ...(ok.b?.[0] as L), startMono: 250 }];
    const r = checkChaosRun(run({ a, b }, { a: 270 }));
    expect(r.overlappingHolders).toBe(1);
    expect(r.examples.join('\n')).toMatch(/used until 270\.000 ms \(kill\)/);
    const late: L[] = [{ ...(ok.a?.[0] as L), killed: true, bursts: [[3, 300]] }];
    expect(
      checkChaosRun(run({ a: late, b: [{ ...(ok.b?.[0] as L), startMono: 400 }] }, { a: 270 })).recordErrors,
    ).toBe(1);
  });

  it('a coarse-layout lease is decoded with its own tick: an ID at its high-water mark is found', () => {
    const c: L[] = [
      {
        workerId: 3,
        token: 2,
        highWaterMs: T + 1000,
        startMono: 0,
        endMono: 1,
        layout: 'coarse',
        ids: [
          [T + 1000, 0],
          [T + 1100, 0],
        ],
      },
    ];
    const r = checkChaosRun(run({ c }));
    expect(r.highWaterViolations).toBe(1);
    expect(r.duplicates).toBe(0);
  });
});
