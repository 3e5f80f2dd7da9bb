// The strict reconfiguration check of removeMember (FS-20; like etcd's --strict-reconfig-check): the
// leader refuses to remove a voter when too few of the voters that would remain are known active to
// form a quorum of the new configuration. A cluster of in-process nodes on virtual timers and a
// virtual clock, with a network that delivers after a fixed virtual delay (so the moment between a
// check-quorum round clearing the leader's marks and the answers setting them again exists).
import { describe, expect, it } from 'vitest';
import type { Message, NodeId } from '../raft/types.js';
import { encodeKvCommand, type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { UnsafeRemovalError } from './errors.js';
import { MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import type { NodeClock, NodeTransport, TransportSink } from './seams.js';
import { VirtualTimers } from './test-doubles.js';

const TICK_MS = 10;
const ELECTION_TICKS = 10;
const LATENCY_MS = 3;

function seeded(seed: number) {
  let s = seed >>> 0;
  return (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

/** Nodes on one virtual clock; `down` ids neither send nor receive (a stopped process, as the leader sees it). */
function cluster(size: number) {
  const vt = new VirtualTimers();
  const clock: NodeClock = { monotonicMs: () => vt.now, wallMs: () => 1_800_000_000_000 + vt.now };
  const ids = Array.from({ length: size }, (_, i) => i + 1);
  const sinks = new Map<NodeId, TransportSink>();
  const down = new Set<NodeId>();
  const transport = (): NodeTransport => ({
    send(messages: Message[]) {
      for (const m of messages) {
        if (down.has(m.from) || down.has(m.to)) {
          if (m.type === 'snap')
            vt.setTimeout(() => sinks.get(m.from)?.onSnapshotStatus(m.to, false), LATENCY_MS);
          continue;
        }
        vt.setTimeout(() => {
          if (down.has(m.to) || down.has(m.from)) return;
          sinks.get(m.to)?.onMessage(m);
          if (m.type === 'snap') sinks.get(m.from)?.onSnapshotStatus(m.to, true);
        }, LATENCY_MS);
      }
    },
    addPeer() {},
    removePeer() {},
    async close() {},
  });
  const nodes = ids.map((id) => {
    const n = new FloeNode<KvResult>({
      id,
      storage: new MemoryNodeStorage({ voters: ids, learners: [] }),
      transport: transport(),
      stateMachine: new KvStateMachine(),
      initialMembers: ids.map((i) => ({ id: i, peerAddr: `mem:${i}` })),
      tickMs: TICK_MS,
      electionTicks: ELECTION_TICKS,
      random: seeded(id * 7919),
      clock,
      timers: vt,
      incarnation: new Uint8Array(8).fill(id),
      proposalTimeoutMs: 2_000,
    });
    sinks.set(id, n);
    return n;
  });
  for (const n of nodes) n.start();

  /** Runs virtual time until `pred` holds (at most `ms`), in steps of 1 ms. */
  const until = async (pred: () => boolean, ms = 5_000): Promise<void> => {
    for (let t = 0; t < ms && !pred(); t++) await vt.advance(1);
    if (!pred()) throw new Error(`condition not met within ${ms} virtual ms`);
  };
  /** Settles a promise while virtual time runs (its outcome: the value or the error). */
  const outcome = async <T>(p: Promise<T>, ms = 5_000): Promise<{ ok: T } | { err: unknown }> => {
    let r: { ok: T } | { err: unknown } | undefined;
    p.then(
      (ok) => (r = { ok }),
      (err: unknown) => (r = { err }),
    );
    await until(() => r !== undefined, ms);
    return r as { ok: T } | { err: unknown };
  };
  const leader = async (): Promise<FloeNode<KvResult>> => {
    await until(() => nodes.some((n) => n.isLeader && !down.has(n.id)));
    return nodes.find((n) => n.isLeader && !down.has(n.id)) as FloeNode<KvResult>;
  };
  const stopAll = async () => {
    await outcome(Promise.all(nodes.map((n) => n.stop('test over'))), 60_000);
  };
  return { vt, nodes, down, until, outcome, leader, stopAll };
}

const put = (v: string) => encodeKvCommand({ op: 'put', key: 'k', value: v });

/** The leader and its followers, after one write committed on all (every follower has answered). */
async function settled(c: ReturnType<typeof cluster>) {
  const l = await c.leader();
  const w = await c.outcome(l.propose(put('a')));
  expect(w).toHaveProperty('ok');
  const followers = c.nodes.filter((n) => n !== l);
  return { l, followers };
}

/** Downs `id` and runs time until the leader's check-quorum round has forgotten it. */
async function takeDown(c: ReturnType<typeof cluster>, l: FloeNode<KvResult>, id: NodeId) {
  c.down.add(id);
  await c.until(() => l.status().progress?.[id]?.recentActive === false);
  // A full round more: the leader kept its quorum (the others answer), so it still leads.
  await c.vt.advance(ELECTION_TICKS * TICK_MS);
  expect(l.isLeader).toBe(true);
}

describe('removeMember: the strict reconfiguration check (FS-20)', () => {
  it('refuses to remove a healthy voter while another voter is down', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    const [down, healthy] = followers as [FloeNode<KvResult>, FloeNode<KvResult>];
    await takeDown(c, l, down.id);
    const before = l.status();
    const r = await c.outcome(l.removeMember(healthy.id));
    expect('err' in r && r.err).toBeInstanceOf(UnsafeRemovalError);
    const err = (r as { err: UnsafeRemovalError }).err;
    expect(err.remaining).toEqual([l.id, down.id].sort((a, b) => a - b));
    expect(err.active).toEqual([l.id]);
    expect(err.quorum).toBe(2);
    expect(err.message).toContain(`removing voter ${healthy.id} would leave voters [`);
    expect(err.message).toMatch(/1 is known active .*needs 2/);
    // Nothing was proposed, and the cluster is as live as before.
    expect(l.status().lastIndex).toBe(before.lastIndex);
    expect(l.status().conf.voters).toEqual([1, 2, 3]);
    expect(await c.outcome(l.propose(put('b')))).toHaveProperty('ok');
    await c.stopAll();
  });

  it('removes the down voter while the other two are up', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    const [down, healthy] = followers as [FloeNode<KvResult>, FloeNode<KvResult>];
    await takeDown(c, l, down.id);
    expect(await c.outcome(l.removeMember(down.id))).toEqual({ ok: undefined });
    expect(l.status().conf.voters).toEqual([l.id, healthy.id].sort((a, b) => a - b));
    expect(await c.outcome(l.propose(put('b')))).toHaveProperty('ok');
    await c.stopAll();
  });

  it('force removes a healthy voter while another voter is down (the operator knows it comes back)', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    const [down, healthy] = followers as [FloeNode<KvResult>, FloeNode<KvResult>];
    await takeDown(c, l, down.id);
    expect(await c.outcome(l.removeMember(healthy.id, { force: true }))).toEqual({ ok: undefined });
    expect(l.status().conf.voters).toEqual([l.id, down.id].sort((a, b) => a - b));
    await c.stopAll();
  });

  it('refuses to remove the leader itself while another voter is down', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    const [down, healthy] = followers as [FloeNode<KvResult>, FloeNode<KvResult>];
    await takeDown(c, l, down.id);
    const r = await c.outcome(l.removeMember(l.id));
    expect('err' in r && r.err).toBeInstanceOf(UnsafeRemovalError);
    // The leader does not count itself once it is the one removed.
    expect((r as { err: UnsafeRemovalError }).err.remaining).toEqual(
      [down.id, healthy.id].sort((a, b) => a - b),
    );
    expect((r as { err: UnsafeRemovalError }).err.active).toEqual([healthy.id]);
    expect(l.status().conf.voters).toEqual([1, 2, 3]);
    await c.stopAll();
  });

  it('two voters, both up: the leader removes its peer (the leader alone is a quorum of the new configuration)', async () => {
    // With the peer down there is nothing to check: the leader loses its own quorum in the same round that
    // forgets the peer (check-quorum), and a removal could not commit without the peer anyway.
    const c = cluster(2);
    const l = await c.leader();
    const peer = c.nodes.find((n) => n !== l) as FloeNode<KvResult>;
    expect(await c.outcome(l.propose(put('a')))).toHaveProperty('ok');
    expect(await c.outcome(l.removeMember(peer.id))).toEqual({ ok: undefined });
    expect(l.status().conf.voters).toEqual([l.id]);
    await c.stopAll();
  });

  it('does not refuse a healthy removal in the moment a check-quorum round has cleared the answers', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    // The leader forgets who answered at the start of every round; its heartbeat's answers come back
    // LATENCY_MS * 2 later. Asked in between, all three voters are up.
    await c.until(() => followers.every((f) => l.status().progress?.[f.id]?.recentActive === false));
    expect(await c.outcome(l.removeMember(followers[0]!.id))).toEqual({ ok: undefined });
    expect(l.status().conf.voters).not.toContain(followers[0]!.id);
    await c.stopAll();
  });

  it('needs no check to remove a learner, and leaves a non-member to the core', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    await takeDown(c, l, followers[0]!.id);
    // Member 9 is never started: it holds no vote, so removing it changes no quorum.
    expect(await c.outcome(l.addLearner({ id: 9, peerAddr: 'mem:9' }))).toEqual({ ok: undefined });
    expect(await c.outcome(l.removeMember(9))).toEqual({ ok: undefined });
    expect(l.status().conf.learners).toEqual([]);
    const r = await c.outcome(l.removeMember(42));
    expect('err' in r && String(r.err)).toMatch(/42 is not a member/);
    await c.stopAll();
  });
});
