// Property: any sequence of saves, conflicting overwrites, local and leader snapshots, compactions
// and reopens leaves DurableStorage showing exactly what a simple in-memory model of the Raft log
// says, both live and after every reopen.
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { ConfState, Entry, HardState } from '../raft/types.js';
import { DurableStorage, type DurableStorageOptions } from './durable-storage.js';
import { dump, removeTempDirs, tempDir } from './test-helpers.js';

afterEach(removeTempDirs);

const CONF: ConfState = { voters: [1, 2, 3], learners: [] };

/** An integer in [lo, hi] chosen by a fraction in [0, 1]. */
const pick = (lo: number, hi: number, frac: number) =>
  lo + Math.min(hi - lo, Math.floor(frac * (hi - lo + 1)));

type Op =
  | { kind: 'append'; count: number; at: number; newTerm: boolean; size: number }
  | { kind: 'commit'; at: number }
  | { kind: 'snapshot'; at: number }
  | { kind: 'leaderSnapshot'; ahead: number; after: number }
  | { kind: 'burst'; count: number }
  | { kind: 'reopen' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('append' as const),
      count: fc.integer({ min: 1, max: 12 }),
      at: fc.double({ min: 0, max: 1, noNaN: true }),
      newTerm: fc.boolean(),
      size: fc.integer({ min: 0, max: 120 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('commit' as const),
      at: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('snapshot' as const),
      at: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('leaderSnapshot' as const),
      ahead: fc.integer({ min: 1, max: 30 }),
      after: fc.integer({ min: 0, max: 3 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('burst' as const), count: fc.integer({ min: 2, max: 8 }) }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'reopen' as const }) },
);

/** The Raft log as the storage should present it. */
class Model {
  first = 1; // first index held in memory
  baseTerm = 0; // term of first - 1
  entries: Entry[] = []; // first .. last
  hs: HardState = { term: 0, vote: 0, commit: 0 };
  snap = { index: 0, term: 0, data: [] as number[] };
  term = 1;
  seq = 0;

  constructor(readonly trailing: number) {}

  get last(): number {
    return this.first + this.entries.length - 1;
  }

  termAt(i: number): number {
    return i === this.first - 1 ? this.baseTerm : this.entries[i - this.first]!.term;
  }

  makeEntries(lo: number, count: number, term: number, size: number): Entry[] {
    return Array.from({ length: count }, (_, k) => {
      const data = new Uint8Array(size).fill((this.seq++ * 7 + k) & 0xff);
      return { type: 'normal' as const, index: lo + k, term, data };
    });
  }

  append(ents: Entry[]): void {
    const lo = ents[0]!.index;
    this.entries.length = lo - this.first;
    this.entries.push(...ents);
  }

  createSnapshot(index: number, data: Uint8Array): void {
    this.snap = { index, term: this.termAt(index), data: [...data] };
    const c = index - this.trailing;
    if (c > this.first - 1) {
      this.baseTerm = this.termAt(c);
      this.entries = this.entries.slice(c - this.first + 1);
      this.first = c + 1;
    }
  }

  leaderSnapshot(index: number, term: number, data: Uint8Array): void {
    this.snap = { index, term, data: [...data] };
    this.first = index + 1;
    this.baseTerm = term;
    this.entries = [];
  }

  expected() {
    return {
      initial: { hardState: this.hs, conf: CONF },
      first: this.first,
      last: this.last,
      termBeforeFirst: this.baseTerm,
      entries: this.entries,
      snapshot: {
        metadata: { index: this.snap.index, term: this.snap.term, conf: CONF },
        data: this.snap.data,
      },
    };
  }
}

async function run(ops: Op[], options: DurableStorageOptions): Promise<void> {
  const dir = await tempDir();
  const m = new Model(options.trailingEntries ?? 0);
  let s = await DurableStorage.open(dir, { bootstrapConf: CONF, ...options });
  const check = async (where: string) => {
    expect(dump(s.storage), where).toEqual(m.expected());
    const snaps = await fsp.readdir(path.join(dir, 'snap'));
    expect(snaps.length, where).toBeLessThanOrEqual(options.keepSnapshots ?? 2);
  };
  try {
    for (const [n, op] of ops.entries()) {
      const where = `op #${n} ${JSON.stringify(op)}`;
      switch (op.kind) {
        case 'append': {
          // Overwrite anywhere above the commit index (never below a snapshot), or extend.
          const lo = Math.max(m.hs.commit, m.snap.index) + 1;
          const at = pick(lo, m.last + 1, op.at);
          if (op.newTerm) m.term++;
          const ents = m.makeEntries(at, op.count, m.term, op.size);
          m.hs = { ...m.hs, term: m.term };
          await s.save({ entries: ents, hardState: m.hs }, { sync: true });
          m.append(ents);
          break;
        }
        case 'commit': {
          const lo = m.hs.commit;
          const commit = pick(lo, m.last, op.at);
          m.hs = { ...m.hs, commit, vote: (m.hs.vote % 3) + 1 };
          await s.save({ entries: [], hardState: m.hs }, { sync: false });
          break;
        }
        case 'snapshot': {
          const lo = m.snap.index + 1;
          if (m.hs.commit < lo) break;
          const index = pick(lo, m.hs.commit, op.at);
          const data = new TextEncoder().encode(`snap@${index}`);
          await s.createSnapshot(index, CONF, data);
          m.createSnapshot(index, data);
          break;
        }
        case 'leaderSnapshot': {
          const index = Math.max(m.last, m.hs.commit) + op.ahead;
          m.term++;
          const data = new TextEncoder().encode(`leader@${index}`);
          const ents = m.makeEntries(index + 1, op.after, m.term, 16);
          m.hs = { term: m.term, vote: 0, commit: index };
          await s.save(
            {
              snapshot: { metadata: { index, term: m.term, conf: CONF }, data },
              entries: ents,
              hardState: m.hs,
            },
            { sync: true },
          );
          m.leaderSnapshot(index, m.term, data);
          if (ents.length > 0) m.append(ents);
          break;
        }
        case 'burst': {
          // Several saves in flight at once (group commit), applied in call order.
          const saves: Promise<void>[] = [];
          for (let k = 0; k < op.count; k++) {
            const ents = m.makeEntries(m.last + 1, 1 + (k % 3), m.term, 32);
            m.append(ents);
            saves.push(s.save({ entries: ents }, { sync: k % 2 === 0 }));
          }
          await Promise.all(saves);
          break;
        }
        case 'reopen': {
          const live = dump(s.storage);
          await s.close();
          s = await DurableStorage.open(dir, { bootstrapConf: CONF, ...options });
          expect(dump(s.storage), `${where}: reopened differs from before close`).toEqual(live);
          expect(s.warnings, where).toEqual([]);
          break;
        }
      }
      await check(where);
    }
    await s.close();
    s = await DurableStorage.open(dir, options);
    await check('final reopen');
  } finally {
    await s.close();
  }
}

describe('DurableStorage (property)', () => {
  it('matches a model of the log across random saves, overwrites, snapshots, compactions and reopens', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { minLength: 1, maxLength: 40 }),
        fc.record({
          segmentBytes: fc.integer({ min: 1024, max: 4096 }),
          trailingEntries: fc.integer({ min: 0, max: 20 }),
          keepSnapshots: fc.integer({ min: 1, max: 3 }),
        }),
        async (ops, options) => {
          await run(ops, options);
          await removeTempDirs();
        },
      ),
      { numRuns: Number(process.env.FLOE_STORAGE_RUNS ?? 60) },
    );
  });
});
