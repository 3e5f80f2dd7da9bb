// DurableStorage on the in-memory twin of the file-system seam: power loss at any file-system
// operation (unsynced writes lost or torn at any byte), fsync EIO, and bit flips in flight.
import { existsSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ConfState, HardState } from '../raft/types.js';
import { DurableStorage, type DurableStorageOptions } from './durable-storage.js';
import { StorageFailedError, WalCorruptionError } from './errors.js';
import type { LockOwner } from './lock-file.js';
import { MemoryFs } from './memory-fs.js';
import { UNKNOWN_VOTE } from './payload.js';
import { ent, ents } from './test-helpers.js';

const CONF: ConfState = { voters: [1, 2, 3], learners: [] };
const DIR = '/floe-memfs-test/node-1';
const SIZE = 40;

/** A small seeded generator: random(n) in [0, n). */
function seeded(seed: number): (n: number) => number {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x % n;
  };
}

/** Process incarnations: each restart is a new "pid"; only the newest is alive. */
class Incarnations {
  current = 1;
  owner(): LockOwner {
    return { pid: this.current, isAlive: (p) => p === this.current };
  }
}

describe('DurableStorage on MemoryFs (file-system seam)', () => {
  it('runs entirely on the twin: round trip across reopen, nothing on the real disk', async () => {
    const fs = new MemoryFs();
    const opts: DurableStorageOptions = { fs, bootstrapConf: CONF, trailingEntries: 2 };
    const s = await DurableStorage.open(DIR, opts);
    await s.save({ entries: ents(1, 5, 1), hardState: { term: 1, vote: 2, commit: 4 } }, { sync: true });
    await s.createSnapshot(4, CONF, new TextEncoder().encode('at 4'));
    await s.close();
    expect(existsSync(DIR)).toBe(false);
    expect((await fs.readdir(DIR)).sort()).toEqual(['LOCK', 'snap', 'wal']); // LOCK stays (never unlinked)
    const r = await DurableStorage.open(DIR, { fs });
    expect(r.hardState()).toEqual({ term: 1, vote: 2, commit: 4 });
    expect(r.storage.snapshot().metadata.index).toBe(4);
    expect(r.storage.entries(3, 6)).toEqual(ents(3, 5, 1));
    await r.close();
  });

  it('a power loss at any file-system operation never loses an acknowledged save or vote (property)', async () => {
    const seen = {
      runs: 0,
      acks: 0,
      crashesMidWork: 0,
      powerLosses: 0,
      tailCuts: 0,
      refusedAfterZeroFill: 0,
    };
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        fc.array(
          fc.record({
            crashAt: fc.integer({ min: 1, max: 400 }),
            power: fc.boolean(),
            zeroFill: fc.boolean(),
          }),
          {
            minLength: 1,
            maxLength: 4,
          },
        ),
        async (seed, crashes) => {
          const random = seeded(seed);
          const procs = new Incarnations();
          let fs = new MemoryFs();
          const acked = new Map<number, number>(); // index -> term of the acknowledged entry
          let ackedHs: HardState = { term: 0, vote: 0, commit: 0 };
          seen.runs++;
          // A power loss that zero-filled a torn write can leave a complete frame with a zeroed
          // payload: unacknowledged, but indistinguishable from a flipped bit, so open refuses.
          // That is the documented trade (stop rather than guess); a silent loss never is.
          let mayRefuse = false;
          let refused = false;
          const openOrRefuse = async (options: DurableStorageOptions) => {
            try {
              return await DurableStorage.open(DIR, options);
            } catch (err) {
              if (!(err instanceof WalCorruptionError) || !mayRefuse) throw err;
              expect(err.detail).toMatch(/^payload checksum mismatch/);
              seen.refusedAfterZeroFill++;
              refused = true;
              return undefined;
            }
          };
          for (const [round, crash] of crashes.entries()) {
            const term = 2 * (round + 1); // a fence (one term up) never reaches the next round's term
            let ops = 0;
            let crashed!: () => void;
            const down = new Promise<void>((r) => {
              crashed = r;
            });
            const view = fs;
            view.faults = {
              delay: () => {
                if (++ops === crash.crashAt && view.alive) {
                  seen.crashesMidWork++;
                  if (crash.power) seen.powerLosses++;
                  fs = view.crash(
                    crash.power ? { kind: 'power', random, zeroFill: crash.zeroFill } : { kind: 'process' },
                  );
                  crashed();
                }
                return undefined;
              },
            };
            const work = async () => {
              const s = await openOrRefuse({
                fs: view,
                lockOwner: procs.owner(),
                bootstrapConf: CONF,
                segmentBytes: 1024,
                trailingEntries: 5,
              });
              if (!s) return;
              // What survived the previous crash: every acknowledged entry and the acknowledged vote.
              if (s.recovery.tailCut) seen.tailCuts++;
              const st = s.storage;
              const hs = s.hardState();
              expect(hs.term > ackedHs.term || (hs.term === ackedHs.term && hs.vote === ackedHs.vote)).toBe(
                true,
              );
              expect(hs.commit).toBeGreaterThanOrEqual(ackedHs.commit);
              if (s.recovery.tailCut) expect(hs.vote).toBe(UNKNOWN_VOTE);
              expect(st.lastIndex()).toBeGreaterThanOrEqual(Math.max(0, ...acked.keys()));
              const first = st.firstIndex();
              for (const [i, t] of acked) {
                if (i < first) expect(i).toBeLessThanOrEqual(st.snapshot().metadata.index);
                else expect(st.entries(i, i + 1)[0], `entry ${i}`).toEqual(ent(i, t, SIZE));
              }
              // Three concurrent writers until the crash (or 150 saves).
              let next = st.lastIndex() + 1;
              let durable = st.lastIndex();
              let snapshotting = false;
              const writer = async () => {
                while (next < durable + 150) {
                  const i = next++;
                  const hsNow = { term, vote: (round % 3) + 1, commit: durable };
                  await s.save({ entries: [ent(i, term, SIZE)], hardState: hsNow }, { sync: true });
                  acked.set(i, term);
                  seen.acks++;
                  ackedHs = hsNow;
                  durable = Math.max(durable, i);
                  const at = s.hardState().commit;
                  if (!snapshotting && at - s.storage.snapshot().metadata.index >= 12) {
                    snapshotting = true;
                    s.createSnapshot(at, CONF, new TextEncoder().encode(`@${at}`))
                      .catch(() => {})
                      .finally(() => {
                        snapshotting = false;
                      });
                  }
                }
              };
              await Promise.all([writer(), writer(), writer()]);
              await s.close();
            };
            const finished = work();
            await Promise.race([down, finished]);
            if (refused) return;
            mayRefuse = crash.power && crash.zeroFill;
            if (view.alive) {
              // The workload ended before the chosen operation: crash now.
              await finished;
              fs = view.crash(
                crash.power ? { kind: 'power', random, zeroFill: crash.zeroFill } : { kind: 'process' },
              );
            }
            fs.faults = {};
            procs.current++;
          }
          // A last reopen checks what the last crash left.
          const s = await openOrRefuse({ fs, lockOwner: procs.owner(), segmentBytes: 1024 });
          if (!s) return;
          const hs = s.hardState();
          expect(hs.term > ackedHs.term || (hs.term === ackedHs.term && hs.vote === ackedHs.vote)).toBe(true);
          for (const [i, t] of acked) {
            if (i >= s.storage.firstIndex()) expect(s.storage.entries(i, i + 1)[0]).toEqual(ent(i, t, SIZE));
          }
          await s.close();
        },
      ),
      { numRuns: Number(process.env.FLOE_STORAGE_RUNS ?? 40) },
    );
    console.log(`power-loss property: ${JSON.stringify(seen)}`);
    expect(seen.crashesMidWork).toBeGreaterThan(0);
  });

  for (const [what, dir] of [
    ['the first WAL segment', `${DIR}/wal`],
    ['the data directory', '/floe-memfs-test'],
  ] as const) {
    it(`a crash before ${what}'s name is fsynced, then a power loss after the restart acknowledged saves, loses nothing`, async () => {
      const procs = new Incarnations();
      let fs = new MemoryFs();
      // The first start crashes just before the directory fsync that makes the new name durable.
      const first = fs;
      let crashed!: () => void;
      const down = new Promise<void>((r) => {
        crashed = r;
      });
      first.faults = {
        delay: (op, p) => {
          if (op === 'syncDir' && p === dir && first.alive) {
            fs = first.crash({ kind: 'process' });
            crashed();
          }
          return undefined;
        },
      };
      void DurableStorage.open(DIR, { fs: first, lockOwner: procs.owner(), bootstrapConf: CONF });
      await down;
      procs.current++;
      // The restart sees the name (the kernel kept it) and acknowledges saves into it.
      const s = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner(), bootstrapConf: CONF });
      await s.save({ entries: ents(1, 3, 1), hardState: { term: 1, vote: 2, commit: 1 } }, { sync: true });
      fs = fs.crash({ kind: 'power' });
      procs.current++;
      const r = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner() });
      expect(r.storage.entries(1, 4)).toEqual(ents(1, 3, 1));
      expect(r.hardState()).toEqual({ term: 1, vote: 2, commit: 1 });
      await r.close();
    });
  }

  it('an fdatasync that fails with EIO fail-stops the storage; after the crash only durable data is back', async () => {
    const procs = new Incarnations();
    let fs = new MemoryFs();
    const s = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner(), bootstrapConf: CONF });
    await s.save({ entries: ents(1, 2, 1), hardState: { term: 1, vote: 1, commit: 0 } }, { sync: true });
    fs.faults = { syncError: (p) => (p.endsWith('.wal') ? 'EIO' : undefined) };
    const failed = s.save({ entries: [ent(3, 1)] }, { sync: true });
    await expect(failed).rejects.toBeInstanceOf(StorageFailedError);
    await expect(failed).rejects.toThrow(/EIO/);
    fs.faults = {};
    // Even with the disk healthy again, the storage refuses: a retry could acknowledge lost data.
    await expect(s.save({ entries: [ent(3, 1)] }, { sync: true })).rejects.toThrow(/refusing further writes/);
    fs = fs.crash({ kind: 'power' });
    procs.current++;
    const r = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner() });
    expect(r.storage.lastIndex()).toBe(2);
    expect(r.hardState()).toEqual({ term: 1, vote: 1, commit: 0 });
    await r.close();
  });

  it('a bit flipped on its way to the disk stops the next open, naming the file and offset', async () => {
    const procs = new Incarnations();
    let fs = new MemoryFs();
    const s = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner(), bootstrapConf: CONF });
    await s.save({ entries: ents(1, 2, 1), hardState: { term: 1, vote: 1, commit: 0 } }, { sync: true });
    let where: { file: string; position: number } | undefined;
    fs.faults = {
      onWrite: (file, position, data) => {
        if (file.endsWith('.wal') && !where) {
          where = { file, position };
          data[data.length - 1] = data[data.length - 1]! ^ 0x01;
        }
        return undefined;
      },
    };
    await s.save({ entries: [], hardState: { term: 2, vote: 3, commit: 0 } }, { sync: true });
    fs = fs.crash({ kind: 'power' });
    procs.current++;
    const err = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WalCorruptionError);
    expect(where).toBeDefined();
    expect((err as WalCorruptionError).message).toContain(
      `${where!.file.split('/').pop()} at byte offset ${where!.position}: payload checksum mismatch`,
    );
  });
});
