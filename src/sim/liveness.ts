// Liveness after healing: within the budget the cluster must elect a leader, commit a fresh barrier
// entry of that leader's term, decide every client proposal (committed, or provably never), and
// bring every member's state machine up to the barrier. Evaluated every 2 ms of virtual time once
// every fault is lifted; the last reason it was not yet live is what a failure reports.

import type { KvOp } from './kv-app.js';
import type { Workload } from './workload.js';
import type { Proposal, SimWorld } from './world.js';

export class LivenessCheck {
  /** Set once the cluster was found live. */
  live = false;
  /** Virtual time at which every fault was lifted. */
  healedAt = 0;
  lastReason = 'not evaluated yet';
  private barrier: { id: number; leaderTerm: number } | undefined;

  constructor(
    private readonly w: SimWorld,
    private readonly workload: Workload,
  ) {}

  /** The client's turn in the heal phase: check again, and again 2 ms later if not yet live. */
  step(): void {
    const w = this.w;
    this.live = this.evaluate();
    if (!this.live) w.queue.push(w.now + 2_000, { k: 'client' });
  }

  private evaluate(): boolean {
    const w = this.w;
    const leader = w.currentLeader();
    if (leader === undefined) {
      this.lastReason = `no leader elected; ${this.clusterSummary()}`;
      return false;
    }
    const leaderTerm = w.core(leader, 'status', (raw) => raw.status().term) ?? 0;
    const b = this.barrier && w.proposals.get(this.barrier.id);
    const committed = (p: Proposal | undefined): boolean =>
      p?.loc !== undefined && w.checker.committedTermAt(p.loc.index) === p.loc.term;
    if (!b || (!committed(b) && (this.isDoomed(b) || this.barrier?.leaderTerm !== leaderTerm))) {
      const op: KvOp = { id: this.workload.newOpId(), op: 'barrier' };
      if (this.workload.propose(leader, op)) this.barrier = { id: op.id, leaderTerm };
      this.lastReason = `barrier not yet committed; leader n${leader.id} term ${leaderTerm}; ${this.clusterSummary()}`;
      return false;
    }
    if (!committed(b)) {
      this.lastReason = `barrier #${b.op.id} at ${b.loc ? `${b.loc.index}/${b.loc.term}` : '?'} not committed (known commit ${w.checker.knownCommit}); ${this.clusterSummary()}`;
      return false;
    }
    const undecided = [...w.proposals.values()].filter((p) => !this.isDecided(p));
    if (undecided.length > 0) {
      const p = undecided[0] as Proposal;
      this.lastReason = `${undecided.length} proposal(s) undecided, e.g. #${p.op.id} at ${
        p.loc ? `${p.loc.index}/${p.loc.term}` : 'no index (never appended)'
      }; known commit ${w.checker.knownCommit}`;
      return false;
    }
    const barrierIndex = (b.loc as { index: number }).index;
    const members = [...leader.conf.voters, ...leader.conf.learners];
    const behind = members.filter((m) => {
      const n = w.nodes.get(m);
      return n === undefined || !n.active || n.app.applied < barrierIndex;
    });
    if (behind.length > 0) {
      const progress = w.core(leader, 'status', (raw) => raw.status().progress) ?? {};
      const views = behind.map((m) => {
        const pr = progress[m];
        return pr
          ? `n${m}:${pr.state}/match${pr.match}/next${pr.next}${pr.recentActive ? '' : '/inactive'}`
          : `n${m}:?`;
      });
      this.lastReason = `members [${behind}] have not applied the barrier at ${barrierIndex} (leader's progress ${views.join(
        ' ',
      )}); ${this.clusterSummary()}`;
      return false;
    }
    w.log(
      `LIVE: leader n${leader.id} term ${leaderTerm}, barrier applied at ${barrierIndex} on [${members}]`,
    );
    return true;
  }

  /** Decided: committed, or provably never committable (a later term committed at or before its index). */
  private isDecided(p: Proposal): boolean {
    if (p.loc === undefined) return false;
    return this.w.checker.knownCommit >= p.loc.index || this.isDoomed(p);
  }

  private isDoomed(p: Proposal): boolean {
    if (p.loc === undefined) return false;
    const checker = this.w.checker;
    const c = checker.knownCommit;
    if (c >= p.loc.index) return checker.committedTermAt(p.loc.index) !== p.loc.term;
    const t = checker.committedTermAt(c);
    return t !== undefined && t > p.loc.term;
  }

  private clusterSummary(): string {
    const w = this.w;
    const parts: string[] = [];
    for (const n of w.nodes.values()) {
      if (n.state === 'retired') continue;
      if (!n.alive) {
        parts.push(`n${n.id}:down`);
        continue;
      }
      const st = w.core(n, 'status', (raw) => raw.status());
      if (st)
        parts.push(`n${n.id}:${st.role}/t${st.term}/c${st.commit}/a${n.app.applied}/last${st.lastIndex}`);
    }
    return parts.join(' ');
  }
}
