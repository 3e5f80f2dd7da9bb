// The strict reconfiguration check of removeMember (FS-20; like etcd's --strict-reconfig-check): the
// leader refuses to remove a voter when too few of the voters that would remain are known active to
// form a quorum of the new configuration. A cluster of in-process nodes on virtual timers and a
// virtual clock, with a network that delivers after a fixed virtual delay (so the moment between a
// check-quorum round clearing the leader's marks and the answers setting them again exists).
import { describe, expect, it } from 'vitest';
import type { Message, NodeId } from '../raft/types.js';
import { encodeKvCommand, type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { NotLeaderError, UnsafeRemovalError } from './errors.js';
import { MemoryNetwork, MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import type { NodeClock } from './seams.js';
import { seeded, VirtualTimers } from './test-doubles.js';

const TICK_MS = 10;
const ELECTION_TICKS = 10;
const LATENCY_MS = 3;

/** Nodes on one virtual clock; `down` ids neither send nor receive (a stopped process, as the leader sees it). */
function cluster(size: number) {
  const vt = new VirtualTimers();
  const clock: NodeClock = { monotonicMs: () => vt.now, wallMs: () => 1_800_000_000_000 + vt.now };
  const ids = Array.from({ length: size }, (_, i) => i + 1);
  const down = new Set<NodeId>();
  /** Review FS-22: messages for which `lose.fn` answers true are lost on the wire (decided when sent). */
  const lose: { fn?: (m: Message) => boolean } = {};
  // The memory twin keeps the production transport's rules: only peers talk, a removed node is told so (FS-23).
  const net = new MemoryNetwork({
    schedule: (fn) => vt.setTimeout(fn, LATENCY_MS),
    blocked: (from, to) => down.has(from) || down.has(to),
    lose: (m) => lose.fn?.(m) === true,
  });
  const nodes = ids.map((id) => {
    const transport = net.endpoint(id);
    const n = new FloeNode<KvResult>({
      id,
      storage: new MemoryNodeStorage({ voters: ids, learners: [] }),
      transport,
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
    transport.bind(n);
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
  return { vt, nodes, down, lose, until, outcome, leader, stopAll };
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

// ---- adversarial review (rev-strictreconf) -------------------------------------------------------

describe('removeMember: the strict reconfiguration check, review probes', () => {
  for (const pick of [0, 1] as const) {
    it(`a safe removal asked the moment a leader is elected is not refused as a pending change (follower #${pick})`, async () => {
      const c = cluster(3);
      // As soon as a leader is known (its no-op on its way): every voter is up, removing either follower is safe.
      const l = await c.leader();
      const target = c.nodes.filter((n) => n !== l)[pick] as FloeNode<KvResult>;
      const r = await c.outcome(l.removeMember(target.id));
      expect(r).toEqual({ ok: undefined });
      expect(l.status().conf.voters).not.toContain(target.id);
      await c.stopAll();
    });
  }

  it('removing the dead old leader the moment its successor is elected is not refused as a pending change', async () => {
    // The usual operator (or automation) sequence: the leader dies, a new one is elected, the dead one is removed.
    // The new leader's only other voter answers its no-op: that one answer both marks it active and commits the
    // no-op, and the check lets the removal through before the no-op is applied.
    const c = cluster(3);
    const { l: old } = await settled(c);
    c.down.add(old.id);
    const l = await c.leader();
    expect(l).not.toBe(old);
    const r = await c.outcome(l.removeMember(old.id));
    expect(r).toEqual({ ok: undefined });
    expect(l.status().conf.voters).not.toContain(old.id);
    await c.stopAll();
  });

  it('the leader stepping down mid-wait settles the removal with NotLeaderError, proposing nothing', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    const [a, b] = followers as [FloeNode<KvResult>, FloeNode<KvResult>];
    await takeDown(c, l, a.id);
    const before = l.status().lastIndex;
    const p = c.outcome(l.removeMember(b.id));
    // Mid-wait the leadership moves to b (a transfer, which the core allows while the removal is not proposed).
    await c.vt.advance(1);
    void l.transferLeadership(b.id).catch(() => undefined);
    const r = await p;
    expect('err' in r && r.err).toBeInstanceOf(NotLeaderError);
    expect(l.status().lastIndex).toBe(before);
    await c.until(() => b.isLeader);
    await c.stopAll();
  });

  it('a node stopped mid-wait settles the removal and leaves no timer behind', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    const [a, b] = followers as [FloeNode<KvResult>, FloeNode<KvResult>];
    await takeDown(c, l, a.id);
    const p = l.removeMember(b.id);
    await c.vt.advance(TICK_MS);
    const stopped = c.outcome(Promise.all(c.nodes.map((n) => n.stop('test over'))), 60_000);
    const r = await c.outcome(p);
    // Which one depends on stop's leadership hand-over; settle it must.
    expect('err' in r && (r.err as Error).name).toMatch(
      /^(NodeStoppedError|NotLeaderError|UnsafeRemovalError)$/,
    );
    await stopped;
    expect(c.vt.pendingTimers).toBe(0);
  });

  it('two removals at once: one goes through, the other waits for it to apply and is then checked against the membership it left', async () => {
    // Four voters, one down: removing x or y alone is safe ({l, y, dead}: l and y answer), both together are not
    // ({l, dead}: only l answers). Asked together in the moment a check-quorum round cleared the marks, so both wait.
    const c = cluster(4);
    const { l } = await settled(c);
    const [x, y, dead] = c.nodes.filter((n) => n !== l).map((n) => n.id) as [number, number, number];
    await takeDown(c, l, dead);
    await c.until(() => [x, y].every((id) => l.status().progress?.[id]?.recentActive === false));
    const outs = await Promise.all([c.outcome(l.removeMember(x)), c.outcome(l.removeMember(y))]);
    const gone = outs.findIndex((o) => 'ok' in o);
    expect(gone).toBeGreaterThanOrEqual(0);
    // The core refused the second while the first was pending; it waited for the apply and checked again (H1).
    const other = outs[1 - gone] as { err: unknown };
    expect(other.err).toBeInstanceOf(UnsafeRemovalError);
    const [removed, kept] = gone === 0 ? [x, y] : [y, x];
    expect(l.status().conf.voters).not.toContain(removed);
    expect(l.status().conf.voters).toContain(kept);
    const again = await c.outcome(l.removeMember(kept));
    expect('err' in again && again.err).toBeInstanceOf(UnsafeRemovalError);
    await c.stopAll();
  });

  it('five voters, two down: removing a down voter passes, removing a healthy one is refused', async () => {
    const c = cluster(5);
    const { l, followers } = await settled(c);
    const [d1, d2, h] = followers as [FloeNode<KvResult>, FloeNode<KvResult>, FloeNode<KvResult>];
    c.down.add(d1.id);
    await takeDown(c, l, d2.id);
    const bad = await c.outcome(l.removeMember(h.id));
    expect('err' in bad && bad.err).toBeInstanceOf(UnsafeRemovalError);
    expect(await c.outcome(l.removeMember(d1.id))).toEqual({ ok: undefined });
    await c.stopAll();
  });

  it('demoting a healthy voter to a learner while another voter is down is refused like removing it', async () => {
    // addLearner(id) of a voter demotes it (the core allows it): the voters shrink just as with removeMember.
    const c = cluster(3);
    const { l, followers } = await settled(c);
    const [down, healthy] = followers as [FloeNode<KvResult>, FloeNode<KvResult>];
    await takeDown(c, l, down.id);
    const r = await c.outcome(l.addLearner({ id: healthy.id, peerAddr: `mem:${healthy.id}` }));
    expect(l.status().conf.voters).toEqual([1, 2, 3]);
    expect('err' in r && r.err).toBeInstanceOf(UnsafeRemovalError);
    await c.stopAll();
  });
});

// ---- FS-22: the leader removing itself ------------------------------------------------------------

/**
 * What an operator's `floe cluster remove <id> --endpoint <node>` does: ask `via`; on a 307 (NotLeaderError naming the
 * leader), ask the leader it names, once.
 */
async function removeAsOperator(
  c: ReturnType<typeof cluster>,
  via: FloeNode<KvResult>,
  id: NodeId,
): Promise<{ ok: unknown } | { err: unknown }> {
  const r = await c.outcome(via.removeMember(id));
  if (!('err' in r) || !(r.err instanceof NotLeaderError) || r.err.leader === undefined) return r;
  const leaderId = r.err.leader.id;
  const to = c.nodes.find((n) => n.id === leaderId) as FloeNode<KvResult>;
  return c.outcome(to.removeMember(id));
}

describe('removeMember of the leader itself (FS-22)', () => {
  it('the leader proposes nothing: it hands leadership to a remaining voter and answers NotLeaderError naming it', async () => {
    const c = cluster(2);
    const { l, followers } = await settled(c);
    const peer = followers[0] as FloeNode<KvResult>;
    const before = l.status().lastIndex;
    const r = await c.outcome(l.removeMember(l.id));
    expect('err' in r && r.err).toBeInstanceOf(NotLeaderError);
    expect((r as { err: NotLeaderError }).err.leader?.id).toBe(peer.id);
    expect(peer.isLeader).toBe(true);
    // No membership entry from the old leader: the log grew by the new leader's no-op alone.
    expect(peer.status().conf.voters).toEqual([1, 2]);
    expect(l.status().lastIndex).toBeLessThanOrEqual(before + 1);
    await c.stopAll();
  });

  it('forced past the strict check, the leader still hands over first, to the voter that answers', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    const [down, healthy] = followers as [FloeNode<KvResult>, FloeNode<KvResult>];
    await takeDown(c, l, down.id);
    const r = await c.outcome(l.removeMember(l.id, { force: true }));
    expect('err' in r && r.err).toBeInstanceOf(NotLeaderError);
    expect((r as { err: NotLeaderError }).err.leader?.id).toBe(healthy.id);
    expect(await c.outcome(healthy.removeMember(l.id, { force: true }))).toEqual({ ok: undefined });
    expect(healthy.status().conf.voters).toEqual([down.id, healthy.id].sort((x, y) => x - y));
    await c.stopAll();
  });

  for (const size of [2, 3] as const) {
    it(`${size} voters: the leader removes itself, its machine is switched off as soon as the call returns, and the voters left elect a leader`, async () => {
      const c = cluster(size);
      const { l } = await settled(c);
      const r = await removeAsOperator(c, l, l.id);
      expect(r).toEqual({ ok: undefined });
      // Switched off at once: whatever it had not delivered yet is lost with it (the commit index of its removal).
      c.down.add(l.id);
      const rest = c.nodes.filter((n) => n !== l);
      const ids = rest.map((n) => n.id).join();
      // A leader of the configuration without it (a new leader applies the removal once its own no-op commits).
      await c.until(() => rest.some((n) => n.isLeader && n.status().conf.voters.join() === ids), 10_000);
      const nl = rest.find((n) => n.isLeader) as FloeNode<KvResult>;
      expect(await c.outcome(nl.propose(put('after')))).toHaveProperty('ok');
      await c.stopAll();
    });
  }
});

// ---- adversarial review of FS-22 (rev-fs22) -------------------------------------------------------

/** What `floe cluster remove` does: ask `via`, follow NotLeaderError's leader (up to 4 hops, as the CLI). */
async function removeFollowing(
  c: ReturnType<typeof cluster>,
  via: FloeNode<KvResult>,
  id: NodeId,
  op: (n: FloeNode<KvResult>) => Promise<void> = (n) => n.removeMember(id),
): Promise<{ ok: unknown } | { err: unknown }> {
  let at = via;
  for (let hop = 0; ; hop++) {
    const r = await c.outcome(op(at), 20_000);
    if (hop >= 3 || !('err' in r) || !(r.err instanceof NotLeaderError) || r.err.leader === undefined)
      return r;
    const leaderId = r.err.leader.id;
    at = c.nodes.find((n) => n.id === leaderId) as FloeNode<KvResult>;
  }
}

describe('removeMember of the leader itself (FS-22), review probes', () => {
  for (const size of [2, 3, 4, 5] as const) {
    // Also run for seeds 1-40 at 30% loss while reviewing: all passed.
    for (const seed of [1, 2, 3]) {
      it(`${size} voters, 15% of messages lost (seed ${seed}): once the operator's removal of the leader succeeds and it is switched off, the rest elect a leader without it`, async () => {
        const c = cluster(size);
        const { l } = await settled(c);
        const rnd = seeded(seed * 104729);
        c.lose.fn = () => rnd(100) < 15;
        let r: { ok: unknown } | { err: unknown } = { err: undefined };
        // The operator retries what fails (a removal under loss may time out or find no one to hand over to).
        for (let attempt = 0; attempt < 6 && !('ok' in r); attempt++) {
          // Always asks the node being removed (it may lead again, or the CLI is pointed at it).
          r = await removeFollowing(c, l, l.id);
          if ('ok' in r) break;
          // Already removed by an attempt whose answer was lost: done.
          const lead = c.nodes.find((n) => n.isLeader && n !== l);
          if (lead && !lead.status().conf.voters.includes(l.id)) {
            r = { ok: undefined };
            break;
          }
          await c.vt.advance(ELECTION_TICKS * TICK_MS);
        }
        expect(r).toEqual({ ok: undefined });
        c.down.add(l.id);
        const rest = c.nodes.filter((n) => n !== l);
        const ids = rest.map((n) => n.id).join();
        await c.until(() => rest.some((n) => n.isLeader && n.status().conf.voters.join() === ids), 20_000);
        const nl = rest.find((n) => n.isLeader) as FloeNode<KvResult>;
        c.lose.fn = undefined;
        expect(await c.outcome(nl.propose(put('after')))).toHaveProperty('ok');
        await c.stopAll();
      });
    }
  }

  // FS-23 (fixed): docs/node.md, "a removed node stops by itself". Before FS-22's fix a leader removing itself computed
  // the commit itself and always stopped; now it is a follower, like any removed follower, and the new leader stops
  // talking to it once it has applied the removal. The removed node learns it from the transport: a member that
  // applied the removal refuses its connection with the removal verdict (decision 0008), which the memory twin gives
  // as the production handshake does. Before the fix it lingered as a pre-candidate.
  it('FS-23: the removed old leader stops by itself even when the new leader’s message carrying the commit of its removal is lost', async () => {
    const c = cluster(2);
    const { l, followers } = await settled(c);
    const peer = followers[0] as FloeNode<KvResult>;
    const r1 = await c.outcome(l.removeMember(l.id));
    expect('err' in r1 && r1.err).toBeInstanceOf(NotLeaderError);
    expect(peer.isLeader).toBe(true);
    // The removal's entry: the first append from the new leader carrying a membership entry.
    let removalAt = Number.POSITIVE_INFINITY;
    c.lose.fn = (m) => {
      if (m.from !== peer.id || m.to !== l.id) return false;
      if (m.type === 'app') {
        const conf = m.entries.find((e) => e.type === 'conf');
        if (conf && conf.index < removalAt) removalAt = conf.index;
      }
      const drop = 'commit' in m && (m as { commit: number }).commit >= removalAt;
      return drop;
    };
    const p = c.outcome(peer.removeMember(l.id));
    const r2 = await p;
    expect(r2).toEqual({ ok: undefined });
    // The old leader is not switched off: it learns it was removed (from the new leader) and stops.
    await c.until(() => l.stopped !== undefined, 10 * ELECTION_TICKS * TICK_MS);
    expect(l.stopped).toBe(
      `removed from the cluster (told by node ${peer.id}: removal at index ${removalAt})`,
    );
    expect(l.status().appliedIndex).toBeLessThan(removalAt);
    await c.stopAll();
  });

  it('the transferee crashing mid-transfer (3 voters): the call settles within bounds, proposes nothing, the leader keeps leading', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    const before = l.status().lastIndex;
    const t0 = c.vt.now;
    const p = c.outcome(l.removeMember(l.id), 20_000);
    // Both followers answer with the same match: the first voter in order is chosen. It dies before TimeoutNow lands.
    const target = Math.min(...followers.map((f) => f.id));
    await c.vt.advance(1);
    c.down.add(target);
    const r = await p;
    expect('err' in r && (r.err as Error).name).toBe('ProposalDroppedError');
    expect(c.vt.now - t0).toBeLessThanOrEqual(3 * ELECTION_TICKS * TICK_MS);
    expect(l.isLeader).toBe(true);
    expect(l.status().lastIndex).toBe(before);
    await c.stopAll();
  });

  it('asked twice at once, the leader proposes nothing and both calls name the same new leader', async () => {
    const c = cluster(3);
    const { l } = await settled(c);
    const [a, b] = await Promise.all([c.outcome(l.removeMember(l.id)), c.outcome(l.removeMember(l.id))]);
    expect('err' in a && a.err).toBeInstanceOf(NotLeaderError);
    expect('err' in b && b.err).toBeInstanceOf(NotLeaderError);
    const ea = (a as { err: NotLeaderError }).err;
    const eb = (b as { err: NotLeaderError }).err;
    expect(ea.leader?.id).toBe(eb.leader?.id);
    const nl = c.nodes.find((n) => n.id === ea.leader?.id) as FloeNode<KvResult>;
    expect(nl.isLeader).toBe(true);
    expect(nl.status().conf.voters).toEqual([1, 2, 3]);
    await c.stopAll();
  });

  for (const size of [2, 3] as const) {
    it(`${size} voters: addLearner(self) on the leader hands over; following it demotes the old leader, which keeps running as a learner; switched off, the voters left lead`, async () => {
      const c = cluster(size);
      const { l } = await settled(c);
      const r = await removeFollowing(c, l, l.id, (n) => n.addLearner({ id: l.id, peerAddr: `mem:${l.id}` }));
      expect(r).toEqual({ ok: undefined });
      c.down.add(l.id);
      const rest = c.nodes.filter((n) => n !== l);
      const ids = rest.map((n) => n.id).join();
      await c.until(() => rest.some((n) => n.isLeader && n.status().conf.voters.join() === ids), 10_000);
      const nl = rest.find((n) => n.isLeader) as FloeNode<KvResult>;
      expect(nl.status().conf.learners).toEqual([l.id]);
      expect(await c.outcome(nl.propose(put('after')))).toHaveProperty('ok');
      await c.stopAll();
    });
  }

  it('stop() mid-hand-over settles the removal and leaves no timer behind', async () => {
    const c = cluster(3);
    const { l } = await settled(c);
    const p = c.outcome(l.removeMember(l.id), 20_000);
    await c.vt.advance(1);
    const stopped = c.outcome(Promise.all(c.nodes.map((n) => n.stop('test over'))), 60_000);
    const r = await p;
    expect('err' in r && (r.err as Error).name).toMatch(/^(NodeStoppedError|NotLeaderError)$/);
    await stopped;
    expect(c.vt.pendingTimers).toBe(0);
  });

  it('asked through a follower (the CLI follows the leader, then the new leader), the leader ends removed and the rest lead', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    const r = await removeFollowing(c, followers[1] as FloeNode<KvResult>, l.id);
    expect(r).toEqual({ ok: undefined });
    c.down.add(l.id);
    const rest = c.nodes.filter((n) => n !== l);
    const ids = rest.map((n) => n.id).join();
    await c.until(() => rest.some((n) => n.isLeader && n.status().conf.voters.join() === ids), 10_000);
    await c.stopAll();
  });

  it('the last voter removing or demoting itself is refused within a round, proposing nothing', async () => {
    const c = cluster(1);
    const { l } = await settled(c);
    const before = l.status().lastIndex;
    const t0 = c.vt.now;
    for (const op of [
      () => l.removeMember(l.id),
      () => l.addLearner({ id: l.id, peerAddr: `mem:${l.id}` }),
    ]) {
      const r = await c.outcome(op());
      expect('err' in r && (r.err as Error).name).toBe('InvalidConfChangeError');
    }
    expect(c.vt.now - t0).toBeLessThanOrEqual(2 * (ELECTION_TICKS + 1) * TICK_MS + 10);
    expect(l.status().lastIndex).toBe(before);
    expect(l.isLeader).toBe(true);
    await c.stopAll();
  });
});

describe('stop(): the leader hands over to a voter that answers', () => {
  it('a down voter with the longest log is passed over for one that answers: the successor leads at once', async () => {
    const c = cluster(3);
    const { l, followers } = await settled(c);
    const [dead, behind] = followers as [FloeNode<KvResult>, FloeNode<KvResult>];
    // `behind` answers heartbeats but gets no appends: `dead` holds the longer log when it goes down.
    c.lose.fn = (m) => m.to === behind.id && m.type === 'app';
    expect(await c.outcome(l.propose(put('b')))).toHaveProperty('ok');
    await takeDown(c, l, dead.id);
    expect(l.status().progress?.[dead.id]?.match).toBeGreaterThan(
      l.status().progress?.[behind.id]?.match ?? 0,
    );
    // Marks are cleared every round: the moment `behind` has answered in this one.
    await c.until(() => l.status().progress?.[behind.id]?.recentActive === true);
    c.lose.fn = undefined;
    const stopped = c.outcome(l.stop('test over'), 10_000);
    // Within one election timeout: a transfer, not an election after the old leader's silence.
    await c.until(() => behind.isLeader, ELECTION_TICKS * TICK_MS);
    expect(await stopped).toEqual({ ok: undefined });
    await c.stopAll();
  });
});
