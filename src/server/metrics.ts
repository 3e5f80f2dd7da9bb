/**
 * A node's Prometheus metrics (docs/metrics.md): Raft, storage, transport, leases, sequences and IDs,
 * RESP commands and HTTP routes, process and Node.js runtime. Values that the node already counts are
 * read at scrape time (nothing on the hot path); per-request figures are observed as they happen.
 *
 * Label cardinality is bounded: RESP commands by the command table, HTTP routes by their pattern
 * (`/v1/apps/:app/workers/acquire`, never the raw URL), peers by membership, apps by the configured
 * pools. Sequence keys are never labels (there may be millions): the dashboard shows them instead.
 */
import { performance } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { registerAuditMetrics } from '../audit/metrics.js';
import type { AuditStats } from '../audit/pipeline.js';
import type { LeaseService } from '../lease/lease-service.js';
import type { FloeNode } from '../node/node.js';
import type { SequenceService } from '../sequences/index.js';
import type { SnowflakeService } from '../snowflakes/snowflake-service.js';
import type { LeaseStateMachine } from '../state/leases/index.js';
import type { SequenceStateMachine } from '../state/sequences/sequence-state-machine.js';
import type { TransportStats } from '../transport/index.js';
import { FastRequestMetrics } from './metrics-fast.js';
import { LatencyWindow } from './metrics-window.js';

/** Latency buckets (seconds) shared by request histograms: 100 µs … 10 s. */
export const LATENCY_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/** What the metrics read: everything but the node is optional (tests run nodes with fewer parts). */
export interface NodeMetricsOptions {
  node: FloeNode<unknown>;
  /** Where to register; default a new Registry. */
  registry?: Registry;
  /** Process and Node.js runtime metrics (`floe_process_*`, `floe_nodejs_*`). Default true. */
  defaultMetrics?: boolean;
  /** The replicated lease state: per-app counters from its applied events, pool gauges. */
  leases?: LeaseStateMachine;
  /** The leader-side lease service: renewals answered without a log entry, expiry proposals. */
  leaseService?: LeaseService;
  /** The replicated sequence state: segments allocated (applied events). */
  sequences?: SequenceStateMachine;
  /** Sequence values handed out by this node (INCR, SEQ.NEXT, HTTP). */
  sequenceService?: SequenceService;
  /** Server-side Snowflake IDs handed out by this node. */
  snowflakes?: SnowflakeService;
  /** Peer transport: queues, drops, connections. */
  transport?: { stats(): TransportStats };
  /** Raft storage: timed around each synced save (write + fdatasync, group commit). */
  storage?: {
    save(batch: unknown, opts: { sync: boolean }): Promise<void>;
  };
  /** The audit pipeline's figures (floe_audit_*). */
  audit?: { stats(): AuditStats };
}

type Labels<T extends string> = Partial<Record<T, string | number>>;

/** A node's registry plus the observers the servers call. */
export class NodeMetrics {
  readonly registry: Registry;
  /** The last five minutes in 5-second slots, for the dashboard. */
  readonly windows = {
    resp: new LatencyWindow(),
    http: new LatencyWindow(),
    commit: new LatencyWindow(),
  };
  private readonly resp: FastRequestMetrics;
  private readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  private readonly httpDuration: Histogram<'method' | 'route'>;
  private readonly unsubscribe: Array<() => void> = [];
  private respStats: (() => { connected: number; rejected: number; errors: number }) | undefined;

  constructor(private readonly o: NodeMetricsOptions) {
    const registry = o.registry ?? new Registry();
    this.registry = registry;
    // prom-client puts the prefix in front of its own names (`process_cpu_seconds_total`), so the prefix
    // is `floe_`, giving floe_process_cpu_seconds_total and floe_nodejs_heap_size_used_bytes.
    if (o.defaultMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'floe_' });
    const r = [registry];

    // ---- RESP and HTTP ------------------------------------------------------------------------
    this.resp = new FastRequestMetrics(registry, {
      counterName: 'floe_resp_commands_total',
      counterHelp: 'RESP commands run, by command and result (ok, or error for an error reply).',
      histogramName: 'floe_resp_command_duration_seconds',
      histogramHelp: 'Time from a RESP command starting to its reply being ready.',
      label: 'command',
      buckets: LATENCY_BUCKETS,
    });
    this.httpRequests = new Counter({
      name: 'floe_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern and status code.',
      labelNames: ['method', 'route', 'status'],
      registers: r,
    });
    this.httpDuration = new Histogram({
      name: 'floe_http_request_duration_seconds',
      help: 'Time from an HTTP request arriving to its reply being sent, by method and route pattern.',
      labelNames: ['method', 'route'],
      buckets: LATENCY_BUCKETS,
      registers: r,
    });
    this.gauge('floe_resp_connected_clients', 'RESP clients connected.', () => this.respStats?.().connected);
    this.counterFrom(
      'floe_resp_rejected_connections_total',
      'RESP connections refused (max clients).',
      () => this.respStats?.().rejected,
    );
    this.counterFrom(
      'floe_resp_error_replies_total',
      'RESP error replies of any kind (unknown command, arity, auth, MOVED, refusals).',
      () => this.respStats?.().errors,
    );

    this.raft();
    if (o.storage) this.storageLatency(o.storage);
    if (o.transport) this.transport(o.transport);
    if (o.leases) this.leases(o.leases);
    if (o.leaseService) this.leaseService(o.leaseService);
    this.ids();
    if (o.audit) {
      const audit = o.audit;
      registerAuditMetrics(registry, () => audit.stats());
    }
  }

  /** What these metrics read (the dashboard reads the same). */
  get sources(): NodeMetricsOptions {
    return this.o;
  }

  /** The RESP server calls this after every command (see instrumentCommandTable). */
  readonly observeRespCommand = (command: string, seconds: number, ok: boolean, count = 1): void => {
    this.resp.observe(command, seconds, ok, count);
    this.windows.resp.observe(seconds, ok, count);
  };

  /** Connected clients and refusals, read from the RESP server at scrape time. */
  attachResp(stats: () => { clients: unknown[]; rejectedConnections: number; errorReplies: number }): void {
    this.respStats = () => {
      const s = stats();
      return { connected: s.clients.length, rejected: s.rejectedConnections, errors: s.errorReplies };
    };
  }

  /** Counts and times every request of `app` by its route pattern (unmatched URLs are one label). */
  attachHttp(app: FastifyInstance): void {
    app.addHook('onResponse', async (req, reply) => {
      const route = req.routeOptions.url ?? 'unmatched';
      const seconds = reply.elapsedTime / 1000;
      // The event stream stays open for minutes: its duration says nothing about the node.
      if (route === '/dashboard/events') return;
      this.httpRequests.inc({ method: req.method, route, status: String(reply.statusCode) });
      this.httpDuration.observe({ method: req.method, route }, seconds);
      if (route !== '/metrics' && !route.startsWith('/dashboard'))
        this.windows.http.observe(seconds, reply.statusCode < 500);
    });
  }

  close(): void {
    for (const u of this.unsubscribe.splice(0)) u();
  }

  // ---- helpers -------------------------------------------------------------------------------

  private gauge(name: string, help: string, read: () => number | undefined): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        const v = read();
        if (v !== undefined) this.set(v);
      },
    });
  }

  /** A counter whose value is a running total kept elsewhere (read at scrape time). */
  private counterFrom(name: string, help: string, read: () => number | undefined): void {
    new Counter({
      name,
      help,
      registers: [this.registry],
      collect() {
        const v = read();
        if (v === undefined) return;
        this.reset();
        this.inc(v);
      },
    });
  }

  private labelledGauge<T extends string>(
    name: string,
    help: string,
    labelNames: T[],
    read: () => Array<[Labels<T>, number]>,
  ): void {
    new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [labels, v] of read()) this.set(labels, v);
      },
    });
  }

  private labelledCounterFrom<T extends string>(
    name: string,
    help: string,
    labelNames: T[],
    read: () => Array<[Labels<T>, number]>,
  ): void {
    new Counter({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [labels, v] of read()) this.inc(labels, v);
      },
    });
  }

  // ---- Raft and storage ----------------------------------------------------------------------

  private raft(): void {
    const { node } = this.o;
    this.gauge('floe_raft_term', 'Current Raft term.', () => node.status().term);
    this.gauge('floe_raft_commit_index', 'Highest log index known committed.', () => node.status().commit);
    this.gauge(
      'floe_raft_applied_index',
      'Highest log index applied to the state machine.',
      () => node.status().appliedIndex,
    );
    this.gauge(
      'floe_raft_snapshot_index',
      'Log index of the latest snapshot.',
      () => node.status().snapshotIndex,
    );
    this.gauge('floe_raft_is_leader', '1 if this node is the leader.', () => (node.isLeader ? 1 : 0));
    this.gauge('floe_raft_leader_id', 'Member id of the known leader (0 when none).', () => node.leaderId);
    this.gauge('floe_raft_members', 'Voters and learners in the configuration.', () => {
      const c = node.status().conf;
      return c.voters.length + c.learners.length;
    });
    this.counterFrom(
      'floe_raft_proposals_total',
      'Proposals accepted by the local Raft core.',
      () => node.stats.proposals,
    );
    this.counterFrom('floe_raft_applied_entries_total', 'Entries applied.', () => node.stats.applied);
    this.counterFrom(
      'floe_raft_ready_batches_total',
      'Ready batches handled (persist, send, apply).',
      () => node.stats.readyBatches,
    );
    this.counterFrom(
      'floe_raft_fsyncs_total',
      'Ready batches persisted with fsync.',
      () => node.stats.fsyncs,
    );
    this.counterFrom('floe_raft_snapshots_total', 'Snapshots taken.', () => node.stats.snapshots);
    this.counterFrom(
      'floe_raft_leader_changes_total',
      'Times the known leader changed.',
      () => node.stats.leaderChanges,
    );

    // Commit latency: the node has no hook for it, so propose() is timed from outside (the instance's
    // method is wrapped; callers look it up at call time). On the leader: append, replicate to a
    // quorum, fsync, apply, answer.
    const commit = new Histogram({
      name: 'floe_raft_commit_duration_seconds',
      help: 'Time from propose() to its applied result on this node (leader only: followers refuse at once).',
      buckets: LATENCY_BUCKETS,
      registers: [this.registry],
    });
    const failed = new Counter({
      name: 'floe_raft_proposals_failed_total',
      help: 'Proposals that did not resolve with a result, by error (NotLeaderError, ProposalTimeoutError, ...).',
      labelNames: ['error'],
      registers: [this.registry],
    });
    const win = this.windows.commit;
    wrapAsync(node, 'propose', (seconds, err) => {
      if (err === undefined) {
        commit.observe(seconds);
        win.observe(seconds, true);
        return;
      }
      const name = err instanceof Error ? err.name : 'Error';
      failed.inc({ error: /^[A-Za-z]{1,40}$/.test(name) ? name : 'Error' });
      // A follower's NotLeaderError is a redirect, not a slow commit.
      if (name !== 'NotLeaderError') win.observe(seconds, false);
    });
  }

  private storageLatency(storage: NonNullable<NodeMetricsOptions['storage']>): void {
    const fsync = new Histogram({
      name: 'floe_storage_fsync_duration_seconds',
      help: 'Time of one synced Raft save: write and fdatasync of the WAL (group commit: one per Ready batch).',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 5],
      registers: [this.registry],
    });
    const unsynced = new Counter({
      name: 'floe_storage_unsynced_saves_total',
      help: 'Raft saves without fsync (nothing that needs to be durable).',
      registers: [this.registry],
    });
    const s = storage as { save: (batch: unknown, opts: { sync: boolean }) => Promise<void> };
    const save = s.save.bind(storage);
    s.save = (batch, opts) => {
      if (!opts?.sync) {
        unsynced.inc();
        return save(batch, opts);
      }
      const t0 = performance.now();
      return save(batch, opts).then((v) => {
        fsync.observe((performance.now() - t0) / 1000);
        return v;
      });
    };
  }

  // ---- transport -----------------------------------------------------------------------------

  private transport(t: { stats(): TransportStats }): void {
    type P = 'peer';
    const per = (pick: (p: TransportStats['peers'][number]) => number) => (): Array<[Labels<P>, number]> =>
      Object.entries(t.stats().peers).map(([peer, p]) => [{ peer }, pick(p)]);
    this.labelledGauge(
      'floe_transport_queue_messages',
      'Messages waiting in the bounded queue per peer.',
      ['peer'],
      per((p) => p.queued),
    );
    this.labelledGauge(
      'floe_transport_queue_bytes',
      'Bytes waiting in the bounded queue per peer.',
      ['peer'],
      per((p) => p.queuedBytes),
    );
    this.labelledGauge(
      'floe_transport_peer_connected',
      '1 while the outbound connection to a peer is up.',
      ['peer'],
      per((p) => (p.connected ? 1 : 0)),
    );
    this.labelledCounterFrom(
      'floe_transport_sent_messages_total',
      'Messages handed to the socket per peer.',
      ['peer'],
      per((p) => p.sent),
    );
    this.labelledCounterFrom(
      'floe_transport_dropped_messages_total',
      'Messages dropped per peer: queue full, not connected, or lost in the queue when a connection broke.',
      ['peer'],
      per((p) => p.dropped),
    );
    this.labelledCounterFrom(
      'floe_transport_reconnects_total',
      'Successful reconnections per peer.',
      ['peer'],
      per((p) => p.reconnects),
    );
    this.labelledCounterFrom(
      'floe_transport_dial_failures_total',
      'Failed dials per peer.',
      ['peer'],
      per((p) => p.dialFailures),
    );
    this.counterFrom(
      'floe_transport_rejected_handshakes_total',
      'Inbound connections that failed the cluster-secret handshake.',
      () => t.stats().rejectedHandshakes,
    );
    this.counterFrom(
      'floe_transport_protocol_errors_total',
      'Authenticated peer connections closed for breaking the protocol.',
      () => t.stats().protocolErrors,
    );
  }

  // ---- leases --------------------------------------------------------------------------------

  private leases(state: LeaseStateMachine): void {
    this.labelledGauge('floe_leases_held', 'Live worker-ID leases per app.', ['app'], () =>
      state.poolList().map((p) => [{ app: p.app }, p.leased]),
    );
    this.labelledGauge('floe_lease_pool_size', 'Worker IDs in the pool per app (2^bits).', ['app'], () =>
      state.poolList().map((p) => [{ app: p.app }, p.size]),
    );
    // Counted on every member as it applies the log (all members agree): aggregate with max(), not sum().
    const events = new Counter({
      name: 'floe_lease_events_total',
      help: 'Lease changes applied from the log, per app: acquired, renewed (raised the high-water mark), released, expired.',
      labelNames: ['app', 'event'],
      registers: [this.registry],
    });
    const name = {
      granted: 'acquired',
      renewed: 'renewed',
      released: 'released',
      expired: 'expired',
    } as const;
    this.unsubscribe.push(
      state.subscribe((e) => {
        if (e.type === 'restored') return;
        events.inc({ app: e.app, event: name[e.type] });
      }),
    );
  }

  private leaseService(svc: LeaseService): void {
    this.labelledCounterFrom(
      'floe_lease_renewals_total',
      'Renewals answered by this node as leader: local (ReadIndex, no log entry) or logged (raised the bound).',
      ['kind'],
      () => [
        [{ kind: 'local' }, svc.stats.localRenewals],
        [{ kind: 'logged' }, svc.stats.loggedRenewals],
      ],
    );
    this.counterFrom(
      'floe_lease_expire_proposals_total',
      'Expiry proposals made by this node as leader.',
      () => svc.stats.expireProposals,
    );
    this.counterFrom(
      'floe_lease_expired_by_leader_total',
      'Leases this node expired as leader (deadline passed without renewal).',
      () => svc.stats.expiredLeases,
    );
  }

  // ---- sequences and IDs ---------------------------------------------------------------------

  private ids(): void {
    // Sequence values are counted by the service (one addition per request, no wrapper: INCR may be answered
    // synchronously) and added here at scrape time.
    const seqStats = this.o.sequenceService?.stats;
    let seqReported = 0;
    const issued = new Counter({
      name: 'floe_ids_issued_total',
      help: 'IDs handed out by this node: sequence values (INCR, SEQ.NEXT, HTTP) and server-side Snowflake IDs.',
      labelNames: ['kind'],
      registers: [this.registry],
      collect() {
        if (!seqStats) return;
        const d = seqStats.issuedValues - seqReported;
        if (d > 0) {
          seqReported += d;
          this.inc({ kind: 'sequence' }, d);
        }
      },
    });
    issued.inc({ kind: 'sequence' }, 0);
    issued.inc({ kind: 'snowflake' }, 0);
    if (seqStats) {
      this.counterFrom(
        'floe_sequence_stalls_total',
        'Sequence requests served here that found no buffered values and waited for a segment proposal.',
        () => seqStats.stalls,
      );
      const confirms = this.o.sequenceService?.confirmStats;
      if (confirms) {
        this.counterFrom(
          'floe_sequence_read_rounds_total',
          'ReadIndex rounds this leader started to confirm its leadership for strict sequence requests.',
          () => confirms.rounds,
        );
        this.counterFrom(
          'floe_sequence_lease_answers_total',
          'Strict sequence requests answered under the leader lease, with no ReadIndex round (--leader-lease).',
          () => confirms.leased,
        );
      }
      this.gauge(
        'floe_sequence_stall_fetches_max',
        'The most segment proposals one sequence request has waited for on this node (1: never more than one).',
        () => seqStats.stallFetchesMax,
      );
    }
    if (this.o.sequences) {
      const segments = new Counter({
        name: 'floe_sequence_segments_allocated_total',
        help: 'Sequence segments allocated (applied from the log, on every member).',
        registers: [this.registry],
      });
      const values = new Counter({
        name: 'floe_sequence_values_allocated_total',
        help: 'Sequence values covered by the allocated segments (applied from the log, on every member).',
        registers: [this.registry],
      });
      this.unsubscribe.push(
        this.o.sequences.onAllocated((a) => {
          segments.inc();
          const n = Number(BigInt(a.end) - BigInt(a.start));
          if (n > 0 && Number.isFinite(n)) values.inc(n);
        }),
      );
      const seqs = this.o.sequences;
      this.gauge('floe_sequences', 'Sequences defined.', () => seqs.size);
    }
    // The Snowflake service keeps no counter: its method is timed from outside, like propose().
    if (this.o.snowflakes) {
      const sf = this.o.snowflakes as unknown as Record<string, unknown>;
      wrapAsync(sf, 'next', (_s, err, _args, result) => {
        if (err === undefined) issued.inc({ kind: 'snowflake' }, (result as unknown[]).length);
      });
    }
  }
}

/**
 * Replaces `obj[method]` (an async method) with a timed pass-through, on this instance only. Callers that
 * look the method up at call time (every caller in Floe) go through it.
 */
function wrapAsync(
  obj: object,
  method: string,
  done: (seconds: number, err: unknown, args: unknown[], result?: unknown) => void,
): void {
  const o = obj as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const orig = o[method];
  if (typeof orig !== 'function') return;
  const bound = orig.bind(obj);
  o[method] = (...args: unknown[]) => {
    const t0 = performance.now();
    return bound(...args).then(
      (v) => {
        done((performance.now() - t0) / 1000, undefined, args, v);
        return v;
      },
      (e: unknown) => {
        done((performance.now() - t0) / 1000, e ?? new Error('rejected'), args);
        throw e;
      },
    );
  };
}
