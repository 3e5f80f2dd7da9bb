// Deterministic stand-ins for the LeaseService's seams: a fake clock with fake timers and a
// single-replica "node" that applies proposals at once. Used by the unit tests and bench/leases.ts.
import { unpack } from '../node/envelope.js';
import type { ApplyContext } from '../node/state-machine.js';
import type { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import type { LeaseClock, LeaseNode, LeaseTimers } from './lease-service.js';

interface FakeTimer {
  id: number;
  at: number;
  fn: () => void;
}

/** Lets every pending promise callback run (one macrotask turn). */
export function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Virtual time: `monotonicMs` starts at 0; the wall clock is monotonic time + `wallOffsetMs`. */
export class FakeTime implements LeaseClock, LeaseTimers {
  now = 0;
  wallOffsetMs = 1_700_000_000_000;
  private timers: FakeTimer[] = [];
  private nextId = 1;

  monotonicMs(): number {
    return this.now;
  }

  wallMs(): number {
    return this.now + this.wallOffsetMs;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const t = { id: this.nextId++, at: this.now + Math.max(0, ms), fn };
    this.timers.push(t);
    return t.id;
  }

  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter((t) => t.id !== handle);
  }

  get pendingTimers(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing due timers in order (and letting promises settle after each). */
  async advance(ms: number): Promise<void> {
    const target = this.now + ms;
    await flush();
    for (;;) {
      let next: FakeTimer | undefined;
      for (const t of this.timers) if (t.at <= target && (!next || t.at < next.at)) next = t;
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.now = Math.max(this.now, next.at);
      next.fn();
      await flush();
    }
    this.now = target;
    await flush();
  }
}

interface Held {
  command: Uint8Array;
  resolve(r: unknown): void;
  reject(e: Error): void;
}

/**
 * A one-replica node: proposals are applied to the state machine immediately (or held until
 * `releaseHeld()`), with the leader's wall time from the fake clock. Counts everything.
 */
export class InstantNode implements LeaseNode {
  leader: boolean;
  index = 0;
  term = 1;
  proposals = 0;
  reads = 0;
  readonly proposalsByOp = new Map<string, number>();
  /** When true, proposals wait in `held` (in log order) until released. */
  holdProposals = false;
  /** 'open': reads resolve at once; 'hold': they wait for releaseReads(); 'fail': they reject. */
  readMode: 'open' | 'hold' | 'fail' = 'open';
  /** Ops whose next proposal fails (outcome: not committed). */
  readonly failNext = new Set<string>();
  /**
   * Results handed to the next proposals instead of their own, without applying them: what a node
   * does when it matches a proposal to another one's applied entry (issue 9 item 1).
   */
  readonly substitute: unknown[] = [];
  private held: Held[] = [];
  private heldReads: Array<{ resolve(): void; reject(e: Error): void }> = [];
  private readonly roleListeners: Array<(isLeader: boolean) => void> = [];

  constructor(
    private readonly sm: LeaseStateMachine,
    private readonly clock: LeaseClock,
    leader = true,
  ) {
    this.leader = leader;
  }

  propose(command: Uint8Array): Promise<unknown> {
    if (!this.leader) return Promise.reject(new Error('fake node: not the leader'));
    this.proposals++;
    const op = String((unpack(command) as { op?: unknown }).op);
    this.proposalsByOp.set(op, (this.proposalsByOp.get(op) ?? 0) + 1);
    if (this.failNext.delete(op)) return Promise.reject(new Error(`fake node: ${op} proposal dropped`));
    if (this.substitute.length > 0) return Promise.resolve(this.substitute.shift());
    if (this.holdProposals)
      return new Promise((resolve, reject) => this.held.push({ command, resolve, reject }));
    return Promise.resolve(this.applyNow(command));
  }

  /** Applies the first `count` held proposals (default all) in order and resolves their callers. */
  releaseHeld(count = this.held.length): void {
    const held = this.held.splice(0, count);
    for (const h of held) h.resolve(this.applyNow(h.command));
  }

  get heldCount(): number {
    return this.held.length;
  }

  linearizableRead(): Promise<void> {
    this.reads++;
    if (!this.leader) return Promise.reject(new Error('fake node: not the leader'));
    if (this.readMode === 'fail') return Promise.reject(new Error('fake node: no quorum'));
    if (this.readMode === 'hold')
      return new Promise((resolve, reject) => this.heldReads.push({ resolve, reject }));
    return Promise.resolve();
  }

  releaseReads(fail = false): void {
    const reads = this.heldReads;
    this.heldReads = [];
    for (const r of reads) {
      if (fail) r.reject(new Error('fake node: read failed'));
      else r.resolve();
    }
  }

  isLeader(): boolean {
    return this.leader;
  }

  onRoleChange(cb: (isLeader: boolean) => void): () => void {
    this.roleListeners.push(cb);
    return () => {
      const i = this.roleListeners.indexOf(cb);
      if (i >= 0) this.roleListeners.splice(i, 1);
    };
  }

  setLeader(leader: boolean): void {
    this.leader = leader;
    if (leader) this.term++;
    for (const cb of [...this.roleListeners]) cb(leader);
  }

  ops(op: string): number {
    return this.proposalsByOp.get(op) ?? 0;
  }

  private applyNow(command: Uint8Array): unknown {
    this.index++;
    const ctx: ApplyContext = { index: this.index, term: this.term, leaderTimeMs: this.clock.wallMs() };
    return this.sm.apply(command, ctx);
  }
}
