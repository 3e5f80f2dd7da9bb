// The checkers must catch what they claim to catch: each test feeds a hand-made bad history and
// expects the named invariant, and a matching good history that must pass.

import { describe, expect, it } from 'vitest';
import type { Entry, HardState, Message } from '../raft/types.js';
import { type Invariant, InvariantViolation, logViewOf, SafetyChecker } from './checker.js';
import { chainNext, encodeOp, GENESIS_CHAIN } from './kv-app.js';

function entry(index: number, term: number, id = index * 1000 + term): Entry {
  return { type: 'normal', index, term, data: encodeOp({ id, op: 'incr', key: 'k', by: 1 }) };
}

function expectViolation(fn: () => void, invariant: Invariant): InvariantViolation {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(InvariantViolation);
    const v = err as InvariantViolation;
    expect(v.invariant).toBe(invariant);
    return v;
  }
  throw new Error(`expected a ${invariant} violation, none was reported`);
}

/** Applies `entries` on `node` in order, computing the chain hash like the state machine does. */
function applyAll(
  c: SafetyChecker,
  node: number,
  term: number,
  entries: Entry[],
  chain = GENESIS_CHAIN,
): string {
  for (const e of entries) {
    chain = chainNext(chain, e);
    c.observeApply(node, term, e, chain);
  }
  return chain;
}

const hs = (term: number, vote: number, commit: number): HardState => ({ term, vote, commit });

describe('election safety', () => {
  it('reports two leaders in one term, naming the term', () => {
    const c = new SafetyChecker();
    c.observeLeader(1, 5, 'role');
    c.observeLeader(1, 5, 'sent app'); // the same leader again is fine
    const v = expectViolation(() => c.observeLeader(2, 5, 'role'), 'election-safety');
    expect(v.context.term).toBe(5);
    expect(v.message).toContain('1 and 2');
  });

  it('accepts one leader per term across terms', () => {
    const c = new SafetyChecker();
    c.observeLeader(1, 1, 'role');
    c.observeLeader(2, 2, 'role');
    c.observeLeader(1, 3, 'role');
    expect(c.leaderOf(2)).toBe(2);
  });

  it('infers leadership from leader-only messages', () => {
    const c = new SafetyChecker();
    c.observeLeader(1, 4, 'role');
    const hb: Message = { type: 'heartbeat', from: 3, to: 2, term: 4, commit: 0, context: new Uint8Array() };
    expectViolation(() => c.observeSend(hb, hs(4, 3, 0)), 'election-safety');
  });
});

describe('leaders', () => {
  it('reports a leader that is not a voter of its own configuration', () => {
    const c = new SafetyChecker();
    c.observeLeaderIsVoter(1, 2, [1, 2, 3]);
    expectViolation(() => c.observeLeaderIsVoter(4, 3, [1, 2, 3]), 'election-safety');
  });

  it('reports a leader overwriting or truncating its own log', () => {
    const c = new SafetyChecker();
    c.observeLeaderRewrite(1, 3, [[5, 3]], [entry(5, 3)]); // rewriting the same entry is harmless
    expectViolation(() => c.observeLeaderRewrite(1, 3, [[5, 3]], [entry(5, 4)]), 'leader-append-only');
    expectViolation(
      () =>
        c.observeLeaderRewrite(
          1,
          3,
          [
            [5, 3],
            [6, 3],
          ],
          [entry(5, 3)],
        ),
      'leader-append-only',
    );
  });
});

describe('double vote', () => {
  it('reports a node granting its vote twice in one term', () => {
    const c = new SafetyChecker();
    c.observeVoteGrant(3, 1, 7);
    c.observeVoteGrant(3, 1, 7); // a duplicate of the same grant is fine
    const v = expectViolation(() => c.observeVoteGrant(3, 2, 7), 'double-vote');
    expect(v.context).toEqual({ node: 3, term: 7 });
  });

  it('sees grants on the wire', () => {
    const c = new SafetyChecker();
    const grant = (to: number): Message => ({ type: 'voteResp', from: 3, to, term: 2, reject: false });
    c.observeSend(grant(1), hs(2, 1, 0));
    expectViolation(() => c.observeSend(grant(2), hs(2, 2, 0)), 'double-vote');
  });

  it('ignores rejections and pre-vote grants', () => {
    const c = new SafetyChecker();
    c.observeSend({ type: 'voteResp', from: 3, to: 1, term: 2, reject: false }, hs(2, 1, 0));
    c.observeSend({ type: 'voteResp', from: 3, to: 2, term: 2, reject: true }, hs(2, 1, 0));
    c.observeSend({ type: 'preVoteResp', from: 3, to: 2, term: 3, reject: false }, hs(2, 1, 0));
  });
});

describe('persist before send', () => {
  it('reports a message whose term is not yet durable', () => {
    const c = new SafetyChecker();
    const m: Message = { type: 'vote', from: 1, to: 2, term: 3, lastIndex: 0, lastTerm: 0, transfer: false };
    expectViolation(() => c.observeSend(m, hs(2, 0, 0)), 'persist-before-send');
  });

  it('reports a vote granted before the vote is durable', () => {
    const c = new SafetyChecker();
    const m: Message = { type: 'voteResp', from: 2, to: 1, term: 3, reject: false };
    expectViolation(() => c.observeSend(m, hs(3, 0, 0)), 'persist-before-send');
  });

  it('lets pre-votes carry the next term', () => {
    const c = new SafetyChecker();
    c.observeSend(
      { type: 'preVote', from: 1, to: 2, term: 3, lastIndex: 0, lastTerm: 0, transfer: false },
      hs(2, 0, 0),
    );
  });
});

describe('hard state monotonicity', () => {
  const log = logViewOf([
    [1, 1],
    [2, 1],
  ]);

  it('reports the term going backwards', () => {
    const c = new SafetyChecker();
    const v = expectViolation(
      () => c.observeHardState(1, hs(5, 2, 1), hs(4, 0, 1), log),
      'hardstate-monotonic',
    );
    expect(v.message).toContain('from 5 to 4');
  });

  it('reports a vote changing within a term', () => {
    const c = new SafetyChecker();
    expectViolation(() => c.observeHardState(1, hs(5, 2, 1), hs(5, 3, 1), log), 'hardstate-monotonic');
  });

  it('reports the commit index decreasing', () => {
    const c = new SafetyChecker();
    expectViolation(() => c.observeHardState(1, hs(5, 2, 2), hs(5, 2, 1), log), 'hardstate-monotonic');
  });

  it('reports a commit index past the durable log', () => {
    const c = new SafetyChecker();
    expectViolation(() => c.observeHardState(1, hs(5, 2, 1), hs(5, 2, 3), log), 'hardstate-monotonic');
  });

  it('accepts a first vote in a term, a new term with a new vote, and a growing commit', () => {
    const c = new SafetyChecker();
    c.observeHardState(1, hs(5, 0, 0), hs(5, 2, 1), log);
    c.observeHardState(1, hs(5, 2, 1), hs(6, 3, 2), log);
  });
});

describe('log matching', () => {
  it('reports two different entries at the same index and term', () => {
    const c = new SafetyChecker();
    c.observeAppended(1, [entry(1, 1, 100)], logViewOf([[1, 1]]));
    const v = expectViolation(
      () => c.observeAppended(2, [entry(1, 1, 200)], logViewOf([[1, 1]])),
      'log-matching',
    );
    expect(v.context).toEqual({ node: 2, term: 1, index: 1 });
  });

  it('reports the same entry preceded by different histories', () => {
    const c = new SafetyChecker();
    const a = logViewOf([
      [1, 1],
      [2, 2],
    ]);
    const b = logViewOf([
      [1, 2],
      [2, 2],
    ]);
    c.observeAppended(1, [entry(2, 2, 7)], a);
    expectViolation(() => c.observeAppended(2, [entry(2, 2, 7)], b), 'log-matching');
  });

  it('accepts the same entries replicated to several logs', () => {
    const c = new SafetyChecker();
    const view = logViewOf([
      [1, 1],
      [2, 1],
    ]);
    c.observeAppended(1, [entry(1, 1), entry(2, 1)], view);
    c.observeAppended(2, [entry(1, 1), entry(2, 1)], view);
  });
});

describe('state machine safety', () => {
  it('reports divergent applied entries at the same index', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 1, [entry(1, 1), entry(2, 1, 20)]);
    const v = expectViolation(
      () => applyAll(c, 2, 1, [entry(1, 1), entry(2, 1, 21)]),
      'state-machine-safety',
    );
    expect(v.context.index).toBe(2);
    expect(v.context.node).toBe(2);
  });

  it('reports an entry of another term applied at a committed index', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 2, [entry(1, 1), entry(2, 2)]);
    expectViolation(() => applyAll(c, 2, 3, [entry(1, 1), entry(2, 3)]), 'state-machine-safety');
  });

  it('reports a gap or a repeat in one node’s applied sequence', () => {
    const c = new SafetyChecker();
    const chain = applyAll(c, 1, 1, [entry(1, 1)]);
    expectViolation(
      () => c.observeApply(1, 1, entry(3, 1), chainNext(chain, entry(3, 1))),
      'state-machine-safety',
    );
    const c2 = new SafetyChecker();
    applyAll(c2, 1, 1, [entry(1, 1), entry(2, 1)]);
    expectViolation(() => applyAll(c2, 1, 1, [entry(2, 1)]), 'state-machine-safety');
  });

  it('reports a snapshot whose state differs from the applied sequence', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 1, [entry(1, 1), entry(2, 1)]);
    expectViolation(() => c.observeRestore(2, 1, 2, 1, 'bogus-chain', 'install'), 'state-machine-safety');
  });

  it('reports a state machine rolled back by an older snapshot', () => {
    const c = new SafetyChecker();
    const entries = [entry(1, 1), entry(2, 1), entry(3, 1)];
    applyAll(c, 1, 1, entries);
    const chainAt2 = chainNext(chainNext(GENESIS_CHAIN, entry(1, 1)), entry(2, 1));
    expectViolation(() => c.observeRestore(1, 1, 2, 1, chainAt2, 'install'), 'state-machine-safety');
  });

  it('accepts a restart re-applying the same entries after its snapshot', () => {
    const c = new SafetyChecker();
    const entries = [entry(1, 1), entry(2, 1), entry(3, 1)];
    applyAll(c, 1, 1, entries);
    const chainAt1 = chainNext(GENESIS_CHAIN, entry(1, 1));
    c.observeRestore(1, 1, 1, 1, chainAt1, 'restart');
    applyAll(c, 1, 1, entries.slice(1), chainAt1);
  });
});

describe('committed entries are never lost', () => {
  it('reports a node truncating a committed entry it held, for a leader that must have it', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 1, [entry(1, 1), entry(2, 1)]); // committed by term 1
    const after = logViewOf([
      [1, 1],
      [2, 2],
    ]);
    const v = expectViolation(
      () =>
        c.observeLogRewrite(
          2,
          2,
          [
            [1, 1],
            [2, 1],
          ],
          after,
          'append',
        ),
      'committed-entry-lost',
    );
    expect(v.context).toEqual({ node: 2, term: 1, index: 2 });
  });

  it('reports a snapshot install that drops a committed entry beyond the snapshot', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 1, [entry(1, 1), entry(2, 1), entry(3, 1)]);
    const after = logViewOf([], [2, 1]); // the log now ends at the snapshot (index 2)
    expectViolation(
      () => c.observeLogRewrite(2, 1, [[3, 1]], after, 'snapshot install'),
      'committed-entry-lost',
    );
  });

  it('accepts truncating entries that were never committed, and compaction into a snapshot', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 1, [entry(1, 1)]);
    c.observeLogRewrite(2, 2, [[2, 1]], logViewOf([[1, 1]]), 'append');
    c.observeLogRewrite(2, 2, [[1, 1]], logViewOf([], [1, 1]), 'snapshot install');
  });

  it('accepts a stale leader (of a term before the commit) truncating a node outside the quorum', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 4, [entry(1, 2)]); // entry of term 2, known committed only by nodes in term 4
    c.observeLogRewrite(3, 3, [[1, 2]], logViewOf([[1, 3]]), 'append');
    expectViolation(
      () => c.observeLogRewrite(3, 4, [[1, 2]], logViewOf([[1, 3]]), 'append'),
      'committed-entry-lost',
    );
  });

  it('reports a commit without a quorum of durable copies', () => {
    const c = new SafetyChecker();
    const full = logViewOf([
      [1, 1],
      [2, 1],
    ]);
    const short = logViewOf([[1, 1]]);
    c.observeCommit(1, 1, 0, 2, full);
    const logs = new Map([
      [1, full],
      [2, short],
      [3, short],
    ]);
    const v = expectViolation(() => c.observeCommitQuorum(1, 2, [1, 2, 3], logs), 'committed-entry-lost');
    expect(v.context.index).toBe(2);
  });

  it('accepts a commit held by a quorum (a snapshot covering it counts)', () => {
    const c = new SafetyChecker();
    const full = logViewOf([
      [1, 1],
      [2, 1],
    ]);
    c.observeCommit(1, 1, 0, 2, full);
    const logs = new Map([
      [1, full],
      [2, logViewOf([], [2, 1])],
      [3, logViewOf([])],
    ]);
    c.observeCommitQuorum(1, 2, [1, 2, 3], logs);
  });

  it('after a removal (3 -> 2 voters) a commit decided with the removed member passes; with 4 voters one holder does not', () => {
    // Full-stack seed 106634: the leader's commit, acknowledged by the member it then removed, was
    // persisted after the removal applied. Every quorum of [1, 2] contains the leader: safe.
    const c = new SafetyChecker();
    const full = logViewOf([
      [1, 1],
      [2, 1],
    ]);
    c.observeCommit(1, 1, 0, 2, full);
    const short = logViewOf([[1, 1]]);
    c.observeCommitQuorum(
      1,
      2,
      [1, 2],
      new Map([
        [1, full],
        [2, short],
      ]),
    );
    const four = new Map([
      [1, full],
      [2, short],
      [3, short],
      [4, short],
    ]);
    expectViolation(() => c.observeCommitQuorum(1, 2, [1, 2, 3, 4], four), 'committed-entry-lost');
    expectViolation(
      () =>
        c.observeCommitQuorum(
          1,
          2,
          [1, 2],
          new Map([
            [1, short],
            [2, short],
          ]),
        ),
      'committed-entry-lost',
    );
  });
});

describe('leader completeness', () => {
  it('reports a new leader missing an entry committed in an earlier term', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 2, [entry(1, 1), entry(2, 2)]);
    const log = logViewOf([
      [1, 1],
      [2, 1],
      [3, 3],
    ]);
    const v = expectViolation(() => c.observeLeaderLog(3, 3, log), 'leader-completeness');
    expect(v.context).toEqual({ node: 3, term: 3, index: 2 });
  });

  it('does not bind a leader of an older term elected late (its votes were delayed)', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 2, [entry(1, 2)]); // committed during term 2
    c.observeLeaderLog(3, 1, logViewOf([[1, 1]])); // leader of term 1, elected late: fine
  });

  it('accepts a leader holding every committed entry', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 2, [entry(1, 1), entry(2, 2)]);
    c.observeLeaderLog(
      3,
      3,
      logViewOf([
        [1, 1],
        [2, 2],
        [3, 3],
      ]),
    );
  });
});

describe('linearizable reads', () => {
  it('reports a read index older than what was committed when the read was issued', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 1, [entry(1, 1), entry(2, 1), entry(3, 1)]);
    c.observeReadIssued(2, 'r1');
    const v = expectViolation(() => c.observeReadState(2, 'r1', 2), 'linearizable-read');
    expect(v.context.index).toBe(2);
  });

  it('accepts a read index at or after the commit index at issue time', () => {
    const c = new SafetyChecker();
    applyAll(c, 1, 1, [entry(1, 1), entry(2, 1)]);
    c.observeReadIssued(2, 'r1');
    c.observeReadState(2, 'r1', 2);
    c.observeReadState(2, 'r1', 3);
  });
});

describe('leases', () => {
  it('reports two nodes holding a valid lease at once', () => {
    const c = new SafetyChecker();
    c.observeLeases([{ node: 1, term: 2 }]);
    expectViolation(
      () =>
        c.observeLeases([
          { node: 1, term: 2 },
          { node: 3, term: 3 },
        ]),
      'lease-overlap',
    );
  });
});

describe('disabling invariants (for self-tests)', () => {
  it('skips only the disabled invariant', () => {
    const c = new SafetyChecker({ disabled: ['double-vote'] });
    c.observeVoteGrant(3, 1, 7);
    c.observeVoteGrant(3, 2, 7);
    c.observeLeader(1, 7, 'role');
    expectViolation(() => c.observeLeader(2, 7, 'role'), 'election-safety');
  });
});
