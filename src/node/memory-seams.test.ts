// MemoryNodeStorage's own behaviour: defaults that keep old callers working, the fault hooks and
// crash(). What it shares with DurableStorage is in memory-seams.contract.test.ts.
import { describe, expect, it } from 'vitest';
import type { ConfState, HardState } from '../raft/types.js';
import { StorageConfigError, StorageFailedError, StorageUsageError } from '../storage/errors.js';
import { ents } from '../storage/test-helpers.js';
import { MEMORY_DEFAULT_TRAILING_ENTRIES, MemoryNodeStorage, type MemoryStorageOp } from './memory-seams.js';

const CONF: ConfState = { voters: [1, 2, 3], learners: [] };
const hs = (term: number, vote: number, commit: number): HardState => ({ term, vote, commit });
const bytes = (s: string) => new TextEncoder().encode(s);
const turn = () => new Promise<void>((r) => setImmediate(r));

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe('MemoryNodeStorage', () => {
  it('without faults a save is visible as soon as save() returns, as before (no extra turn)', () => {
    const m = new MemoryNodeStorage(CONF);
    void m.save({ entries: ents(1, 2, 1), hardState: hs(1, 1, 1) }, { sync: false });
    expect(m.storage.lastIndex()).toBe(2);
    expect(m.storage.hardState()).toEqual(hs(1, 1, 1));
    expect(m.saves).toBe(1);
  });

  it('save() without options syncs (callers written before `sync` was honoured)', async () => {
    const m = new MemoryNodeStorage(CONF);
    await m.save({ entries: ents(1, 2, 1), hardState: hs(1, 1, 2) });
    const r = m.crash('power');
    expect(r.storage.lastIndex()).toBe(2);
    expect(r.storage.hardState()).toEqual(hs(1, 1, 2));
  });

  it('the trailing window defaults to 100 and is a constructor option', async () => {
    expect(MEMORY_DEFAULT_TRAILING_ENTRIES).toBe(100);
    for (const [trailing, first] of [
      [undefined, 21],
      [10, 111],
      [0, 121],
      [500, 1],
    ] as const) {
      const m = new MemoryNodeStorage(CONF, { trailingEntries: trailing });
      await m.save({ entries: ents(1, 150, 1), hardState: hs(1, 1, 150) }, { sync: true });
      await m.createSnapshot(120, CONF, bytes('s'));
      expect(m.storage.firstIndex()).toBe(first);
      expect(m.storage.snapshot().metadata.index).toBe(120);
      expect(m.crash('power').storage.firstIndex()).toBe(first);
    }
    expect(() => new MemoryNodeStorage(CONF, { trailingEntries: -1 })).toThrow(StorageConfigError);
    expect(() => new MemoryNodeStorage(CONF, { trailingEntries: 1.5 })).toThrow(/trailingEntries = 1.5/);
  });

  it('a power loss keeps a prefix up to the last synced write; a process crash keeps everything taken', async () => {
    const m = new MemoryNodeStorage(CONF);
    await m.save({ entries: ents(1, 1, 1), hardState: hs(1, 1, 0) }, { sync: true });
    await m.save({ entries: ents(2, 2, 1) }, { sync: false });
    await m.save({ entries: ents(3, 3, 1) }, { sync: true }); // covers 2 as well
    await m.save({ entries: ents(4, 4, 1), hardState: hs(1, 1, 4) }, { sync: false });
    const power = m.crash('power');
    expect(power.storage.lastIndex()).toBe(3);
    expect(power.storage.hardState()).toEqual(hs(1, 1, 0));
    await power.save({ entries: ents(4, 5, 2), hardState: hs(2, 1, 3) }, { sync: false });
    const proc = power.crash('process');
    expect(proc.storage.lastIndex()).toBe(5);
    expect(proc.storage.term(4)).toBe(2);
    expect(proc.storage.hardState()).toEqual(hs(2, 1, 3));
  });

  it('the hooks see each write with its order and sync flag', async () => {
    const seen: MemoryStorageOp[] = [];
    const m = new MemoryNodeStorage(CONF, {
      faults: {
        delay: (op) => {
          seen.push(op);
          return undefined;
        },
      },
    });
    await m.save({ entries: ents(1, 2, 1), hardState: hs(1, 1, 2) }, { sync: false });
    await m.createSnapshot(2, CONF, bytes('s'));
    await m.save({ entries: ents(3, 3, 1) }, { sync: true });
    expect(seen).toEqual([
      { kind: 'save', n: 1, sync: false },
      { kind: 'snapshot', n: 2, sync: true },
      { kind: 'save', n: 3, sync: true },
    ]);
  });

  it('a held save holds the writes behind it (snapshots too), in order; close() waits for them', async () => {
    const gate = deferred();
    let holdNext = false;
    const m = new MemoryNodeStorage(CONF, {
      faults: {
        delay: () => {
          if (!holdNext) return undefined;
          holdNext = false;
          return gate.promise;
        },
      },
    });
    await m.save({ entries: ents(1, 2, 1), hardState: hs(1, 1, 2) }, { sync: true });
    holdNext = true;
    const order: string[] = [];
    const a = m.save({ entries: ents(3, 3, 1) }, { sync: true }).then(() => order.push('a'));
    const snap = m.createSnapshot(2, CONF, bytes('s')).then(() => order.push('snap'));
    const entries = ents(4, 4, 1);
    const b = m.save({ entries, hardState: hs(1, 1, 4) }, { sync: false }).then(() => order.push('b'));
    entries.length = 0; // the caller reuses its array: the queued save kept its own copy
    let closed = false;
    const c = m.close().then(() => {
      closed = true;
    });
    await turn();
    expect(order).toEqual([]);
    expect(closed).toBe(false);
    expect(m.storage.lastIndex()).toBe(2);
    // Validation sees the queued writes: the next save must follow entry 4.
    await expect(m.save({ entries: ents(6, 6, 1) }, { sync: true })).rejects.toThrow(StorageUsageError);
    gate.resolve();
    await Promise.all([a, snap, b, c]);
    expect(order).toEqual(['a', 'snap', 'b']);
    expect(m.storage.lastIndex()).toBe(4);
    expect(m.storage.snapshot().metadata.index).toBe(2);
    // The unsynced last save is lost on power loss; the held ones before it were synced.
    const r = m.crash('power');
    expect(r.storage.lastIndex()).toBe(3);
  });

  it('a failed snapshot stops the twin; writes queued behind a failed one fail too; a crash reopens it', async () => {
    const gate = deferred();
    let failOn = 0;
    let holdOn = 0;
    const m = new MemoryNodeStorage(CONF, {
      trailingEntries: 0,
      faults: {
        fail: (op) => (op.n === failOn ? 'EIO' : undefined),
        delay: (op) => (op.n === holdOn ? gate.promise : undefined),
      },
    });
    await m.save({ entries: ents(1, 3, 1), hardState: hs(1, 1, 3) }, { sync: true }); // write 1
    failOn = 2;
    holdOn = 2;
    const snap = m.createSnapshot(2, CONF, bytes('s')); // write 2: held, then fails
    const behind = m.save({ entries: ents(4, 4, 1) }, { sync: true }); // write 3, queued behind it
    gate.resolve();
    const err = await snap.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageFailedError);
    expect((err as StorageFailedError).code).toBe('ERR_STORAGE_FAILED');
    expect(((err as Error).cause as { code: string }).code).toBe('EIO');
    await expect(behind).rejects.toBe(err);
    await expect(m.save({ entries: ents(4, 4, 1) }, { sync: true })).rejects.toBe(err);
    expect(m.storage.snapshot().metadata.index).toBe(0);
    const r = m.crash('process'); // the failed snapshot was "written": the restart sees it
    expect(r.storage.snapshot().metadata.index).toBe(2);
    expect(r.storage.firstIndex()).toBe(3); // the trailing window (0) carried over
    await r.save({ entries: ents(4, 4, 1) }, { sync: true }); // the failure did not carry over
    expect(r.storage.lastIndex()).toBe(4);
  });

  it('a crashed twin is dead: its calls never settle, and it cannot crash again', async () => {
    const m = new MemoryNodeStorage(CONF);
    await m.save({ entries: ents(1, 1, 1) }, { sync: true });
    m.crash('process');
    let settled = false;
    const mark = () => {
      settled = true;
    };
    m.save({ entries: ents(2, 2, 1) }, { sync: true }).then(mark, mark);
    m.createSnapshot(1, CONF, bytes('s')).then(mark, mark);
    await turn();
    expect(settled).toBe(false);
    expect(m.storage.lastIndex()).toBe(1);
    expect(() => m.crash('power')).toThrow(/already crashed/);
  });

  it('a recovered twin raises the commit index to its snapshot, as recovery does', async () => {
    const m = new MemoryNodeStorage(CONF);
    const snapshot = { metadata: { index: 7, term: 2, conf: CONF }, data: bytes('leader') };
    await m.save({ snapshot, entries: [] }, { sync: true });
    expect(m.storage.hardState().commit).toBe(0);
    const r = m.crash('power');
    expect(r.storage.hardState().commit).toBe(7);
    expect(r.storage.initialState().conf).toEqual(CONF);
  });
});
