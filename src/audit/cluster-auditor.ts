/**
 * Cluster events into the audit trail (issue 12, "Cluster events"): lease grants, logged renewals, releases and
 * expiries, and sequence segment allocations, each written by the leader after apply, with the Raft log index (and a
 * sub-index for the n-th event of one entry) as its event id.
 *
 * Nothing lost across a change of leader: every node, leader or not, turns what it applies into events and keeps the
 * latest ones in a bounded ring; only the leader emits them, as it applies. A node that becomes leader emits its whole
 * ring first: the events the old leader applied but had not yet shipped (its channel and its batch in flight, up to
 * the pipeline's bounds) are among them. Nothing doubled: an event re-emitted by another leader has the same id and
 * the same content (its time is the entry's leader time, replicated, never a local clock), and the table
 * (ReplacingMergeTree by event id; queries count distinct ids) keeps one.
 *
 * What it does not cover, and says so: events that fell out of every node's ring before any leader shipped them
 * (a leader whose pipeline was stuck for longer than the ring holds, then died), and entries compacted into a
 * snapshot before a full-cluster crash lost the leader's unshipped events. Unlogged renewals (acknowledged through a
 * ReadIndex round, docs/leases.md) are not cluster events and are not audited one by one.
 */

import type { LeaseEvent, LeaseStateMachine } from '../state/leases/index.js';
import type { SequenceStateMachine } from '../state/sequences/index.js';
import type { AuditEvent } from './events.js';

export interface ClusterAuditorOptions {
  audit: { emit(e: AuditEvent): void };
  leases: LeaseStateMachine;
  sequences?: SequenceStateMachine;
  /** Calls back with true when this node becomes leader (again, also in a later term) and false when it stops. */
  onRoleChange(cb: (leading: boolean) => void): () => void;
  isLeader(): boolean;
  /** Cluster name in event ids (so several clusters can share one table). */
  cluster: string;
  /**
   * Events kept for a new leader to re-emit. Default 20,000: more than `floe serve`'s audit channel holds in memory
   * (10,000) plus a batch, i.e. more than a killed leader can have applied and not yet shipped or fsynced.
   */
  ringSize?: number;
  /** Events re-emitted per turn of the event loop (so a new leader keeps ticking and heartbeating). Default 2,000. */
  reEmitChunk?: number;
  /** Yields to the event loop between chunks. Default setImmediate. */
  defer?: (fn: () => void) => void;
}

export interface ClusterAuditorStats {
  emitted: number;
  reEmitted: number;
  buffered: number;
  leaderships: number;
}

export class ClusterAuditor {
  private readonly ring: AuditEvent[] = [];
  private ringStart = 0;
  private leading = false;
  private lastIndex = -1;
  private sub = 0;
  private readonly unsubscribe: Array<() => void> = [];
  private readonly ringSize: number;
  readonly stats: ClusterAuditorStats = { emitted: 0, reEmitted: 0, buffered: 0, leaderships: 0 };

  constructor(private readonly o: ClusterAuditorOptions) {
    this.ringSize = o.ringSize ?? 20_000;
    if (!Number.isInteger(this.ringSize) || this.ringSize < 1)
      throw new RangeError(`ClusterAuditor ringSize must be an integer >= 1, got ${o.ringSize}`);
    this.unsubscribe.push(o.leases.subscribe((e) => this.onLease(e)));
    if (o.sequences) {
      this.unsubscribe.push(
        o.sequences.onAllocated((a) =>
          this.record(a.index, {
            type: 'segment_allocated',
            key: a.key,
            node: a.owner,
            start: a.start,
            end: a.end,
            tsMs: a.leaderTimeMs,
          }),
        ),
      );
    }
    this.unsubscribe.push(o.onRoleChange((leading) => this.onRole(leading)));
    if (o.isLeader()) this.onRole(true);
  }

  close(): void {
    for (const u of this.unsubscribe.splice(0)) u();
    this.leading = false;
  }

  private onLease(e: LeaseEvent): void {
    switch (e.type) {
      case 'granted':
        this.record(e.index, {
          type: 'lease_acquired',
          app: e.app,
          workerId: e.workerId,
          holder: e.nodeId,
          token: e.token,
          expiresAtMs: e.leaderTimeMs + e.ttlMs,
          tsMs: e.leaderTimeMs,
        });
        return;
      case 'renewed': {
        const holder = this.o.leases.lease(e.app, e.workerId)?.nodeId ?? '';
        this.record(e.index, {
          type: 'lease_renewed',
          app: e.app,
          workerId: e.workerId,
          holder,
          token: e.token,
          tsMs: e.leaderTimeMs,
          detail: { boundMs: e.boundMs },
        });
        return;
      }
      case 'released':
      case 'expired':
        this.record(e.index, {
          type: e.type === 'released' ? 'lease_released' : 'lease_expired',
          app: e.app,
          workerId: e.workerId,
          holder: e.nodeId,
          token: e.token,
          tsMs: e.leaderTimeMs,
          detail: { highWaterMs: e.highWaterMs },
        });
        return;
      case 'restored':
        // State replaced from a snapshot: the entries it covers produced their events on the nodes that applied
        // them; this node has none of them to add.
        return;
    }
  }

  private record(index: number, e: AuditEvent): void {
    // The n-th event of one entry (an expire entry ends many leases) gets sub-index n.
    this.sub = index === this.lastIndex ? this.sub + 1 : 0;
    this.lastIndex = index;
    const ev: AuditEvent = { ...e, raftIndex: index, raftSub: this.sub, cluster: this.o.cluster };
    this.ring.push(ev);
    if (this.ring.length - this.ringStart > this.ringSize) this.ringStart++;
    // Compact the array now and then, so the ring's memory stays bounded.
    if (this.ringStart > this.ringSize) {
      this.ring.splice(0, this.ringStart);
      this.ringStart = 0;
    }
    this.stats.buffered = this.ring.length - this.ringStart;
    if (this.leading) {
      this.o.audit.emit(ev);
      this.stats.emitted++;
    }
  }

  private onRole(leading: boolean): void {
    if (leading === this.leading && !leading) return;
    this.leading = leading;
    if (!leading) return;
    // A new leadership: ship everything this node remembers; whatever the old leader already shipped dedups by id.
    // In chunks, one per turn of the event loop: a new leader that blocked here for long would miss its first
    // heartbeats and lose the election it just won (round 4: 200,000 events took 0.9 s, longer than an election
    // timeout, and a 5-node cluster stayed leaderless). Events applied meanwhile are emitted as they apply.
    this.stats.leaderships++;
    const snapshot = this.ring.slice(this.ringStart);
    const gen = ++this.leadership;
    const chunk = this.o.reEmitChunk ?? 2000;
    const defer = this.o.defer ?? ((fn: () => void) => setImmediate(fn));
    let i = 0;
    const step = () => {
      if (gen !== this.leadership || !this.leading) return;
      const end = Math.min(snapshot.length, i + chunk);
      for (; i < end; i++) {
        this.o.audit.emit(snapshot[i] as AuditEvent);
        this.stats.reEmitted++;
      }
      if (i < snapshot.length) defer(step);
    };
    step();
  }

  private leadership = 0;
}
