// The storage twin's contract test: the same scenarios against MemoryNodeStorage and against
// DurableStorage on MemoryFs (the production storage on the simulated disk), with the same
// observations expected from both. That is what makes MemoryNodeStorage a twin and not a stub.
import { describe, expect, it } from 'vitest';
import type { ConfState, Entry, HardState, Snapshot, Storage } from '../raft/types.js';
import { DurableStorage } from '../storage/durable-storage.js';
import { MemoryFs } from '../storage/memory-fs.js';
import { ent, ents } from '../storage/test-helpers.js';
import { type MemoryCrashKind, MemoryNodeStorage } from './memory-seams.js';
import type { NodeStorage } from './seams.js';

const CONF: ConfState = { voters: [1, 2, 3], learners: [] };
const DIR = '/floe-twin-contract/node-1';

/** One storage under test, with the faults the contract needs, named the same for both kinds. */
interface Subject {
  readonly s: NodeStorage;
  /** The process (or the machine) dies; `s` becomes the storage the restarted process opens. */
  crash(kind: MemoryCrashKind): Promise<void>;
  /** While on, every write that would become durable fails with EIO (a failed fdatasync). */
  failSyncs(on: boolean): void;
  /** Holds the next write until release(); `reached` resolves when it is being held. */
  hold(): { reached: Promise<void>; release(): void };
}

interface Gate {
  promise: Promise<void>;
  release(): void;
  reached: Promise<void>;
  onReached(): void;
}

function gate(): Gate {
  let release!: () => void;
  let onReached!: () => void;
  const promise = new Promise<void>((r) => {
    release = r;
  });
  const reached = new Promise<void>((r) => {
    onReached = r;
  });
  return { promise, release, reached, onReached };
}

async function durableSubject(trailingEntries: number): Promise<Subject> {
  let fs = new MemoryFs();
  let failing = false;
  let held: Gate | undefined;
  let pid = 1;
  fs.faults = {
    syncError: (p) => (failing && p.endsWith('.wal') ? 'EIO' : undefined),
    delay: (op, p) => {
      if (!held || op !== 'write' || !p.endsWith('.wal')) return undefined;
      const g = held;
      held = undefined; // one write held: the ones behind it must wait by themselves
      g.onReached();
      return g.promise;
    },
  };
  const open = (bootstrapConf?: ConfState) =>
    DurableStorage.open(DIR, {
      fs,
      bootstrapConf,
      trailingEntries,
      lockOwner: { pid, isAlive: (p) => p === pid },
    });
  const sub = {
    s: (await open(CONF)) as NodeStorage,
    async crash(kind: MemoryCrashKind) {
      failing = false;
      held = undefined;
      fs = fs.crash({ kind });
      pid++;
      sub.s = await open();
    },
    failSyncs(on: boolean) {
      failing = on;
    },
    hold() {
      held = gate();
      const g = held;
      return {
        reached: g.reached,
        release: () => g.release(),
      };
    },
  };
  return sub;
}

async function twinSubject(trailingEntries: number): Promise<Subject> {
  let failing = false;
  let held: Gate | undefined;
  let twin = new MemoryNodeStorage(CONF, {
    trailingEntries,
    faults: {
      fail: (op) => (failing && op.sync ? 'EIO' : undefined),
      delay: () => {
        if (!held) return undefined;
        const g = held;
        held = undefined; // one write held: the ones behind it must wait by themselves
        g.onReached();
        return g.promise;
      },
    },
  });
  const sub = {
    s: twin as NodeStorage,
    async crash(kind: MemoryCrashKind) {
      failing = false;
      held = undefined;
      twin = twin.crash(kind);
      sub.s = twin;
    },
    failSyncs(on: boolean) {
      failing = on;
    },
    hold() {
      held = gate();
      const g = held;
      return {
        reached: g.reached,
        release: () => g.release(),
      };
    },
  };
  return sub;
}

/** Everything a caller can observe through the read side. */
function dump(st: Storage) {
  const first = st.firstIndex();
  const last = st.lastIndex();
  const snap = st.snapshot();
  const { hardState, conf } = st.initialState();
  return {
    first,
    last,
    entries: st.entries(first, last + 1).map(show),
    hardState,
    conf,
    snapshot: {
      index: snap.metadata.index,
      term: snap.metadata.term,
      conf: snap.metadata.conf,
      data: Buffer.from(snap.data).toString('hex'),
    },
  };
}

function show(e: Entry) {
  return {
    type: e.type,
    index: e.index,
    term: e.term,
    data: Buffer.from(e.type === 'normal' ? e.data : []).toString('hex'),
  };
}

/** A save's outcome: 'ok' or the storage error's code and message. */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    const e = err as Error & { code?: string };
    // A failure's message names the failed file (the twin has none): the code is the contract.
    if (e.code === 'ERR_STORAGE_FAILED') return e.code;
    return `${e.code ?? e.name}: ${e.message}`;
  }
}

/** Lets every pending I/O callback and promise job run (used only to show that nothing more happens). */
const turn = () => new Promise<void>((r) => setImmediate(r));

const hs = (term: number, vote: number, commit: number): HardState => ({ term, vote, commit });
const bytes = (s: string) => new TextEncoder().encode(s);

type Scenario = (t: Subject, log: (label: string, v: unknown) => void) => Promise<void>;

const scenarios: Record<string, { trailing: number; run: Scenario }> = {
  'sync: a power loss keeps synced writes only; a later synced write covers earlier unsynced ones': {
    trailing: 100,
    async run(t, log) {
      await t.s.save({ entries: ents(1, 3, 1), hardState: hs(1, 1, 0) }, { sync: true });
      await t.s.save({ entries: [], hardState: hs(1, 1, 2) }, { sync: false });
      await t.s.save({ entries: ents(4, 5, 1) }, { sync: false });
      log('visible before the power loss', dump(t.s.storage));
      await t.crash('power');
      log('after the power loss', dump(t.s.storage));
      await t.s.save({ entries: ents(4, 6, 1), hardState: hs(1, 1, 3) }, { sync: false });
      await t.s.save({ entries: [], hardState: hs(1, 1, 4) }, { sync: true });
      await t.crash('power');
      log('after a second power loss', dump(t.s.storage));
    },
  },
  'sync: a process crash keeps unsynced writes': {
    trailing: 100,
    async run(t, log) {
      await t.s.save({ entries: ents(1, 3, 1), hardState: hs(1, 1, 0) }, { sync: true });
      await t.s.save({ entries: ents(4, 4, 1), hardState: hs(1, 1, 4) }, { sync: false });
      await t.crash('process');
      log('after the process crash', dump(t.s.storage));
      await t.crash('power');
      log('after a power loss following the reopen', dump(t.s.storage));
    },
  },
  'trailing window: createSnapshot compacts to trailingEntries behind it, also after recovery': {
    trailing: 3,
    async run(t, log) {
      await t.s.save({ entries: ents(1, 10, 1), hardState: hs(1, 1, 10) }, { sync: true });
      // At 4 the window's start (1) is the first index: compacted exactly to it (a boundary).
      log('snapshot at 4', await outcome(t.s.createSnapshot(4, CONF, bytes('at 4'))));
      log('after the first snapshot', dump(t.s.storage));
      log('snapshot at 8', await outcome(t.s.createSnapshot(8, CONF, bytes('at 8'))));
      log('after the snapshot', dump(t.s.storage));
      log('again at 8 (no-op)', await outcome(t.s.createSnapshot(8, CONF, bytes('other'))));
      log('after the no-op', dump(t.s.storage));
      await t.crash('power');
      log('after the power loss', dump(t.s.storage));
      await t.s.save({ entries: ents(11, 12, 1), hardState: hs(1, 1, 12) }, { sync: true });
      log('snapshot at 12', await outcome(t.s.createSnapshot(12, CONF, bytes('at 12'))));
      log('after the second snapshot', dump(t.s.storage));
    },
  },
  'trailing window 0: nothing kept behind the snapshot': {
    trailing: 0,
    async run(t, log) {
      await t.s.save({ entries: ents(1, 5, 1), hardState: hs(1, 1, 5) }, { sync: true });
      log('snapshot at 4', await outcome(t.s.createSnapshot(4, CONF, bytes('at 4'))));
      log('after the snapshot', dump(t.s.storage));
      await t.crash('process');
      log('after the process crash', dump(t.s.storage));
    },
  },
  "a leader's snapshot replaces the log and is durable even with sync: false": {
    trailing: 100,
    async run(t, log) {
      await t.s.save({ entries: ents(1, 3, 1), hardState: hs(1, 1, 2) }, { sync: true });
      const snapshot: Snapshot = { metadata: { index: 20, term: 2, conf: CONF }, data: bytes('leader') };
      await t.s.save({ snapshot, entries: [], hardState: hs(2, 0, 20) }, { sync: false });
      await t.s.save({ entries: [ent(21, 2), ent(22, 2)] }, { sync: true });
      log('after the snapshot', dump(t.s.storage));
      await t.crash('power');
      log('after the power loss', dump(t.s.storage));
    },
  },
  "recovery raises the commit index to a leader's snapshot saved without a hard state": {
    trailing: 100,
    async run(t, log) {
      await t.s.save({ entries: ents(1, 3, 1), hardState: hs(1, 1, 2) }, { sync: true });
      const snapshot: Snapshot = { metadata: { index: 7, term: 2, conf: CONF }, data: bytes('leader') };
      await t.s.save({ snapshot, entries: [] }, { sync: true });
      log('before the crash', dump(t.s.storage));
      await t.crash('power');
      log('after the power loss', dump(t.s.storage));
    },
  },
  'refusals: the same saves are refused with the same errors, and refusals do not stop the storage': {
    trailing: 100,
    async run(t, log) {
      await t.s.save({ entries: ents(1, 3, 1), hardState: hs(1, 1, 2) }, { sync: true });
      log('gap', await outcome(t.s.save({ entries: ents(5, 5, 1) }, { sync: true })));
      log(
        'commit beyond the log',
        await outcome(t.s.save({ entries: [], hardState: hs(1, 1, 4) }, { sync: true })),
      );
      log('snapshot beyond the commit', await outcome(t.s.createSnapshot(3, CONF, bytes('x'))));
      log('snapshot beyond the log', await outcome(t.s.createSnapshot(9, CONF, bytes('x'))));
      log('snapshot at 2', await outcome(t.s.createSnapshot(2, CONF, bytes('at 2'))));
      log('older snapshot', await outcome(t.s.createSnapshot(1, CONF, bytes('x'))));
      log('rewrite below the snapshot', await outcome(t.s.save({ entries: ents(2, 4, 2) }, { sync: true })));
      const old: Snapshot = { metadata: { index: 1, term: 1, conf: CONF }, data: bytes('old') };
      log('older leader snapshot', await outcome(t.s.save({ snapshot: old, entries: [] }, { sync: true })));
      log('a good save after them', await outcome(t.s.save({ entries: ents(3, 4, 2) }, { sync: true })));
      log('state', dump(t.s.storage));
    },
  },
  'failed save: rejects, is not visible, stops the storage; a power loss drops it, the reopened storage works':
    {
      trailing: 100,
      async run(t, log) {
        await t.s.save({ entries: ents(1, 2, 1), hardState: hs(1, 1, 2) }, { sync: true });
        t.failSyncs(true);
        log('the failed save', await outcome(t.s.save({ entries: ents(3, 3, 1) }, { sync: true })));
        t.failSyncs(false);
        log('visible', dump(t.s.storage));
        log('a later save', await outcome(t.s.save({ entries: ents(3, 3, 1) }, { sync: true })));
        log('a snapshot', await outcome(t.s.createSnapshot(2, CONF, bytes('at 2'))));
        await t.crash('power');
        log('after the power loss', dump(t.s.storage));
        log('a save after reopening', await outcome(t.s.save({ entries: ents(3, 3, 1) }, { sync: true })));
        log('state', dump(t.s.storage));
      },
    },
  'failed save: a process crash keeps the written (never acknowledged) write, as the page cache does': {
    trailing: 100,
    async run(t, log) {
      await t.s.save({ entries: ents(1, 2, 1), hardState: hs(1, 1, 2) }, { sync: true });
      t.failSyncs(true);
      log(
        'the failed save',
        await outcome(t.s.save({ entries: ents(3, 3, 1), hardState: hs(1, 1, 3) }, { sync: true })),
      );
      await t.crash('process');
      log('after the process crash', dump(t.s.storage));
    },
  },
  'delayed save: nothing shows or resolves while held; order is kept on release': {
    trailing: 100,
    async run(t, log) {
      await t.s.save({ entries: ents(1, 2, 1), hardState: hs(1, 1, 1) }, { sync: true });
      const h = t.hold();
      const order: string[] = [];
      const a = t.s.save({ entries: ents(3, 3, 1) }, { sync: true }).then(() => order.push('a'));
      await h.reached;
      const b = t.s
        .save({ entries: ents(4, 4, 1), hardState: hs(1, 1, 4) }, { sync: false })
        .then(() => order.push('b'));
      await turn();
      log('resolved while held', [...order]);
      log('visible while held', dump(t.s.storage));
      h.release();
      await Promise.all([a, b]);
      log('resolution order', order);
      log('visible after release', dump(t.s.storage));
    },
  },
  'delayed save: a crash while it is held loses it and it never settles': {
    trailing: 100,
    async run(t, log) {
      await t.s.save({ entries: ents(1, 2, 1), hardState: hs(1, 1, 1) }, { sync: true });
      const h = t.hold();
      let settled = false;
      void t.s.save({ entries: ents(3, 3, 1), hardState: hs(1, 1, 3) }, { sync: true }).then(
        () => {
          settled = true;
        },
        () => {
          settled = true;
        },
      );
      await h.reached;
      await t.crash('process');
      h.release();
      await turn();
      log('settled', settled);
      log('after the crash', dump(t.s.storage));
    },
  },
};

describe('MemoryNodeStorage is a twin of DurableStorage on MemoryFs (contract)', () => {
  for (const [name, sc] of Object.entries(scenarios)) {
    it(name, async () => {
      const seen: Record<string, Array<[string, unknown]>> = {};
      for (const [kind, make] of [
        ['durable', durableSubject],
        ['twin', twinSubject],
      ] as const) {
        const obs: Array<[string, unknown]> = [];
        await sc.run(await make(sc.trailing), (label, v) => obs.push([label, v]));
        seen[kind] = obs;
      }
      if (process.env.TWIN_CONTRACT_SHOW) console.log(name, JSON.stringify(seen.durable));
      expect(seen.twin).toEqual(seen.durable);
      expect(seen.durable!.length).toBeGreaterThan(0);
    });
  }

  // The observations above are equal; these pin what they are, so both cannot drift together.
  it('pins the observations: what survives, the window, the refusals, the order', async () => {
    const obs = new Map<string, unknown>();
    const t = await twinSubject(3);
    await scenarios[
      'sync: a power loss keeps synced writes only; a later synced write covers earlier unsynced ones'
    ]!.run(t, (l, v) => obs.set(`sync/${l}`, v));
    const u = await twinSubject(3);
    await scenarios[
      'trailing window: createSnapshot compacts to trailingEntries behind it, also after recovery'
    ]!.run(u, (l, v) => obs.set(`window/${l}`, v));
    const w = await twinSubject(100);
    await scenarios[
      'failed save: rejects, is not visible, stops the storage; a power loss drops it, the reopened storage works'
    ]!.run(w, (l, v) => obs.set(`fail/${l}`, v));
    const x = await twinSubject(100);
    await scenarios['delayed save: nothing shows or resolves while held; order is kept on release']!.run(
      x,
      (l, v) => obs.set(`delay/${l}`, v),
    );
    const d = (k: string) => obs.get(k) as ReturnType<typeof dump>;
    expect(d('sync/visible before the power loss')).toMatchObject({ last: 5, hardState: hs(1, 1, 2) });
    expect(d('sync/after the power loss')).toMatchObject({ last: 3, hardState: hs(1, 1, 0) });
    expect(d('sync/after a second power loss')).toMatchObject({ last: 6, hardState: hs(1, 1, 4) });
    expect(d('window/after the first snapshot')).toMatchObject({
      first: 2,
      last: 10,
      snapshot: { index: 4 },
    });
    expect(d('window/after the snapshot')).toMatchObject({ first: 6, last: 10, snapshot: { index: 8 } });
    expect(d('window/after the power loss')).toMatchObject({ first: 6, last: 10, snapshot: { index: 8 } });
    expect(d('window/after the second snapshot')).toMatchObject({
      first: 10,
      last: 12,
      snapshot: { index: 12 },
    });
    expect(obs.get('fail/the failed save')).toBe('ERR_STORAGE_FAILED');
    expect(obs.get('fail/a later save')).toBe('ERR_STORAGE_FAILED');
    expect(obs.get('fail/a snapshot')).toBe('ERR_STORAGE_FAILED');
    expect(d('fail/visible')).toMatchObject({ last: 2 });
    expect(d('fail/after the power loss')).toMatchObject({ last: 2 });
    expect(obs.get('fail/a save after reopening')).toBe('ok');
    expect(obs.get('delay/resolved while held')).toEqual([]);
    expect(d('delay/visible while held')).toMatchObject({ last: 2 });
    expect(obs.get('delay/resolution order')).toEqual(['a', 'b']);
    expect(d('delay/visible after release')).toMatchObject({ last: 4, hardState: hs(1, 1, 4) });
  });
});
