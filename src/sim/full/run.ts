// One full-stack simulation run: build the world from a seed, run the workload under the faults
// the seed drew, heal, check liveness and the oracles, and report.

import type { MemberInfo } from '../../node/members.js';
import type { NodeStorage } from '../../node/seams.js';
import type { Entry, Message, NodeId, Storage } from '../../raft/types.js';
import { BUG_SWITCHES, switchBugsOn } from '../../testing/bug-switches.js';
import type { InvariantViolation } from '../checker.js';
import { MAX_SEED, Prng } from '../prng.js';
import { Trace } from '../trace.js';
import { type ConfigOverrides, drawConfig, type SimConfig } from './config.js';
import { FailStopOracle, type FailStopStats } from './fail-stop-oracle.js';
import { FaultDirector, type FaultStats } from './faults.js';
import { FRAME_VALUE_TAIL, frameShapedText } from './frame-shaped.js';
import { routeGlobalTimers } from './global-timers.js';
import { callLeader, HttpRouter, LB_HOST } from './http-router.js';
import { IdOracle, type OracleStats } from './id-oracle.js';
import { checkKvHistories, KvClient, KvHistory } from './kv-workload.js';
import { LeaseLedger, type LedgerStats } from './lease-ledger.js';
import { LeaseClientHost, type LeaseClientStats } from './lease-workload.js';
import { VirtualNetwork } from './network.js';
import { errText, NodeHost } from './node-host.js';
import { PEER_HARNESS_BUGS, PeerNet, type PeerNetStats } from './peer-net.js';
import { type PeerStrangerStats, PeerStrangers } from './peer-strangers.js';
import { Machine, MachineClock, SimProcess } from './process.js';
import { RaftObserver } from './raft-observer.js';
import { ReadContextOracle } from './read-context-oracle.js';
import { RespHostile, type RespHostileStats } from './resp-hostile.js';
import { RespLeaseClient, type RespLeaseStats, zeroRespLeaseStats } from './resp-lease-workload.js';
import { RESP_HARNESS_BUGS, RespNet, respAddrOf, respLimitsFor } from './resp-link.js';
import { immediates, Scheduler } from './scheduler.js';
import { createSequences, SeqClient, SeqOracle, type SeqStats } from './seq-workload.js';
import {
  createSnowflakeKeys,
  SnowflakeClient,
  SnowflakeDeliveries,
  type SnowflakeStats,
} from './snowflake-workload.js';
import type { Failure, FailureKind, World } from './world.js';

export interface FullSimOptions extends ConfigOverrides {
  seed: number;
  /** Profile name (see config.ts). Default 'swarm'. */
  profile?: string;
  /** Trace lines kept for the failure report. Default 80. */
  traceTail?: number;
  /** Every trace line, as it happens. */
  verbose?: (line: string) => void;
  /** Bugs re-introduced on purpose (test-only switches; none are threaded into production code yet). */
  bugs?: Iterable<string>;
  /**
   * How the supervisor restarts a node that stopped on a disk error: 'reboot' (default: the machine
   * restarts, its page cache is gone) or 'process' (only the process restarts; see finding FS-1).
   */
  eioRestart?: 'reboot' | 'process';
  /**
   * Harness workarounds for open findings, so a sweep can look past them (default: every one in
   * OPEN_WORKAROUNDS). 'conf-resulting': FS-2, see docs/findings/full-sim-findings.md. 'resp-request-boundary' (not
   * in OPEN_WORKAROUNDS since FS-18 was fixed; name it to run as before the fix): hostile RESP clients never leave a
   * request unfinished right after a CRLF.
   */
  workarounds?: Iterable<string>;
}

export interface FullSimStats {
  events: number;
  simMs: number;
  messages: number;
  httpRequests: number;
  kvOps: number;
  acknowledgedWrites: number;
  maxTerm: number;
  unattributedTimers: number;
  unsettledEvents: number;
  /** Messages stepped by a node while a snapshot it received was still being saved (coverage). */
  stepsDuringSnapshotSave: number;
  oracle: OracleStats;
  /** Lease replies and accepted leases checked against the committed lease state. */
  ledger: LedgerStats;
  /** Fsync EIOs on node processes' Raft storage, and how many of those processes halted. */
  failStop: FailStopStats;
  clients: LeaseClientStats;
  /** The sequence workload (zeros in seeds without it). */
  seq: SeqStats;
  /** The server-side Snowflake workload (zeros in seeds without it). */
  snowflake: SnowflakeStats;
  /** The RESP lease workload (zeros in seeds without it). */
  respLease: RespLeaseStats;
  /** Lease replies delivered to another client's request (`replyMixup`). */
  mixedUpReplies: number;
  faults: FaultStats;
  /** Simulated TCP between node processes, in seeds with the production PeerTransport. */
  peerNet?: PeerNetStats;
  peerStrangers?: PeerStrangerStats;
  respHostile?: RespHostileStats;
}

export interface FullSimResult {
  seed: number;
  profile: string;
  ok: boolean;
  failure?: Failure;
  traceHash: string;
  /** The trace hash where the every-client liveness phase began (runs before it ended there): for comparisons. */
  traceHashBeforeEveryClient?: string;
  traceLines: number;
  tail: string[];
  stats: FullSimStats;
  config: SimConfig;
  elapsedMs: number;
  /** Simulated time the run covered (it stops early at a failure, and when healing has shown liveness). */
  simulatedMs: number;
  /** The run ended without a healthy quorum (corrupt data on a majority of voters): liveness not required. */
  livenessExempt?: boolean;
}

const WALL_EPOCH_MS = Date.UTC(2026, 5, 1);

/** Bugs the harness re-introduces from outside the production code (the others are src/testing/bug-switches.ts). */
const HARNESS_BUGS: readonly string[] = [
  'client-shared-incarnation',
  'client-wall-stops-in-suspend',
  ...RESP_HARNESS_BUGS,
  ...PEER_HARNESS_BUGS,
];

/** Workarounds for findings still open in production code (on by default; see FullSimOptions.workarounds). */
export const OPEN_WORKAROUNDS: readonly string[] = ['conf-resulting'];
/** Every workaround a run may name: the open ones, and those kept to replay a run as it was before its fix. */
export const KNOWN_WORKAROUNDS: readonly string[] = [...OPEN_WORKAROUNDS, 'resp-request-boundary'];

/**
 * The Raft observer, also keeping each node process's storage (the lease ledger reads a grant's command back), and
 * telling the fail-stop oracle what each node process does: saves it acknowledges, messages it sends, entries it
 * applies. Nothing here changes when anything runs: a save's promise is returned as it is (the oracle's reaction to
 * it is one more callback on it, registered before the node's own).
 */
class LogReadingObserver extends RaftObserver {
  private readonly logs = new Map<NodeId, Storage>();
  /** The node process that runs node `id` now (set by run.ts once hosts exist). */
  procOf: (id: NodeId) => string | undefined = () => undefined;
  failStop: FailStopOracle | undefined;

  override started(id: NodeId, storage: Storage, voters: () => readonly NodeId[]): void {
    this.logs.set(id, storage);
    super.started(id, storage, voters);
  }

  /** Node `id`'s entry at `index` (the one it is applying), if its log still holds it. */
  entryAt(id: NodeId, index: number): Entry | undefined {
    const s = this.logs.get(id);
    if (!s || index < s.firstIndex() || index > s.lastIndex()) return undefined;
    try {
      return s.entries(index, index + 1)[0];
    } catch {
      return undefined;
    }
  }

  override sent(m: Message): void {
    const p = this.failStop?.stats.eios ? this.procOf(m.from) : undefined;
    if (p !== undefined && this.failStop?.failed(p)) this.failStop.acted(p, `sent ${m.type} to n${m.to}`);
    super.sent(m);
  }

  override applied(id: NodeId, applied: number): void {
    const p = this.failStop?.stats.eios ? this.procOf(id) : undefined;
    if (p !== undefined && this.failStop?.failed(p))
      this.failStop.acted(p, `applied entries up to ${applied}`);
    super.applied(id, applied);
  }

  override wrap(id: NodeId, inner: NodeStorage & { storage: Storage }): NodeStorage {
    const s = super.wrap(id, inner);
    const failStop = this.failStop;
    const proc = this.procOf(id);
    if (!failStop || proc === undefined) return s;
    const save = s.save;
    s.save = (batch, opts) => {
      const p = save.call(s, batch, opts);
      p.then(
        () => {
          if (failStop.failed(proc))
            failStop.acted(
              proc,
              `acknowledged a save (${batch.entries.length} entries${batch.hardState ? ', hard state' : ''}${batch.snapshot ? ', snapshot' : ''}, sync ${opts.sync})`,
            );
        },
        () => {},
      );
      return p;
    };
    return s;
  }
}

/** The sequence oracle, also noting when each sequence client last completed a call (every-client liveness). */
class SeqCallsOracle extends SeqOracle {
  /** Client name → global µs of its last call answered with values (any kind: INCRBY, Leaf, SEQ.ALLOC, FloeSequence). */
  readonly lastOkUs = new Map<string, number>();
  constructor(private readonly w: World) {
    super(w);
  }
  override values(key: string, first: bigint, last: bigint, who: string): void {
    const at = who.indexOf('@');
    if (at > 0) this.lastOkUs.set(who.slice(0, at), this.w.sched.nowUs);
    super.values(key, first, last, who);
  }
}

class RunWorld implements World {
  readonly sched = new Scheduler();
  readonly bugs: ReadonlySet<string>;
  failure: Failure | undefined;
  /** Set when the run ended with no healthy quorum of voters (corrupt data beyond the failure model). */
  livenessExempt = false;
  clusterUid: string | undefined;
  /** The trace hash when the every-client liveness phase began (where runs ended before it). */
  hashBeforeEveryClient: string | undefined;
  private readonly root: Prng;
  private pid = 100;
  private readonly procs = new Map<number, SimProcess>();

  constructor(
    readonly seed: number,
    readonly traceLog: Trace,
    bugs: Iterable<string>,
    private readonly verbose: ((line: string) => void) | undefined,
  ) {
    this.root = new Prng(seed);
    this.bugs = new Set(bugs);
  }

  rng(label: string): Prng {
    return this.root.fork(label);
  }

  trace(line: string): void {
    this.traceLog.add(this.sched.nowUs, line);
  }

  detail(line: string): void {
    this.verbose?.(line);
  }

  nextPid(): number {
    return ++this.pid;
  }

  register(p: SimProcess): void {
    this.procs.set(p.pid, p);
  }

  isPidAlive(pid: number): boolean {
    return this.procs.get(pid)?.alive ?? false;
  }

  processByPid(pid: number): SimProcess | undefined {
    return this.procs.get(pid);
  }

  fail(kind: FailureKind, detail: string): void {
    if (this.failure) return;
    this.trace(`FAILURE ${kind}: ${detail}`);
    this.failure = { kind, detail, atUs: this.sched.nowUs };
  }
}

export async function runFullSim(o: FullSimOptions): Promise<FullSimResult> {
  if (!Number.isSafeInteger(o.seed) || o.seed < 0 || o.seed > MAX_SEED) {
    throw new RangeError(`seed must be an integer in [0, ${MAX_SEED}], got ${o.seed}`);
  }
  for (const b of o.bugs ?? []) {
    if (!HARNESS_BUGS.includes(b) && !(BUG_SWITCHES as readonly string[]).includes(b))
      throw new RangeError(`unknown bug "${b}"; known: ${[...HARNESS_BUGS, ...BUG_SWITCHES].join(', ')}`);
  }
  const started = performance.now();
  const cfg = drawConfig(o.seed, o.profile ?? 'swarm', o);
  cfg.node.sequences = cfg.seq.clients > 0;
  if (cfg.snowflake.clients > 0) cfg.node.snowflakes = { cache: cfg.snowflake.cache };
  if (cfg.machineMonotonic) cfg.node.machineMonotonic = true;
  if (cfg.leaderLease) cfg.node.leaderLease = true;
  if (cfg.leaseRolling) cfg.node.leaderLeaseOff = cfg.leaseRolling;
  const trace = new Trace(o.traceTail ?? 80, o.verbose);
  const w = new RunWorld(o.seed, trace, o.bugs ?? [], o.verbose);
  const sched = w.sched;
  const rng = w.rng('run');
  if (cfg.productionDefaults) {
    const c = cfg.productionDefaults.containerHosts;
    w.trace(
      `production defaults: tick ${cfg.node.tickMs} ms x ${cfg.node.electionTicks}, snapshot every ${cfg.node.snapshotEvery} ` +
        `(${cfg.node.trailingEntries} trailing), lease TTL ${cfg.lease.ttlMs} ms, SDK request timeout ` +
        `${cfg.lease.requestTimeoutMs} ms${c > 0 ? `, c1..c${c} in PID namespaces of their own` : ''}`,
    );
  }

  if (cfg.leaseRolling)
    w.trace(
      `leader lease, rolling enable: ${cfg.leaseRolling.map((id) => `n${id}`).join(', ')} run without --leader-lease, ` +
        'the others with it',
    );
  else if (cfg.leaderLease)
    w.trace('leader lease: every node runs --leader-lease (strict values served from the lease)');
  const onProcessError = (err: unknown) => w.fail('process-crash', `uncaught: ${errText(err)}`);
  const switchBugsOff = switchBugsOn(o.bugs ?? []);
  immediates.install();
  immediates.onError = onProcessError;
  const timers = routeGlobalTimers(sched);
  process.on('unhandledRejection', onProcessError);

  const net = new VirtualNetwork(sched, w.rng('net'), { ...cfg.net }, (l) => w.trace(l));
  const workarounds = new Set(o.workarounds ?? OPEN_WORKAROUNDS);
  for (const x of workarounds) {
    if (!OPEN_WORKAROUNDS.includes(x))
      throw new RangeError(`unknown workaround "${x}"; known: ${OPEN_WORKAROUNDS.join(', ')}`);
  }
  const observer = new LogReadingObserver(
    (l) => w.trace(l),
    (v: InvariantViolation) => w.fail('raft', v.message),
    workarounds.has('conf-resulting'),
  );
  net.onSend = (m) => observer.sent(m);
  net.onDeliver = (to) => observer.delivering(to);
  const peerNet = cfg.transport.production ? new PeerNet(w, net, cfg.transport) : undefined;
  const router = new HttpRouter(w, () => net.conditions);
  router.nodeLinkBlocked = (a, b) => net.isBlocked(a, b);
  const oracle = new IdOracle(w);
  const readContexts = new ReadContextOracle((detail) => w.fail('reply-mismatch', detail));
  const ledger = new LeaseLedger();
  oracle.ledger = ledger;
  router.ledger = ledger;
  const sfDeliveries = new SnowflakeDeliveries(w, oracle);
  const rate = () => 1 + (2 * rng.float() - 1) * cfg.clockDrift;

  // Members advertise a RESP address only in seeds with RESP sequence or snowflake clients (the others keep their
  // log bytes).
  const respOn =
    cfg.seq.kinds.includes('resp') ||
    cfg.snowflake.kinds.includes('resp') ||
    cfg.respLease.clients > 0 ||
    cfg.respHostile !== undefined;
  const respAddr = (id: number) => (respOn ? { respAddr: respAddrOf(id) } : {});
  const members = Array.from({ length: cfg.nodes }, (_, i) => ({
    id: i + 1,
    peerAddr: `n${i + 1}:7000`,
    httpAddr: `n${i + 1}:8080`,
    ...respAddr(i + 1),
  }));
  const hosts: NodeHost[] = [];
  const failStop = new FailStopOracle(w);
  observer.failStop = failStop;
  observer.procOf = (id) => {
    const p = hosts.find((h) => h.id === id)?.proc;
    return p?.alive ? p.name : undefined;
  };
  // The supervisor: a node that stopped or could not start because of an injected disk fault is
  // started again a little later. After an fsync error the machine is rebooted first (its page
  // cache dropped): see docs/simulator-full.md, finding FS-1, for what a plain restart does.
  const supervise = (host: NodeHost, reason: string) => {
    if (host.proc) failStop.stopped(host.proc.name);
    // The fail-stop oracle must have seen every EIO that excuses a halt (its hook on the disk is still in place).
    if (host.eioThisBoot && !(host.proc && failStop.failed(host.proc.name))) {
      w.fail('harness', `n${host.id} had an fsync EIO this boot that the fail-stop oracle did not see`);
      return;
    }
    if (/removed from the cluster/.test(reason)) {
      host.removed = true;
      return;
    }
    // A removed member still running (left on, or started again by mistake: FS-23) stops for its removal only; any
    // other halt is judged as a member's (it is never started again: `boot` refuses a removed machine).
    // Corruption found at start stays: no restart helps (an operator would replace the member). Only a bit flipped
    // at rest explains it; an fsync error, a crash or a torn write never may (docs/storage.md, failure model).
    const corruption = /Corruption/.test(reason);
    if (corruption && host.corrupted) return;
    // Or a bit flipped in a write of an earlier incarnation, in the very file (and WAL frame) the refusal names.
    if (host.explainsByWriteFlip(reason)) return;
    // A halt is excused only by its own cause: an EIO of this boot's Raft storage that the reason cites, or corruption
    // from a bit flipped at rest (re-review: any EIO, even one the node survived, excused any later halt).
    const storageEio = host.eioThisBoot && /EIO/.test(reason);
    const readCorrupt = host.corrupted && /corrupt/i.test(reason);
    if (corruption || !(storageEio || readCorrupt)) {
      const why = corruption ? 'corruption found, with no bit flipped on its disk' : 'without a disk fault';
      w.fail(
        'process-crash',
        `n${host.id} ${host.state === 'failed' ? 'could not start' : 'stopped'} (${why}): ${reason}`,
      );
      return;
    }
    sched.after(rng.range(200, 2_000) * 1000, undefined, 'supervisor-restart', () => {
      if (host.state !== 'halted' && host.state !== 'failed') return;
      host.crash(o.eioRestart === 'process' ? 'process' : 'power');
      host.boot();
    });
  };
  let nextNodeId = cfg.nodes;
  const makeHost = (m: MemberInfo, configured: MemberInfo[], bootstrap: boolean): NodeHost => {
    const h = new NodeHost(
      w,
      m.id,
      m,
      configured,
      bootstrap,
      cfg.node,
      net,
      observer,
      {
        leaseEvent: (id, e) => {
          ledger.leaseEvent(e, (index) => observer.entryAt(id, index));
          oracle.leaseEvent(e);
        },
        stopped: (host, reason) => supervise(host, reason),
        readContexts,
        memberFetch: (proc, name, timeoutMs) => router.fetchFor(proc, name, timeoutMs),
        ...(peerNet ? { peerTransport: (proc, sink) => peerNet.start(m.id, proc, sink, m.peerAddr) } : {}),
        snowflakeLeased: (proc, lease, askedAtUs) => {
          sfDeliveries.stats.leases++;
          if (lease.resumedFromCache) sfDeliveries.stats.resumed++;
          oracle.leased(proc.name, lease.token, proc.machine, askedAtUs, lease.resumedFromCache);
          w.trace(
            `${proc.name} snowflake ${lease.app}: ${lease.resumedFromCache ? 'resumed from cache' : 'leased'} worker ${lease.workerId} token ${lease.token} (floor ${lease.floorMs})`,
          );
        },
        snowflakeIssued: (host, proc, key, lease, ids) => {
          if (!lease || lease.app !== key) {
            w.fail('harness', `${proc.name} issued IDs of ${key} with no lease of it known`);
            return;
          }
          const atUs = proc.effectiveUs;
          for (const id of ids)
            oracle.issued(proc.name, key, lease.workerId, lease.token, lease.layout, id, atUs);
          sfDeliveries.issued(key, ids, host.id);
        },
      },
      rate(),
      WALL_EPOCH_MS + rng.range(-2_000, 2_000),
    );
    // The fail-stop oracle hears of every fsync EIO returned to the node process by its Raft storage.
    const diskHooks = h.disk.faults;
    const syncError = diskHooks.syncError;
    diskHooks.syncError = (path) => {
      const code = syncError?.(path);
      if (code === 'EIO' && !path.includes('snowflake-leases') && h.proc?.alive)
        failStop.fsyncFailed(h.proc.name, path);
      return code;
    };
    hosts.push(h);
    router.addHost(h);
    return h;
  };
  for (const m of members) makeHost(m, members, true);
  /** A new machine that joins the running cluster (configured with the members still in it). */
  const addNode = (): NodeHost => {
    const id = ++nextNodeId;
    const m = { id, peerAddr: `n${id}:7000`, httpAddr: `n${id}:8080`, ...respAddr(id) };
    const configured = [...hosts.filter((h) => !h.removed).map((h) => h.member), m];
    const h = makeHost(m, configured, false);
    h.boot();
    return h;
  };
  for (const h of hosts) h.boot();

  const endpoints = [...members.map((m) => `http://${m.httpAddr}`), `http://${LB_HOST}`];
  const history = new KvHistory();
  const kvClients: KvClient[] = [];
  const newMachine = (name: string, r: number) =>
    new Machine(
      name,
      new MachineClock(sched, r, rng.range(1_000, 1_000_000), WALL_EPOCH_MS + rng.range(-2_000, 2_000)),
    );
  for (let i = 0; i < cfg.kvClients; i++) {
    const name = `kv${i + 1}`;
    const proc = new SimProcess(sched, newMachine(name, 1), `${name}#1`, w.nextPid());
    w.register(proc);
    const c = new KvClient(
      w,
      name,
      proc,
      router.fetchFor(proc, name, 1000),
      endpoints,
      history,
      w.rng(name),
      cfg.kvThinkMs ?? [30, 400],
      cfg.kvFrameValues ? `:${frameShapedText()}${FRAME_VALUE_TAIL}` : '',
    );
    kvClients.push(c);
    sched.after(0, proc, 'kv-start', () => c.start());
  }

  const clientStats: LeaseClientStats = { acquired: 0, acquireFailures: 0, lost: 0, released: 0, issued: 0 };
  const respLeaseClients: RespLeaseClient[] = [];
  const respLeaseStats = zeroRespLeaseStats();
  const leaseClients: LeaseClientHost[] = [];
  for (let i = 0; i < cfg.leaseClients; i++) {
    const name = `c${i + 1}`;
    // The first `sharedNodeIds` hosts reuse the last hosts' identities: two processes, one nodeId.
    const serviceId = i < cfg.lease.sharedNodeIds ? `svc-${cfg.leaseClients - i}` : `svc-${i + 1}`;
    leaseClients.push(
      new LeaseClientHost(
        w,
        name,
        serviceId,
        newMachine(name, rate()),
        {
          app: cfg.lease.app,
          ttlMs: cfg.lease.ttlMs,
          layout: cfg.lease.layout,
          requestTimeoutMs: cfg.lease.requestTimeoutMs,
          burst: cfg.lease.burst,
          gapMs: cfg.lease.gapMs,
          releaseChance: cfg.lease.releaseChance,
          cache: cfg.lease.cache,
          processMonotonic: cfg.lease.processMonotonic,
          ...(cfg.lease.sdkDefaults ? { sdkDefaults: true } : {}),
          ...(i < (cfg.productionDefaults?.containerHosts ?? 0) ? { ownPidNamespaces: true } : {}),
          ...(cfg.machineMonotonic ? { machineMonotonic: true } : {}),
          ...(cfg.lease.safetyMarginMs === undefined ? {} : { safetyMarginMs: cfg.lease.safetyMarginMs }),
        },
        router,
        endpoints,
        oracle,
        clientStats,
      ),
    );
  }

  // The operator gives the app a small pool first, so worker IDs change hands.
  if (leaseClients.length > 0) {
    const admin = kvClients[0]?.proc ?? new SimProcess(sched, newMachine('admin', 1), 'admin#1', w.nextPid());
    const fetch = router.fetchFor(admin, 'admin', 1000);
    const configure = async () => {
      for (let attempt = 0; admin.alive; attempt++) {
        const a = await callLeader(
          fetch,
          endpoints[attempt % endpoints.length] as string,
          'PUT',
          `/v1/apps/${cfg.lease.app}/pool`,
          {
            bits: cfg.lease.poolBits,
          },
        );
        if (typeof a !== 'string' && a.status === 200) break;
        await admin.sleep(200);
      }
      w.trace(`pool ${cfg.lease.app}: ${cfg.lease.poolBits} bits`);
      for (const c of leaseClients) c.spawn();
      for (const c of respLeaseClients) c.start();
    };
    sched.after(0, admin, 'configure-pool', () => void configure());
  }

  // Sequence clients (a share of the seeds): one creates the strict and the node-mode sequence, then all call.
  const seqOracle = new SeqCallsOracle(w);
  const respNet = respOn
    ? new RespNet(
        w,
        router,
        () => net.conditions,
        () => hosts,
      )
    : undefined;
  const seqClients: SeqClient[] = [];
  for (let i = 0; i < cfg.seq.clients; i++) {
    const name = `s${i + 1}`;
    const proc = new SimProcess(sched, newMachine(name, 1), `${name}#1`, w.nextPid());
    w.register(proc);
    seqClients.push(
      new SeqClient(
        w,
        name,
        proc,
        (p) => router.fetchFor(p, name, 1000),
        endpoints,
        cfg.seq,
        seqOracle,
        w.rng(name),
        cfg.seq.kinds[i],
        respNet,
        () => hosts.filter((h) => !h.removed).map((h) => h.id),
      ),
    );
  }
  const firstSeq = seqClients[0];
  if (firstSeq) {
    sched.after(0, firstSeq.proc, 'seq-create', () => {
      void createSequences(
        firstSeq.proc,
        router.fetchFor(firstSeq.proc, firstSeq.name, 1000),
        endpoints,
        cfg.seq,
        w.rng('seq-admin'),
        w,
      ).then(() => {
        for (const c of seqClients) sched.after(0, c.proc, 'seq-start', () => void c.run());
      });
    });
  }

  // Server-side Snowflake clients (a share of the seeds): the first creates the keys, then all call random nodes.
  const sfClients: SnowflakeClient[] = [];
  const sfRng = w.rng('sf-machines');
  for (let i = 0; i < cfg.snowflake.clients; i++) {
    const name = `f${i + 1}`;
    const machine = new Machine(
      name,
      new MachineClock(sched, 1, sfRng.range(1_000, 1_000_000), WALL_EPOCH_MS + sfRng.range(-2_000, 2_000)),
    );
    const proc = new SimProcess(sched, machine, `${name}#1`, w.nextPid());
    w.register(proc);
    sfClients.push(
      new SnowflakeClient(
        w,
        name,
        proc,
        router.fetchFor(proc, name, 1000),
        cfg.snowflake,
        sfDeliveries,
        w.rng(name),
        cfg.snowflake.kinds[i] ?? 'http',
        respNet,
        () => hosts.filter((h) => !h.removed).map((h) => h.id),
      ),
    );
  }
  const firstSf = sfClients[0];
  if (firstSf) {
    sched.after(0, firstSf.proc, 'sf-create', () => {
      void createSnowflakeKeys(
        firstSf.proc,
        router.fetchFor(firstSf.proc, firstSf.name, 1000),
        endpoints,
        cfg.snowflake,
        w.rng('sf-admin'),
        w,
      ).then(() => {
        for (const c of sfClients) sched.after(0, c.proc, 'sf-start', () => void c.run());
      });
    });
  }

  // RESP lease clients (a share of the swarm seeds, `--resp-lease-clients N`): raw holders of the SDK clients' app over
  // WORKER.* commands, started with the SDK clients once the pool is configured. Machines from a stream of their own.
  const rlRng = w.rng('resp-lease-machines');
  for (let i = 0; i < cfg.respLease.clients; i++) {
    const name = `r${i + 1}`;
    const machine = new Machine(
      name,
      new MachineClock(
        sched,
        1 + (2 * rlRng.float() - 1) * cfg.clockDrift,
        rlRng.range(1_000, 1_000_000),
        WALL_EPOCH_MS + rlRng.range(-2_000, 2_000),
      ),
    );
    const proc = new SimProcess(sched, machine, `${name}#1`, w.nextPid());
    w.register(proc);
    respLeaseClients.push(
      new RespLeaseClient(
        w,
        name,
        proc,
        {
          app: cfg.lease.app,
          ttlMs: cfg.lease.ttlMs,
          layout: cfg.lease.layout,
          burst: cfg.respLease.burst,
          gapMs: cfg.respLease.gapMs,
          releaseChance: cfg.respLease.releaseChance,
          boundWindowMs: cfg.respLease.boundWindowMs,
          requestTimeoutMs: Math.min(cfg.respLease.requestTimeoutMs, Math.floor(cfg.lease.ttlMs / 3)),
        },
        respNet as RespNet,
        () => hosts.filter((h) => !h.removed).map((h) => h.id),
        oracle,
        ledger,
        respLeaseStats,
        w.rng(`resp-lease-${name}`),
      ),
    );
  }

  // Strangers on the peer ports (`SimConfig.peerStrangers`): a process of their own, from a stream of their own.
  let strangers: PeerStrangers | undefined;
  if (cfg.peerStrangers && peerNet) {
    peerNet.recording = true;
    const srng = w.rng('peer-strangers');
    const proc = new SimProcess(
      sched,
      new Machine('stranger', new MachineClock(sched, 1, srng.range(1_000, 1_000_000), WALL_EPOCH_MS)),
      'stranger#1',
      w.nextPid(),
    );
    w.register(proc);
    strangers = new PeerStrangers(w, peerNet, proc, srng, cfg.peerStrangers, () =>
      hosts
        .filter((h) => !h.removed)
        .map((h) => ({ id: h.id, addr: `n${h.id}:7000`, proc: h.proc?.alive ? h.proc : undefined })),
    );
    strangers.start();
  }

  // Hostile RESP clients (`SimConfig.respHostile`): a process of their own, from a stream of their own.
  let respHostile: RespHostile | undefined;
  if (cfg.respHostile && respNet) {
    const limits = { requestTimeoutMs: cfg.respHostile.requestTimeoutMs };
    respNet.limitsOverride = limits;
    const hrng = w.rng('resp-hostile');
    const proc = new SimProcess(
      sched,
      new Machine('hostile', new MachineClock(sched, 1, hrng.range(1_000, 1_000_000), WALL_EPOCH_MS)),
      'hostile#1',
      w.nextPid(),
    );
    w.register(proc);
    respHostile = new RespHostile(
      w,
      respNet,
      proc,
      hrng,
      { ...cfg.respHostile, avoidBoundary: workarounds.has('resp-request-boundary') },
      respLimitsFor(limits),
      () => hosts.filter((h) => !h.removed).map((h) => ({ id: h.id, addr: respAddrOf(h.id) })),
    );
    respHostile.start();
  }

  const director = new FaultDirector({
    world: w,
    cfg,
    hosts,
    leaseClients,
    kvClients,
    seqClients,
    respLeaseClients,
    net,
    router,
    addNode,
  });
  director.start();

  // Production code constructs errors on hot paths (NotLeaderError on every follower's 307, refused leases, the
  // SDK's retries), and capturing their stacks was a few percent of a run. Nothing a run checks or hashes reads
  // a stack (node-host.ts traces only an error's first line; the rest goes to `detail`): without --verbose,
  // errors carry none. Restored when the run ends.
  const stackTraceLimit = Error.stackTraceLimit;
  if (!o.verbose) Error.stackTraceLimit = 0;
  let failure: Failure | undefined;
  try {
    const stop = () => w.failure !== undefined;
    await sched.runUntil(cfg.seconds * 1_000_000, stop);
    if (!w.failure) {
      if (peerNet) peerNet.healed = true;
      strangers?.stop();
      respHostile?.stop();
      const convergedAt = await heal(
        w,
        cfg,
        hosts,
        kvClients,
        leaseClients,
        director,
        seqClients,
        sfClients,
        oracle,
        seqOracle,
        respLeaseClients,
      );
      if (!w.failure && convergedAt !== undefined) await removedStopped(w, cfg, hosts, convergedAt);
    }
    for (const c of seqClients) c.stop();
    for (const c of respLeaseClients) c.stop();
    for (const c of sfClients) c.stop();
    if (respHostile && !w.failure) {
      // Each hostile connection must be answered and closed as documented; the run goes on until it is.
      const h = respHostile;
      await sched.runUntil(
        h.stoppedAtUs + RespHostile.SETTLE_WITHIN_US,
        () => w.failure !== undefined || h.allSettled(),
      );
      if (!w.failure) h.checkSettled();
    }
    if (strangers && !w.failure) {
      // The nodes must close what strangers left open (slow handshakes): the run goes on until they have, or until
      // CLOSE_WITHIN_US past the strangers' stop (only in seeds with strangers).
      const s = strangers;
      await sched.runUntil(
        s.stoppedAtUs + PeerStrangers.CLOSE_WITHIN_US,
        () => w.failure !== undefined || s.allClosed(),
      );
      if (!w.failure) s.checkClosed();
    }
    if (!w.failure) failStop.checkHalted((name) => hosts.some((h) => h.proc?.name === name && h.proc.alive));
    if (!w.failure) {
      // A history the checker could not decide is not a pass: the run fails, and the seed replays the same way.
      const r = checkKvHistories(history, 200_000_000);
      if (r.failure) w.fail('linearizability', r.failure);
      else if (r.unknown) w.fail('linearizability', r.unknown);
    }
    if (!w.failure) {
      const order = seqOracle.checkOrder();
      if (order) w.fail('sequence-order', order);
    }
    failure = w.failure;
  } catch (err) {
    failure = { kind: 'harness', detail: errText(err), atUs: sched.nowUs };
    w.trace(`harness error: ${errText(err)}`);
    if (err instanceof Error && err.stack) w.detail(err.stack);
  } finally {
    Error.stackTraceLimit = stackTraceLimit;
    switchBugsOff();
    process.off('unhandledRejection', onProcessError);
    timers.undo();
    immediates.onError = undefined;
    immediates.uninstall();
  }
  let maxTerm = 0;
  for (const h of hosts) maxTerm = Math.max(maxTerm, h.node?.status().term ?? 0);
  return {
    seed: o.seed,
    profile: cfg.profile,
    ok: failure === undefined,
    ...(failure ? { failure } : {}),
    ...(w.livenessExempt ? { livenessExempt: true } : {}),
    traceHash: trace.hash(),
    ...(w.hashBeforeEveryClient ? { traceHashBeforeEveryClient: w.hashBeforeEveryClient } : {}),
    traceLines: trace.lines,
    tail: trace.tail(),
    stats: {
      events: sched.events,
      simMs: Math.round(sched.nowUs / 1000),
      messages: net.stats.sent,
      httpRequests: router.stats.requests,
      kvOps: history.registers.length + history.counters.length,
      acknowledgedWrites: history.acknowledgedWrites,
      maxTerm,
      unattributedTimers: timers.unattributed(),
      unsettledEvents: sched.unsettled,
      stepsDuringSnapshotSave: observer.stepsDuringSnapshotSave,
      oracle: oracle.stats,
      ledger: ledger.stats,
      failStop: failStop.stats,
      clients: clientStats,
      seq: seqOracle.stats,
      snowflake: sfDeliveries.stats,
      respLease: respLeaseStats,
      mixedUpReplies: router.stats.mixedUp,
      faults: director.stats,
      ...(peerNet ? { peerNet: peerNet.stats } : {}),
      ...(strangers ? { peerStrangers: strangers.stats } : {}),
      ...(respHostile ? { respHostile: respHostile.stats } : {}),
    },
    config: cfg,
    elapsedMs: performance.now() - started,
    simulatedMs: sched.nowUs / 1000,
  };
}

/**
 * Ends every fault, then gives the cluster `healSeconds` to show it works: one leader, every
 * running node caught up with its commit index, an ID issued after the heal (when there are SDK
 * clients), and a linearizable read of every key and counter.
 */
async function heal(
  w: RunWorld,
  cfg: SimConfig,
  hosts: NodeHost[],
  kvClients: KvClient[],
  leaseClients: LeaseClientHost[],
  director: FaultDirector,
  seqClients: SeqClient[],
  sfClients: SnowflakeClient[],
  oracle: IdOracle,
  seqOracle: SeqCallsOracle,
  respLeaseClients: RespLeaseClient[],
): Promise<number | undefined> {
  const sched = w.sched;
  for (const c of kvClients) c.stop();
  director.heal();
  const healedAt = sched.nowUs;
  // Beyond the failure model (docs/simulator-full.md): when members of the current configuration
  // whose data is corrupt (they fail to start, by design) leave fewer healthy voters than a quorum,
  // the cluster is not expected to serve again; safety was still checked all along.
  const beyondFailureModel = (): boolean => {
    const someone = hosts.find((h) => h.up && h.node && !h.removed);
    const voters = someone?.node?.status().conf.voters ?? [];
    const corrupt = hosts.filter((h) => voters.includes(h.id) && /corrupt/i.test(h.lastError ?? ''));
    if (voters.length === 0 || voters.length - corrupt.length >= Math.floor(voters.length / 2) + 1)
      return false;
    w.trace(
      `liveness not required: voters [${voters.join(',')}] with corrupt data on ${corrupt.map((h) => `n${h.id}`).join(', ')} leave no healthy quorum`,
    );
    w.livenessExempt = true;
    return true;
  };
  const deadline = healedAt + cfg.healSeconds * 1_000_000;
  const stop = () => w.failure !== undefined;
  let why = '';
  const converged = (): boolean => {
    const up = hosts.filter((h) => h.up && h.node && !h.removed);
    const leaders = up.filter((h) => h.node?.isLeader);
    if (leaders.length !== 1) {
      why = `${leaders.length} leaders among running nodes`;
      return false;
    }
    const st = (leaders[0] as NodeHost).node!.status();
    const commit = st.commit;
    // Members only: a node removed while cut off never hears of it (nobody sends to it any more).
    const members = new Set([...st.conf.voters, ...st.conf.learners]);
    const behind = up.filter((h) => members.has(h.id) && h.node!.status().appliedIndex < commit);
    if (behind.length > 0) {
      // The leader's view of each lagging member, for the report (state, match, next).
      const pr = st.progress ?? {};
      const views = behind.map((h) => {
        const p = pr[h.id];
        return p
          ? `n${h.id} ${p.state} match=${p.match} next=${p.next}${p.recentActive ? '' : ' inactive'}`
          : `n${h.id} untracked`;
      });
      why = `n${behind.map((h) => h.id).join(',n')} not caught up with commit ${commit} (leader sees ${views.join('; ')})`;
      return false;
    }
    if (leaseClients.length > 0 && !leaseClients.some((c) => c.lastIssuedUs > healedAt)) {
      why = 'no SDK client issued an ID since healing';
      return false;
    }
    if (seqClients.length > 0 && !seqClients.some((c) => c.lastStrictOkUs > healedAt)) {
      why = 'no strict sequence value was issued since healing';
      return false;
    }
    if (sfClients.length > 0 && !sfClients.some((c) => c.lastOkUs > healedAt)) {
      why = 'no server-side Snowflake ID was served since healing';
      return false;
    }
    return true;
  };
  while (!w.failure && sched.nowUs < deadline && !converged()) {
    await sched.runUntil(Math.min(deadline, sched.nowUs + 100_000), stop);
  }
  if (w.failure) return undefined;
  if (!converged()) {
    if (!beyondFailureModel())
      w.fail('liveness', `${cfg.healSeconds} s after healing: ${why}; ${clusterSummary(hosts)}`);
    return undefined;
  }
  // Every member applied everything committed, the removals the faults made included.
  const convergedAt = sched.nowUs;
  const reader = kvClients[0];
  if (reader) {
    let done = false;
    let ok = false;
    while (!w.failure && !ok && sched.nowUs < deadline) {
      done = false;
      sched.after(0, reader.proc, 'final-reads', () => {
        void reader.finalReads().then((r) => {
          ok = r;
          done = true;
        });
      });
      await sched.runUntil(deadline, () => done || stop());
      if (!ok && !w.failure) await sched.runUntil(Math.min(deadline, sched.nowUs + 100_000), stop);
    }
    if (!ok && !w.failure && !beyondFailureModel()) {
      w.fail(
        'liveness',
        `no linearizable read of every key within ${cfg.healSeconds} s of healing; ${clusterSummary(hosts)}`,
      );
    }
    if (!ok) return convergedAt;
  }
  if (w.failure) return convergedAt;
  await everyClientLive(
    w,
    cfg,
    hosts,
    healedAt,
    deadline,
    kvClients,
    leaseClients,
    seqClients,
    sfClients,
    oracle,
    seqOracle,
    beyondFailureModel,
    respLeaseClients,
  );
  return convergedAt;
}

/**
 * Liveness of every client after healing (audit gap 4), within the same `healSeconds` of healing. It runs after the
 * checks above, where runs ended before it, so it changes nothing that happened before (`hashBeforeEveryClient`).
 * - Every key-value client whose process runs completes a linearizable read of every key and counter (the first one
 *   did above; the others now, joining the history the linearizability check reads).
 * - SDK lease clients, grouped by the nodeId they lease as (a host, or two hosts that share one): in each group with a
 *   live process, a live process issues an ID after healing. Exempt by design: (a) the group's other live processes
 *   (one live lease per nodeId per app, and one cache lock per host: a replacement waits while its predecessor runs
 *   and holds the lease); (b) groups beyond the pool's size — with 2^poolBits worker IDs and more groups than that,
 *   at least min(groups, 2^poolBits) distinct groups must issue (the rest may be refused with pool_exhausted while the
 *   holders renew).
 * - Every sequence client whose process runs completes a call (any kind: INCRBY, Leaf, SEQ.ALLOC, FloeSequence).
 * - Every server-side Snowflake client is answered with IDs.
 */
async function everyClientLive(
  w: RunWorld,
  cfg: SimConfig,
  hosts: NodeHost[],
  healedAt: number,
  deadline: number,
  kvClients: KvClient[],
  leaseClients: LeaseClientHost[],
  seqClients: SeqClient[],
  sfClients: SnowflakeClient[],
  oracle: IdOracle,
  seqOracle: SeqCallsOracle,
  beyondFailureModel: () => boolean,
  respLeaseClients: RespLeaseClient[],
): Promise<void> {
  const sched = w.sched;
  w.hashBeforeEveryClient = w.traceLog.hash();
  const kvOk = new Set<KvClient>(kvClients.slice(0, 1));
  for (const c of kvClients.slice(1)) {
    if (!c.proc.alive) continue;
    sched.after(0, c.proc, 'final-reads', () => {
      void (async () => {
        while (!w.failure && c.proc.alive && sched.nowUs < deadline) {
          if (await c.finalReads()) {
            kvOk.add(c);
            return;
          }
          await c.proc.sleep(100);
        }
      })();
    });
  }
  const poolSize = 2 ** cfg.lease.poolBits;
  const lagging = (): string | undefined => {
    for (const c of kvClients)
      if (c.proc.alive && !kvOk.has(c)) return `${c.name} has not read every key since healing`;
    const groups = new Map<string, { live: number; issued: boolean }>();
    for (const h of leaseClients) {
      const live = h.live;
      if (live.length === 0) continue;
      const g = groups.get(h.serviceId) ?? { live: 0, issued: false };
      g.live += live.length;
      if (!g.issued) g.issued = live.some((p) => oracle.lastIssuedBy(p.name) > healedAt);
      groups.set(h.serviceId, g);
    }
    // RESP lease clients hold worker IDs of the same pool: each is a nodeId of its own.
    for (const c of respLeaseClients) {
      if (!c.proc.alive) continue;
      groups.set(`resp:${c.name}`, { live: 1, issued: oracle.lastIssuedBy(c.proc.name) > healedAt });
    }
    const issued = [...groups.values()].filter((g) => g.issued).length;
    const need = Math.min(groups.size, poolSize);
    if (issued < need) {
      const idle = [...groups].filter(([, g]) => !g.issued).map(([id]) => id);
      return `${issued} of ${groups.size} ${respLeaseClients.length > 0 ? 'SDK and RESP' : 'SDK'} nodeIds with a live process issued an ID since healing (${need} needed, pool of ${poolSize}; idle: ${idle.join(', ')})`;
    }
    for (const c of seqClients)
      if (c.proc.alive && !((seqOracle.lastOkUs.get(c.name) ?? -1) > healedAt))
        return `sequence client ${c.name} (${c.kind}) completed no call since healing`;
    for (const c of sfClients)
      if (c.proc.alive && !(c.lastOkUs > healedAt))
        return `snowflake client ${c.name} got no IDs since healing`;
    return undefined;
  };
  const stop = () => w.failure !== undefined;
  while (!w.failure && sched.nowUs < deadline && lagging() !== undefined)
    await sched.runUntil(Math.min(deadline, sched.nowUs + 100_000), stop);
  const why = w.failure ? undefined : lagging();
  if (why !== undefined && !beyondFailureModel())
    w.fail(
      'liveness',
      `${cfg.healSeconds} s after healing, not every client was served: ${why}; ${clusterSummary(hosts)}`,
    );
}

/** A removed member stops within this, plus two election timeouts, of the cluster's convergence after healing. */
export const REMOVED_STOP_SLACK_MS = 5_000;

/**
 * FS-23 (`removed-lingers`): every removed member still running after healing — left on by the membership fault, or
 * started again by mistake — stops by itself, told by a member that applied its removal (a verdict in the peer
 * handshake) if it did not apply it itself. Bound: from the cluster's convergence (every member applied the removal,
 * every link healed), two election timeouts (it notices it has no leader and dials a member: a pre-vote or vote) and
 * `REMOVED_STOP_SLACK_MS` (the transport's backoff after a refusal is at most 2 s; the handshake), +10% for clock rates.
 * The run goes on past the heal until they have stopped; runs with none end where they did.
 */
async function removedStopped(w: RunWorld, cfg: SimConfig, hosts: NodeHost[], from: number): Promise<void> {
  // Outside the verdict's reach: a removed member whose own configuration names no running member (every peer it knows
  // was removed since, and nobody dials a removed id) cannot be told. Traced, not failed (nodes seed 63: n4, switched
  // off and started again after n2 and n3, the only peers it knew, had left).
  const knowsMember = (h: NodeHost): boolean => {
    const conf = h.node?.status().conf;
    const peers = conf ? [...conf.voters, ...conf.learners].filter((id) => id !== h.id) : [];
    return peers.some((id) => hosts.some((x) => x.id === id && !x.removed && x.up));
  };
  const removedRunning = () => hosts.filter((h) => h.removed && (h.state === 'up' || h.state === 'booting'));
  const running = () => removedRunning().filter((h) => h.state === 'booting' || knowsMember(h));
  if (removedRunning().length === 0) return;
  const traceUnreachable = () => {
    for (const h of removedRunning())
      if (h.state === 'up' && !knowsMember(h))
        w.trace(
          `n${h.id} removed and running, but its configuration names no running member: it cannot be told`,
        );
  };
  if (running().length === 0) {
    traceUnreachable();
    return;
  }
  const electionMs = cfg.node.tickMs * cfg.node.electionTicks;
  const deadline = from + Math.ceil((2 * electionMs + REMOVED_STOP_SLACK_MS) * 1.1) * 1000;
  await w.sched.runUntil(deadline, () => w.failure !== undefined || running().length === 0);
  const left = running();
  if (!w.failure) traceUnreachable();
  if (w.failure || left.length === 0) return;
  w.fail(
    'removed-lingers',
    `${left.map((h) => `n${h.id}`).join(', ')} removed but still running ${((w.sched.nowUs - from) / 1e6).toFixed(1)} s after the cluster converged past healing; ${clusterSummary(hosts)}`,
  );
}

function clusterSummary(hosts: NodeHost[]): string {
  return hosts
    .map((h) => {
      if (!h.node || !h.up) return `n${h.id}:${h.state}${h.lastError ? `(${h.lastError.slice(0, 80)})` : ''}`;
      const s = h.node.status();
      return `n${h.id}:${s.role} t${s.term} lead=${s.lead} commit=${s.commit} applied=${s.appliedIndex}`;
    })
    .join(' ');
}
