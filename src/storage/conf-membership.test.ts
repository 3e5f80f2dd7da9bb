// Finding FS-2: a conf entry carries the membership it results in (ConfChange.resulting, set by the
// leader). The WAL must keep it: a member that joined a running cluster starts from an empty
// membership (the bootstrap membership is in no log entry), so after a restart it can only rebuild
// the right membership from `resulting`; applying the changes one by one to nothing leaves it the
// only voter, and it elects itself alone.
import { describe, expect, it } from 'vitest';
import { RawNode } from '../raft/raw-node.js';
import { seededRandom, TestNetwork } from '../raft/test-network.js';
import type { ConfState, Entry, NodeId } from '../raft/types.js';
import { DurableStorage } from './durable-storage.js';
import { StorageConfigError, StorageUsageError } from './errors.js';
import type { LockOwner } from './lock-file.js';
import { MemoryFs } from './memory-fs.js';
import { ent } from './test-helpers.js';

const DIR = '/floe-conf-test/node-4';

/** Process incarnations: each restart is a new "pid"; only the newest is alive. */
class Incarnations {
  current = 1;
  owner(): LockOwner {
    return { pid: this.current, isAlive: (p) => p === this.current };
  }
}

const enc = new TextEncoder();

/** Conf entries as a leader of {1,2,3} writes them when 4 joins, 1 leaves (with `resulting`). */
function joinEntries(): Entry[] {
  return [
    ent(1, 1),
    {
      type: 'conf',
      index: 2,
      term: 1,
      change: { type: 'remove', nodeId: 1, resulting: { voters: [2, 3], learners: [] } },
    },
    {
      type: 'conf',
      index: 3,
      term: 2,
      change: {
        type: 'addLearner',
        nodeId: 4,
        context: enc.encode('n4:7000'),
        resulting: { voters: [2, 3], learners: [4] },
      },
    },
    {
      type: 'conf',
      index: 4,
      term: 2,
      change: { type: 'addVoter', nodeId: 4, resulting: { voters: [2, 3, 4], learners: [] } },
    },
    {
      type: 'conf',
      index: 5,
      term: 2,
      change: { type: 'addLearner', nodeId: 5, resulting: { voters: [2, 3, 4], learners: [5] } },
    },
    ent(6, 2),
  ];
}

describe('conf entries keep their resulting membership in the WAL (finding FS-2)', () => {
  it('a joined member restarted from its WAL keeps the cluster membership its conf entries carry', async () => {
    const procs = new Incarnations();
    let fs = new MemoryFs();
    const s = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner() }); // joined: no bootstrapConf
    const saved = joinEntries();
    await s.save({ entries: saved, hardState: { term: 2, vote: 0, commit: 6 } }, { sync: true });
    expect(s.storage.entries(1, 7)).toEqual(saved);
    fs = fs.crash({ kind: 'power' });
    procs.current++;
    const r = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner(), segmentBytes: 1024 });
    expect(r.storage.initialState().conf).toEqual({ voters: [], learners: [] });
    expect(r.storage.entries(1, 7)).toEqual(saved);
    // Written again after a segment roll (segment headers in between): still there.
    const more: Entry[] = [
      {
        type: 'conf',
        index: 7,
        term: 3,
        change: { type: 'remove', nodeId: 2, resulting: { voters: [3, 4], learners: [] } },
      },
      { ...ent(8, 3, 2000) },
    ];
    await r.save({ entries: more, hardState: { term: 3, vote: 4, commit: 8 } }, { sync: true });
    await r.close();
    const again = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner() });
    expect(again.segmentNames().length).toBeGreaterThan(1);
    expect(again.storage.entries(1, 9)).toEqual([...saved, ...more]);
    await again.close();
  });

  it('a learner that joined, was promoted and restarted from its WAL counts the whole cluster as voters, and cannot elect itself alone', async () => {
    // A real cluster: 1 leads {1,2,3}; 4 joins with empty storage, is added as a learner, promoted.
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.propose(1, 'before');
    net.stabilize();
    net.addNode(4);
    for (const type of ['addLearner', 'addVoter'] as const) {
      net.node(1).proposeConfChange({ type, nodeId: 4 });
      net.stabilize();
      net.tick(2);
    }
    const want: ConfState = { voters: [1, 2, 3, 4], learners: [] };
    expect(net.node(4).status().conf).toEqual(want);
    // Node 4's durable state goes through DurableStorage (as the node runtime saves its Readies).
    const mem = net.peer(4).storage;
    const log = mem.entries(mem.firstIndex(), mem.lastIndex() + 1);
    expect(log.filter((e) => e.type === 'conf')).toHaveLength(2);
    const procs = new Incarnations();
    let fs = new MemoryFs();
    const s = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner() });
    await s.save({ entries: log, hardState: mem.initialState().hardState }, { sync: true });
    fs = fs.crash({ kind: 'power' });
    procs.current++;
    const ds = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner() });

    // Restart node 4 on it and apply its committed entries, as the runtime does.
    const id: NodeId = 4;
    const node = new RawNode(
      { id, electionTicks: 10, heartbeatTicks: 1, random: seededRandom(id) },
      ds.storage,
    );
    let conf = ds.storage.initialState().conf;
    const drain = async () => {
      while (node.hasReady()) {
        const rd = node.ready();
        await ds.save({ hardState: rd.hardState, entries: rd.entries }, { sync: rd.mustSync });
        for (const e of rd.committedEntries) if (e.type === 'conf') conf = node.applyConfChange(e.change);
        node.advance(rd);
      }
    };
    await drain();
    expect(conf).toEqual(want);
    expect(node.status().conf).toEqual(want);
    // Alone (nobody answers), it must never become leader: it needs 3 of 4 votes.
    for (let i = 0; i < 100; i++) {
      node.tick();
      await drain();
      expect(node.status().role).not.toBe('leader');
    }
    await ds.close();
  });

  it('a joined member whose log (WAL format 2) holds conf entries without their resulting membership refuses to start', async () => {
    const procs = new Incarnations();
    let fs = new MemoryFs();
    const s = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner() });
    const old: Entry[] = [
      ent(1, 1),
      { type: 'conf', index: 2, term: 1, change: { type: 'addLearner', nodeId: 4 } },
      { type: 'conf', index: 3, term: 1, change: { type: 'addVoter', nodeId: 4 } },
    ];
    await s.save({ entries: old, hardState: { term: 1, vote: 0, commit: 3 } }, { sync: true });
    await s.close();
    // Mark the segment as format 2, as a build before format 4 wrote it (same rows otherwise).
    const [seg] = await fs.readdir(`${DIR}/wal`);
    const fh = await fs.open(`${DIR}/wal/${seg}`, 'r+');
    await fh.write(Buffer.from([2]), 7);
    await fh.datasync();
    await fh.close();
    fs = fs.crash({ kind: 'process' });
    procs.current++;
    const err = await DurableStorage.open(DIR, { fs, lockOwner: procs.owner() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageConfigError);
    expect((err as Error).message).toMatch(
      /joined a running cluster .* conf entry 2 without the membership it results in .* let the node rejoin/,
    );
    // A bootstrap member replays the same entries from its bootstrap membership: that is right.
    const boot = new MemoryFs();
    const b = await DurableStorage.open(DIR, {
      fs: boot,
      bootstrapConf: { voters: [1, 2, 3], learners: [] },
    });
    await b.save({ entries: old, hardState: { term: 1, vote: 0, commit: 3 } }, { sync: true });
    await b.close();
    const again = await DurableStorage.open(DIR, { fs: boot });
    expect(again.storage.entries(1, 4)).toEqual(old);
    await again.close();
  });

  it('a conf entry whose resulting membership is malformed is refused at save, naming the entry', async () => {
    const fs = new MemoryFs();
    const s = await DurableStorage.open(DIR, { fs });
    const bad = {
      type: 'conf',
      index: 1,
      term: 1,
      change: { type: 'addVoter', nodeId: 4, resulting: { voters: [1, -2], learners: [] } },
    } as Entry;
    const err = await s.save({ entries: [bad] }, { sync: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageUsageError);
    expect((err as Error).message).toMatch(/conf entry 1: resulting membership/);
    await s.close();
  });
});
