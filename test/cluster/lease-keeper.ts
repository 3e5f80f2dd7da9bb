// Keeps a set of worker-ID leases alive from the test process the way an SDK would: renew every
// TTL/3 through any live node over HTTP (307 to the leader is followed), retrying on another node
// after errors. Records every refusal that means "this lease is gone" — after a failover there
// must be none.
import type { Cluster } from './harness.js';
import { http, until } from './harness.js';

export interface KeptLease {
  workerId: number;
  token: number;
  nodeId: string;
  renewals: number;
  /** performance.now() when the last successful renewal was sent. */
  lastOkSentAt: number;
  maxGapMs: number;
}

/** Refusals that mean the lease was reclaimed (or never existed). */
const LOST = new Set(['stale_token', 'not_held', 'lease_expired']);

export class LeaseKeeper {
  readonly leases: KeptLease[] = [];
  readonly lost: string[] = [];
  /** Transient failures (no leader yet, node down, timeout): retried. */
  transientErrors = 0;
  /** Nodes not to call (stopped with SIGSTOP: a call would only time out). */
  readonly avoid = new Set<number>();
  private running = false;
  private loops: Promise<void>[] = [];
  private next = 0;

  constructor(
    private readonly cluster: Cluster,
    readonly app: string,
    readonly ttlMs: number,
  ) {}

  private endpoint(): string {
    const up = this.cluster.nodes.filter((n) => n.running && !this.avoid.has(n.spec.id));
    const n = up[this.next++ % up.length] ?? this.cluster.nodes[0]!;
    return n.http;
  }

  /** Acquires `count` leases (retrying transient errors), each for its own nodeId. */
  async acquire(count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      const nodeId = `${this.app}-holder-${i}`;
      const requestId = `${nodeId}-boot`;
      const lease = await until(`lease for ${nodeId}`, async () => {
        const r = await http<{ workerId: number; token: number }>(
          this.endpoint(),
          'POST',
          `/v1/apps/${this.app}/workers/acquire`,
          { nodeId, ttlMs: this.ttlMs, requestId, incarnation: 'lease-keeper' },
          2000,
        );
        return r.status === 200 ? r.body : undefined;
      });
      this.leases.push({
        workerId: lease.workerId,
        token: lease.token,
        nodeId,
        renewals: 0,
        lastOkSentAt: performance.now(),
        maxGapMs: 0,
      });
    }
  }

  start(): void {
    this.running = true;
    this.loops = this.leases.map((l) => this.keep(l));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /** Stops renewing one lease (its holder "crashes") and forgets it; returns it. */
  abandon(index: number): KeptLease {
    const [l] = this.leases.splice(index, 1);
    if (!l) throw new Error(`no lease ${index}`);
    this.abandoned.add(l);
    return l;
  }

  private readonly abandoned = new Set<KeptLease>();

  /** Resolves once every lease has been renewed `n` more times (an event from the loops, polled). */
  async renewedAgain(n: number, timeoutMs = 30_000): Promise<void> {
    const target = this.leases.map((l) => l.renewals + n);
    await until(
      `every lease renewed ${n} more times`,
      async () => (this.leases.every((l, i) => l.renewals >= target[i]!) ? true : undefined),
      timeoutMs,
      20,
    );
  }

  private async keep(l: KeptLease): Promise<void> {
    const period = this.ttlMs / 3;
    while (this.running && !this.abandoned.has(l)) {
      // Wait until TTL/3 after the last successful send (the SDK's schedule).
      const due = l.lastOkSentAt + period - performance.now();
      if (due > 0) await new Promise((r) => setTimeout(r, due));
      if (!this.running || this.abandoned.has(l)) return;
      const sent = performance.now();
      const r = await http<{ error?: string; token?: number }>(
        this.endpoint(),
        'POST',
        `/v1/apps/${this.app}/workers/${l.workerId}/renew`,
        { token: l.token },
        1000,
      );
      if (r.status === 200) {
        l.maxGapMs = Math.max(l.maxGapMs, sent - l.lastOkSentAt);
        l.lastOkSentAt = sent;
        l.renewals++;
      } else if (r.body?.error && LOST.has(r.body.error)) {
        this.lost.push(`worker ${l.workerId} (token ${l.token}): ${r.status} ${JSON.stringify(r.body)}`);
        return;
      } else {
        this.transientErrors++;
        await new Promise((res) => setTimeout(res, 50)); // then another node
      }
    }
  }
}
