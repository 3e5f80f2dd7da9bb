// What a caller waiting on a leader gets when that leader loses its term: an answer at once, never
// a wait for the timeout, and a definite one where the node already knows it (issue 9, FS-3 work).
import { afterEach, describe, expect, it } from 'vitest';
import type { Entry } from '../raft/types.js';
import { encodeKvCommand, type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { ProposalNotCommittedError, ProposalOutcomeUnknownError } from './errors.js';
import { MemoryNetwork, MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import { seeded } from './test-doubles.js';

interface Member {
  id: number;
  node: FloeNode<KvResult>;
  storage: MemoryNodeStorage;
}

const running: Member[] = [];
const members = [1, 2, 3].map((id) => ({ id, peerAddr: `mem:${id}` }));

/**
 * Three members. A timeout no test waits for (60 s), so every answer below comes from the
 * leadership change itself. `slow` members get a very long election timeout: they campaign only
 * when told to (leadership transfer), and as leaders they notice a lost quorum only after it.
 */
function cluster(net: MemoryNetwork, slow: number[] = []): Member[] {
  const out = members.map((m) => {
    const storage = new MemoryNodeStorage({ voters: [1, 2, 3], learners: [] });
    const transport = net.endpoint(m.id);
    const node = new FloeNode<KvResult>({
      id: m.id,
      storage,
      transport,
      stateMachine: new KvStateMachine(),
      initialMembers: members,
      tickMs: 10,
      electionTicks: slow.includes(m.id) ? 100_000 : 10,
      random: seeded(m.id * 7919),
      proposalTimeoutMs: 60_000,
    });
    transport.bind(node);
    return { id: m.id, node, storage };
  });
  running.push(...out);
  for (const m of out) m.node.start();
  return out;
}

async function leaderOf(ms: Member[]): Promise<Member> {
  for (;;) {
    const l = ms.find((m) => !m.node.stopped && m.node.isLeader);
    if (l) return l;
    await Promise.race(ms.map((m) => new Promise<void>((r) => m.node.once('role', () => r()))));
  }
}

const settled = <T>(p: Promise<T>): Promise<T | Error> => p.catch((e: Error) => e);
const incr = encodeKvCommand({ op: 'incr', key: 'c', by: '1' });

function expectLeadershipLost(err: unknown): void {
  expect(err).toBeInstanceOf(ProposalOutcomeUnknownError);
  expect((err as ProposalOutcomeUnknownError).reason).toBe('leadershipLost');
}

afterEach(async () => {
  await Promise.all(running.splice(0).map((m) => m.node.stop('test over')));
});

describe('a leader that loses its term answers what waits on it at once', () => {
  it('a membership change pending when the leader loses its term fails at once with an outcome-unknown error', async () => {
    const net = new MemoryNetwork();
    const nodes = cluster(net);
    const leader = await leaderOf(nodes);
    await leader.node.propose(incr); // the term's no-op is committed: conf changes are allowed
    const others = nodes.filter((m) => m !== leader);
    net.isolate(
      leader.id,
      others.map((m) => m.id),
    );
    const change = settled(leader.node.addLearner({ id: 4, peerAddr: 'mem:4' }));
    // Cut off, it steps down at its next check-quorum round (or when it hears of a newer term).
    expectLeadershipLost(await change);
    expect(leader.node.isLeader).toBe(false);
  });

  it('a leadership transfer pending when the leader steps down in its own term fails at once', async () => {
    const net = new MemoryNetwork();
    const nodes = cluster(net);
    const leader = await leaderOf(nodes);
    const to = nodes.find((m) => m !== leader)!;
    net.isolate(
      leader.id,
      nodes.filter((m) => m !== leader).map((m) => m.id),
    );
    const transfer = settled(leader.node.transferLeadership(to.id, 60_000));
    expectLeadershipLost(await transfer);
  });

  it('a leadership transfer resolves once the transferee leads (losing the term on the way is expected)', async () => {
    const net = new MemoryNetwork();
    const nodes = cluster(net);
    const leader = await leaderOf(nodes);
    await leader.node.propose(incr);
    const to = nodes.find((m) => m !== leader)!;
    await leader.node.transferLeadership(to.id, 60_000);
    expect(leader.node.leaderId).toBe(to.id);
  });

  /**
   * Node 1 leads with a check-quorum period far longer than the test. It is cut off, proposes, and
   * the others elect a leader that commits its own entries at the same indexes. Node 1 then gets
   * the append that new leader sends it (built from the new leader's log): it learns in one step
   * that its term is over and which entries are committed at those indexes.
   */
  async function oldLeaderOverwritten(): Promise<{
    old: Member;
    fresh: Member;
    pending: Promise<KvResult | Error>;
    at: number;
  }> {
    const net = new MemoryNetwork();
    const nodes = cluster(net, [1]);
    const first = await leaderOf(nodes);
    await first.node.propose(incr);
    const old = nodes[0]!;
    await first.node.transferLeadership(old.id, 60_000);
    await old.node.propose(incr);
    const others = nodes.filter((m) => m !== old);
    net.isolate(
      old.id,
      others.map((m) => m.id),
    );
    const at = old.node.status().lastIndex + 1;
    const pending = settled(old.node.propose(incr));
    const fresh = await leaderOf(others);
    await fresh.node.propose(incr); // commits the new leader's entries at `at` and after
    expect(fresh.storage.storage.term(at)).toBeGreaterThan(old.storage.storage.term(at - 1));
    return { old, fresh, pending, at };
  }

  function appendFrom(fresh: Member, to: Member, prev: number, entries: Entry[]) {
    const st = fresh.node.status();
    to.node.onMessage({
      type: 'app',
      from: fresh.id,
      to: to.id,
      term: st.term,
      logIndex: prev,
      logTerm: fresh.storage.storage.term(prev),
      entries,
      commit: st.commit,
    });
  }

  it('a proposal whose index the new leader committed with another entry fails with ProposalNotCommittedError', async () => {
    const { old, fresh, pending, at } = await oldLeaderOverwritten();
    expect(old.node.isLeader).toBe(true); // still believes it leads
    const st = fresh.storage.storage;
    appendFrom(fresh, old, at - 1, st.entries(at, st.lastIndex() + 1));
    const err = await pending;
    expect(err).toBeInstanceOf(ProposalNotCommittedError);
    expect((err as ProposalNotCommittedError).index).toBe(at);
    expect((err as Error).message).toMatch(/was not committed: the entry committed there is from term/);
  });

  it('proposals the new leader committed as they were are answered with their results, also past one Ready’s worth', async () => {
    const { old, fresh, pending, at } = await oldLeaderOverwritten();
    // More proposals than one Ready hands out as committed (4096 by default): the rest are applied
    // by the next Ready, after this node knows it no longer leads.
    const more = Array.from({ length: 4100 }, () => settled(old.node.propose(incr)));
    const last = at + more.length;
    while (old.storage.storage.lastIndex() < last) await new Promise((r) => setImmediate(r));
    // As if the new leader had received the old leader's entries before the cut (it can win with
    // them): the append keeps them and commits a no-op of the new term after them.
    const term = fresh.node.status().term;
    old.node.onMessage({
      type: 'app',
      from: fresh.id,
      to: old.id,
      term,
      logIndex: last,
      logTerm: old.storage.storage.term(last),
      entries: [{ type: 'normal', term, index: last + 1, data: new Uint8Array() }],
      commit: last + 1,
    });
    for (const r of await Promise.all([pending, ...more])) expect(r).toMatchObject({ ok: true });
    expect(old.node.isLeader).toBe(false);
  });
});
