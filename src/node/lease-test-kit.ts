// Shared by the adversarial reviews' tests of decision 0009 (the leader lease): production FloeNodes of a 3-voter
// cluster on virtual timers and clocks, with their messages recorded and delivered by hand.
import { expect } from 'vitest';
import type { Message, VoteRequest } from '../raft/types.js';
import { type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import type { NodeTransport } from './seams.js';
import { VirtualTimers } from './test-doubles.js';

export const TICK = 10;
export const E = 10;
export const WALL0 = 1_800_000_000_000;

/** Node `id` of a 3-voter cluster whose messages are recorded; `clock` moves its clocks, `lockChecks` counts checkLock. */
export function member(id: number, random: (n: number) => number, leaderLease = true) {
  const vt = new VirtualTimers();
  const sent: Message[] = [];
  const transport: NodeTransport = {
    send: (ms) => sent.push(...ms),
    addPeer: () => {},
    removePeer: () => {},
    close: async () => {},
  };
  const clock = { monoSkew: 0, wallSkew: 0 };
  const storage = new MemoryNodeStorage({ voters: [1, 2, 3], learners: [] });
  const lock = { checks: 0 };
  (storage as MemoryNodeStorage & { checkLock(): Promise<void> }).checkLock = async () => {
    lock.checks++;
  };
  const n = new FloeNode<KvResult>({
    id,
    storage,
    transport,
    stateMachine: new KvStateMachine(),
    initialMembers: [1, 2, 3].map((i) => ({ id: i, peerAddr: `mem:${i}` })),
    tickMs: TICK,
    electionTicks: E,
    heartbeatTicks: 1,
    random,
    clock: {
      monotonicMs: () => vt.now + clock.monoSkew,
      wallMs: () => WALL0 + vt.now + clock.monoSkew + clock.wallSkew,
    },
    timers: vt,
    incarnation: new Uint8Array(8),
    leaderLease,
  });
  return { n, vt, sent, clock, lock };
}

export const heartbeat = (from: number, to: number, term: number, sentTick: number): Message =>
  ({ type: 'heartbeat', from, to, term, commit: 0, context: new Uint8Array(0), sentTick }) as Message;

/** Node 1 of a 3-voter cluster elected leader with node 2's votes; `pump` has node 2 acknowledge what node 1 sent. */
export async function leader() {
  const m = member(1, () => 0);
  const { n, vt, sent } = m;
  const wall = () => WALL0 + vt.now + m.clock.monoSkew + m.clock.wallSkew;
  /** Wall time at which each sentTick acknowledged by node 2 was sent (messages are delivered and acked at once). */
  const ackedWall = new Map<number, number>();
  const pump = async () => {
    const out = sent.splice(0);
    for (const msg of out) {
      if (msg.to !== 2) continue;
      const mm = msg as Message & Record<string, unknown>;
      if (msg.type === 'preVote' || msg.type === 'vote')
        n.onMessage({ type: `${msg.type}Resp`, from: 2, to: 1, term: msg.term, reject: false } as Message);
      else if (msg.type === 'app') {
        const index = (mm.logIndex as number) + (mm.entries as unknown[]).length;
        ackedWall.set(mm.sentTick as number, wall());
        n.onMessage({
          type: 'appResp',
          from: 2,
          to: 1,
          term: msg.term,
          index,
          reject: false,
          rejectHint: 0,
          logTermHint: 0,
          sentTick: mm.sentTick,
        } as Message);
      } else if (msg.type === 'heartbeat') {
        ackedWall.set(mm.sentTick as number, wall());
        n.onMessage({
          type: 'heartbeatResp',
          from: 2,
          to: 1,
          term: msg.term,
          context: mm.context,
          sentTick: mm.sentTick,
        } as Message);
      }
    }
    await vt.settle();
  };
  n.start();
  for (let i = 0; i < 4 * E && !n.isLeader; i++) {
    await vt.advance(TICK);
    await pump();
    await pump();
  }
  expect(n.isLeader).toBe(true);
  for (let i = 0; i < 3; i++) {
    await vt.advance(TICK);
    await pump();
  }
  expect(n.holdsLeaderLease(n.currentTerm)).toBe(true);
  return { ...m, wall, ackedWall, pump };
}

export const voteReq = (type: 'vote' | 'preVote', from: number, to: number, term: number): VoteRequest => ({
  type,
  from,
  to,
  term,
  lastIndex: 0,
  lastTerm: 0,
  transfer: false,
});

/** The (pre-)vote grants among `sent`. */
export const grantedVotes = (sent: Message[]) =>
  sent.filter(
    (m) => (m.type === 'preVoteResp' || m.type === 'voteResp') && !(m as { reject: boolean }).reject,
  );

/** Node 3 asks node 2 (`n`) for its pre-vote and vote (or `types`) in `term`: the grants node 2 sent. */
export async function askNode2ForVotes(
  m: { n: FloeNode<KvResult>; vt: VirtualTimers; sent: Message[] },
  term: number,
  types: readonly ('preVote' | 'vote')[] = ['preVote', 'vote'],
): Promise<Message[]> {
  m.sent.length = 0;
  for (const t of types) m.n.onMessage(voteReq(t, 3, 2, term));
  await m.vt.settle();
  return grantedVotes(m.sent);
}
