/**
 * The SDK's Prometheus metrics, registered on a `prom-client` Registry the application passes in:
 * `new FloeClient({ endpoints, metrics: registry })` (docs/metrics.md, "SDK").
 *
 * Several clients may share one registry: the metrics are created once per registry and every client
 * adds to them. Labels stay bounded: the call kind (not the URL), the app, the server's error code.
 */
import { performance } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { FloeRequestError, FloeUnavailableError } from './errors.js';
import type { CallResult } from './http-transport.js';
import type { WorkerLease } from './worker-lease.js';

type Post = <T>(path: string, body: unknown, call: { budgetMs: number }) => Promise<CallResult<T>>;

/** What the SDK's metrics need of a lease (WorkerLease has it). */
type TrackedLease = Pick<WorkerLease, 'app' | 'workerId' | 'deadlineMono' | 'on' | 'once'>;

const byRegistry = new WeakMap<Registry, ClientMetrics>();

/** The kind of call a path is (bounded label values). */
export function callKind(path: string): string {
  const p = path.split('?')[0] ?? '';
  if (/^\/v1\/apps\/[^/]+\/workers\/acquire$/.test(p)) return 'acquire';
  if (/^\/v1\/apps\/[^/]+\/workers\/[^/]+\/renew$/.test(p)) return 'renew';
  if (/^\/v1\/apps\/[^/]+\/workers\/[^/]+\/release$/.test(p)) return 'release';
  if (/^\/v1\/sequences\/[^/]+\/alloc$/.test(p) || p.startsWith('/api/segment/')) return 'sequence_alloc';
  return 'other';
}

/** Outcome label: ok, the server's error code (e.g. pool_exhausted), or unavailable. */
function outcomeOf(err: unknown): string {
  if (err instanceof FloeRequestError)
    return /^[a-z0-9_]{1,40}$/.test(err.serverCode) ? err.serverCode : 'error';
  if (err instanceof FloeUnavailableError) return 'unavailable';
  return 'error';
}

export class ClientMetrics {
  private readonly calls: Counter<'call' | 'outcome'>;
  private readonly duration: Histogram<'call'>;
  private readonly held: Gauge<'app'>;
  private readonly renewals: Counter<'app' | 'result'>;
  private readonly lost: Counter<'app' | 'reason'>;
  private readonly released: Counter<'app'>;
  /** Live leases of every client on this registry, with their client's monotonic clock. */
  private readonly live = new Map<TrackedLease, () => number>();

  /** The metrics of `registry`, created on first use. */
  static of(registry: Registry): ClientMetrics {
    let m = byRegistry.get(registry);
    if (!m) {
      m = new ClientMetrics(registry);
      byRegistry.set(registry, m);
    }
    return m;
  }

  private constructor(registry: Registry) {
    const registers = [registry];
    this.calls = new Counter({
      name: 'floe_client_calls_total',
      help: 'Calls to the cluster (after retries and redirects), by kind and outcome (ok, the server error code, unavailable).',
      labelNames: ['call', 'outcome'],
      registers,
    });
    this.duration = new Histogram({
      name: 'floe_client_call_duration_seconds',
      help: 'Time of a call to the cluster, retries and redirects included, by kind.',
      labelNames: ['call'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.held = new Gauge({
      name: 'floe_client_leases_held',
      help: 'Worker-ID leases this process holds, per app.',
      labelNames: ['app'],
      registers,
    });
    this.renewals = new Counter({
      name: 'floe_client_lease_renewals_total',
      help: 'Lease renewals, per app and result (ok, failed: retried until the deadline).',
      labelNames: ['app', 'result'],
      registers,
    });
    this.lost = new Counter({
      name: 'floe_client_leases_lost_total',
      help: 'Leases lost, per app and reason (deadline, stale_token, not_held, lease_expired, cache_lock_lost).',
      labelNames: ['app', 'reason'],
      registers,
    });
    this.released = new Counter({
      name: 'floe_client_leases_released_total',
      help: 'Leases released by this process, per app.',
      labelNames: ['app'],
      registers,
    });
    const live = this.live;
    new Gauge({
      name: 'floe_client_lease_time_left_seconds',
      help: "Shortest time left before a held lease's deadline (it stops generating then unless renewed), per app.",
      labelNames: ['app'],
      registers,
      collect() {
        this.reset();
        const least = new Map<string, number>();
        for (const [lease, mono] of live) {
          const left = Math.max(0, (lease.deadlineMono - mono()) / 1000);
          const prev = least.get(lease.app);
          if (prev === undefined || left < prev) least.set(lease.app, left);
        }
        for (const [app, left] of least) this.set({ app }, left);
      },
    });
  }

  /** Times every call of `transport` (its `post`, replaced on this instance only). */
  instrumentTransport(transport: { post: Post }): void {
    const post = transport.post.bind(transport) as Post;
    const wrapped: Post = async (path, body, call) => {
      const kind = callKind(path);
      const t0 = performance.now();
      try {
        const r = await post(path, body, call);
        this.calls.inc({ call: kind, outcome: 'ok' });
        return r as never;
      } catch (e) {
        this.calls.inc({ call: kind, outcome: outcomeOf(e) });
        throw e;
      } finally {
        this.duration.observe({ call: kind }, (performance.now() - t0) / 1000);
      }
    };
    transport.post = wrapped;
  }

  /** Counts a lease until it ends. */
  trackLease(lease: TrackedLease, mono: () => number): void {
    const app = lease.app;
    this.live.set(lease, mono);
    this.held.inc({ app });
    let ended = false;
    const end = () => {
      if (ended) return false;
      ended = true;
      this.live.delete(lease);
      this.held.dec({ app });
      return true;
    };
    lease.on('renewed', () => this.renewals.inc({ app, result: 'ok' }));
    lease.on('renewFailed', () => this.renewals.inc({ app, result: 'failed' }));
    lease.once('released', () => {
      if (end()) this.released.inc({ app });
    });
    lease.once('lost', (err: unknown) => {
      const reason = (err as { reason?: unknown })?.reason;
      if (end()) this.lost.inc({ app, reason: typeof reason === 'string' ? reason : 'unknown' });
    });
  }
}
