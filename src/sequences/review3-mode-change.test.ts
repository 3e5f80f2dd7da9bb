// Adversarial review 3 (review3-seq-snow) of stop 35's fixes (742918b, b83fe92). These tests failed on the code under
// review: they pin the holes for the lead.
// - A follower that has not applied a delete + re-create as strict still sees the key in node mode and asks the leader
//   for a node-mode segment; the leader allocates it from the *strict* record (the alloc carries no mode, the answer's
//   mode is not checked) and the follower serves that strict key's values without a round, out of order with the
//   leader's strict values. Not the documented limitation: those values are not "below the re-created key's".
// - A snapshot install that carries a delete and a re-create with the same configuration, whose new record has
//   already as many allocations, is taken as "continuing" the old record: the member serves the deleted key's segment.
import { describe, expect, it } from 'vitest';
import { encodeSequenceCommand, SequenceStateMachine } from '../state/sequences/index.js';
import { type SequenceNode, SequenceService } from './sequence-service.js';

class NotLeader extends Error {
  override name = 'NotLeaderError';
}

/** One replicated log; each member applies it up to what it has learnt is committed (`catchUp`). */
class Log {
  readonly entries: Uint8Array[] = [];
}

class Member implements SequenceNode {
  leader = false;
  currentTerm = 2;
  applied = 0;
  /** Called after each of this member's own proposals is applied, before its answer (test seam). */
  afterPropose: (() => void) | undefined;
  private roleListeners: ((l: boolean) => void)[] = [];
  constructor(
    readonly log: Log,
    readonly state: SequenceStateMachine,
  ) {}
  catchUp(): void {
    while (this.applied < this.log.entries.length) {
      const e = this.log.entries[this.applied] as Uint8Array;
      this.applied++;
      this.state.apply(e, { index: this.applied, term: this.currentTerm, leaderTimeMs: 0 });
    }
  }
  async propose(command: Uint8Array): Promise<unknown> {
    if (!this.leader) throw new NotLeader('not the leader');
    await Promise.resolve();
    this.catchUp();
    this.log.entries.push(command);
    this.applied++;
    const r = this.state.apply(command, { index: this.applied, term: this.currentTerm, leaderTimeMs: 0 });
    this.afterPropose?.();
    return r;
  }
  async linearizableRead(): Promise<void> {
    await Promise.resolve();
    if (!this.leader) throw new NotLeader('read not confirmed');
    this.catchUp();
  }
  isLeader = () => this.leader;
  term = () => this.currentTerm;
  onRoleChange(cb: (l: boolean) => void) {
    this.roleListeners.push(cb);
    return () => {};
  }
  notLeaderError = () => new NotLeader('not the leader');
  becomeLeader(term: number): void {
    this.currentTerm = term;
    this.leader = true;
    for (const l of this.roleListeners) l(true);
  }
  stepDown(term: number): void {
    this.currentTerm = term;
    this.leader = false;
    for (const l of this.roleListeners) l(false);
  }
}

function cluster() {
  const log = new Log();
  const a = new Member(log, new SequenceStateMachine());
  const b = new Member(log, new SequenceStateMachine());
  a.leader = true;
  const leaderOf = () => (a.leader ? a : b);
  /** While set, the follower's next remote allocation waits here before it is sent to the leader. */
  let holdNext = false;
  const held: (() => void)[] = [];
  let remoteAllocs = 0;
  const svc = (m: Member, owner: string) =>
    new SequenceService({
      node: m,
      state: m.state,
      owner,
      segmentLifetimeMs: 0,
      remoteAlloc: async (cmd) => {
        remoteAllocs++;
        if (holdNext) {
          holdNext = false;
          await new Promise<void>((r) => held.push(r));
        }
        return leaderOf().propose(encodeSequenceCommand(cmd)) as never;
      },
    });
  return {
    log,
    a,
    b,
    svcA: svc(a, 'node-1'),
    svcB: svc(b, 'node-2'),
    holdNextRemoteAlloc: () => {
      holdNext = true;
    },
    releaseHeld: () => {
      for (const f of held.splice(0)) f();
    },
    remoteAllocs: () => remoteAllocs,
  };
}

describe('review 3: stop 35 node-mode fixes', () => {
  it('a lagging follower asks the leader for a node-mode segment of a key re-created as strict: it is given a strict segment and answers from it, above values the leader answers after it', async () => {
    const { b, svcA, svcB } = cluster();
    await svcA.create('k', { step: 10, mode: 'node' });
    b.catchUp();
    // The admin turns the key into a strict one; b has not applied that yet (its commit index lags by a heartbeat).
    await svcA.delete('k');
    await svcA.create('k', { step: 10, mode: 'strict' });
    const firstStrict = await svcA.incrBy('k', 1n); // 1: the leader's strict segment [1, 11)
    expect(b.state.modeOf('k')).toBe('node');
    // b has no segment of the key: it asks the leader for one, which allocates it from the strict record.
    const fromB = await svcB.incrBy('k', 1n).catch((e: unknown) => e);
    // The leader's next strict value, answered after b's, must be above it (real-time order of a strict key).
    const afterB = await svcA.incrBy('k', 1n);
    expect(firstStrict).toBeLessThan(afterB);
    if (typeof fromB === 'bigint')
      expect(
        afterB,
        `b answered ${fromB} of the strict key; the leader answered ${afterB} after it`,
      ).toBeGreaterThan(fromB); // before the fix: b answered 11 (a strict segment [11, 21) given to node-2), the leader 2
    else expect(fromB).toBeInstanceOf(Error);
  });

  // it.fails: a documented limitation (docs/sequences.md, "Deleting a key"): the snapshot does not show the delete, the
  // record it continues looks the same; node mode only, values unique and increasing per member. If this starts
  // passing (e.g. records carry their create index), update the doc.
  it.fails('a snapshot install carrying a delete and a same-config re-create keeps the deleted record identity: the member serves the deleted key segment', async () => {
    const { a, b, svcA, svcB } = cluster();
    await svcA.create('k', { step: 10, mode: 'node' });
    b.catchUp();
    expect(await svcB.incrBy('k', 1n)).toBe(1n); // b's segment [1, 11) of the first record (1 allocation)
    b.catchUp();
    // While b is cut off: the key is deleted, re-created with the same configuration, and used once (1 allocation,
    // its mark starts at the tombstone, 11, so it is >= the old record's).
    await svcA.delete('k');
    await svcA.create('k', { step: 10, mode: 'node' });
    expect(await svcA.incrBy('k', 1n)).toBe(11n);
    // b is sent a snapshot (its log fell behind the leader's compaction) and installs it: it now holds the delete.
    b.state.restore(a.state.snapshot());
    b.applied = b.log.entries.length;
    // docs/sequences.md: "A member that applied the delete never serves those segments again".
    const v = await svcB.incrBy('k', 1n);
    expect(v, 'b served a value of the deleted key segment [1, 11)').toBeGreaterThanOrEqual(21n); // fails: 2n
  });
});
