// One Floe node of the simulated cluster: a machine (clocks and a disk that outlive processes)
// and the node process running on it, built the way src/node/start.ts builds a real one:
// DurableStorage on the machine's disk (the MemoryFs twin of the file-system seam), FloeNode,
// FloeStateMachine, LeaseService and the HTTP API, all on the process's virtual clocks and timers.

import type { FastifyInstance } from 'fastify';
import { FloeClient } from '../../client/floe-client.js';
import type { FetchLike } from '../../client/http-transport.js';
import type { WorkerLease } from '../../client/worker-lease.js';
import { leaseNodeOf } from '../../lease/floe-node-adapter.js';
import { LeaseService } from '../../lease/lease-service.js';
import type { MemberInfo } from '../../node/members.js';
import { MemoryNodeStorage } from '../../node/memory-seams.js';
import { FloeNode, type NodeLogger } from '../../node/node.js';
import type { NodeStorage, NodeTransport, TransportSink } from '../../node/seams.js';
import type { ConfState, Message, NodeId, Storage } from '../../raft/types.js';
import { httpRemoteAlloc, SequenceService, sequenceNodeOf } from '../../sequences/index.js';
import { askMembersForClusterUid, ClusterIdentityKeeper } from '../../server/cluster-identity.js';
import type { FloeServices } from '../../server/floe-services.js';
import { SnowflakeService, memberFetch as signedMemberFetch } from '../../snowflakes/index.js';
import { FloeStateMachine } from '../../state/floe-state-machine.js';
import type { LeaseEvent } from '../../state/leases/types.js';
import { DurableStorage } from '../../storage/durable-storage.js';
import { MemoryFs } from '../../storage/memory-fs.js';
import type { Prng } from '../prng.js';
import { memoryCacheFs, simCacheHost } from './cache-disk.js';
import { buildSimHttpApp } from './http-app.js';
import type { VirtualNetwork } from './network.js';
import { Machine, MachineClock, SimProcess } from './process.js';
import { REMOTE_ALLOC_DEFAULT_TIMEOUT_MS, sdkDefaultRequestTimeoutMs } from './production-defaults.js';
import type { RaftObserver } from './raft-observer.js';
import type { ReadContextOracle } from './read-context-oracle.js';
import { uuidOf } from './uuid.js';
import type { World } from './world.js';

export interface NodeSettings {
  tickMs: number;
  electionTicks: number;
  heartbeatTicks: number;
  snapshotEvery: number;
  /** DurableStorage trailingEntries. */
  trailingEntries: number;
  proposalTimeoutMs: number;
  /** 'durable': DurableStorage on MemoryFs (the production storage); 'memory': MemoryNodeStorage. */
  storage: 'durable' | 'memory';
  /** Disk latency of an fdatasync / directory fsync, µs [min, max]. */
  syncUs: [number, number];
  /** Lease TTL default of the service. */
  leaseTtlMs: number;
  /** Serve sequences (SequenceService and its routes): only in seeds with sequence clients, to save their cost. */
  sequences?: boolean;
  /**
   * Serve server-side Snowflake (SnowflakeService, its HTTP routes and RESP commands): only in seeds with snowflake
   * clients. `cache`: the node keeps its leases under `<dataDir>/snowflake-leases` on its disk, as production does.
   */
  snowflakes?: { cache: boolean };
  /**
   * Built as src/node/start.ts builds a node (production-defaults seeds): what it leaves to the defaults is left to
   * them (WAL segment size, heartbeat ticks, proposal timeout, the LeaseService's TTL, the node's own SDK client's
   * request timeout, the remote allocation timeout); the values above are `floe serve`'s DEFAULTS.
   */
  production?: boolean;
  /**
   * The node's own Snowflake client gets the machine's CLOCK_MONOTONIC of the current boot declared
   * `monotonicIsSystemWide` (the built-in clock production uses), and a power loss reboots the machine (a new boot ID,
   * the monotonic clock from 0 again). Absent: the machine's clock undeclared, and the boot ID survives a power loss.
   */
  machineMonotonic?: boolean;
  /** `floe serve --leader-lease`: the core's leader lease, and strict sequence values served from it. */
  leaderLease?: boolean;
  /** Members that run without `--leader-lease` although `leaderLease` is set (a rolling enable). */
  leaderLeaseOff?: readonly number[];
}

export type NodeState = 'down' | 'booting' | 'up' | 'halted' | 'failed';

export interface DiskFaults {
  /** Probability that an fdatasync/fsync fails with EIO. */
  syncEio: number;
  /** Extra latency factor (a slow disk): sync latency × this. */
  slow: number;
}

/** A `writeBitFlip` fault in force on a node's disk (faults.ts). */
export interface WriteFlipWindow {
  /** Probability that a write to a WAL segment or snapshot file gets one bit flipped. */
  chance: number;
  /** False while a flip would be outside the failure model (e.g. a membership change in flight): none is made. */
  allowed(): boolean;
  /** Counts each flip made, and each refused start it explains. */
  stats: { writeFlips: number; writeFlipRefusals: number };
}

/** A bit flipped in a write that no start of the node has read yet (node-host.ts, `writeBitFlip`). */
export interface PendingWriteFlip {
  /** The file's final name (a `.tmp` written and then renamed is named by what it becomes). */
  file: string;
  /** Byte offset of the flipped bit in the file. */
  offset: number;
  bit: number;
  /** The node incarnation that wrote it: only a later start reads it. */
  incarnation: number;
}

export class NodeHost {
  readonly machine: Machine;
  disk: MemoryFs;
  state: NodeState = 'down';
  proc: SimProcess | undefined;
  node: FloeNode<unknown> | undefined;
  sm: FloeStateMachine | undefined;
  leases: LeaseService | undefined;
  sequences: SequenceService | undefined;
  snowflakes: SnowflakeService | undefined;
  app: FastifyInstance | undefined;
  /** What the node's HTTP app and RESP server are built over, as src/node/start.ts shares one object between them. */
  services: FloeServices | undefined;
  /** Why the last boot or run ended badly (halt reason, open error). */
  lastError: string | undefined;
  /** Disk faults were injected into this node (EIO, bit flips): a halt or refusal to start is expected. */
  diskFaulted = false;
  /** A bit was flipped at rest in its files: it may never start again. */
  corrupted = false;
  /**
   * An fsync failed with EIO since the last boot: the halt or refused start it causes is expected. Tied to the boot,
   * not kept forever, so a later halt or a refused start for any other reason still fails the run.
   */
  eioThisBoot = false;
  /** Removed from the cluster (replaced by a new member): it stops and never starts again. */
  removed = false;
  readonly diskFaults: DiskFaults = { syncEio: 0, slow: 1 };
  /**
   * Told when an fdatasync of a WAL segment starts (`nodePowerLossMidWrite`), with how long it takes (µs): the write
   * it covers is in the page cache only until then.
   */
  onWalSync: ((us: number) => void) | undefined;
  /** Called when this node's process becomes leader (the `nodeRestartLoop` fault watches it; else unset). */
  onLeads: ((h: NodeHost) => void) | undefined;
  /** While set, writes to the node's WAL and snapshot files may get a bit flipped (`writeBitFlip`). */
  writeFlip: WriteFlipWindow | undefined;
  /**
   * Bits flipped in writes that no start has read yet. A start that succeeds has read (or has no use for) every flip
   * made before it began, so it drops them; a flip made while it opened (the last segment written again) stays.
   */
  pendingWriteFlips: PendingWriteFlip[] = [];
  private flipStats: WriteFlipWindow['stats'] | undefined;
  /** The storage twin in memory mode (crashed with the process: it keeps only what was synced across a power loss). */
  private memoryStorage: MemoryNodeStorage | undefined;
  private incarnation = 0;
  private readonly dir: string;

  constructor(
    private readonly world: World,
    readonly id: NodeId,
    readonly member: MemberInfo,
    /** The members this node is configured with (all of them, itself included). */
    private readonly members: MemberInfo[],
    /** True for a member of the brand-new cluster; false for one that joins it later. */
    private readonly bootstrap: boolean,
    private readonly settings: NodeSettings,
    private readonly net: VirtualNetwork,
    private readonly observer: RaftObserver,
    private readonly hooks: {
      leaseEvent(nodeId: NodeId, e: LeaseEvent): void;
      stopped(host: NodeHost, reason: string): void;
      /** Checks that every ReadIndex answer can be matched to its request (issue 9 item 1b). */
      readContexts?: ReadContextOracle;
      /** HTTP from this node's process to other members (a follower's segment allocation through the leader). */
      memberFetch(proc: SimProcess, name: string, timeoutMs: number): FetchLike;
      /** The production PeerTransport over simulated TCP (peer-net.ts), in seeds that run it; else network.ts. */
      peerTransport?(proc: SimProcess, sink: TransportSink): Promise<NodeTransport>;
      /** The node's SnowflakeService got a lease (asked for at global µs `askedAtUs`). */
      snowflakeLeased?(proc: SimProcess, lease: WorkerLease, askedAtUs: number): void;
      /** Node `host`'s SnowflakeService issued `ids` of `key` under `lease` (undefined: no lease known, a harness bug). */
      snowflakeIssued?(
        host: NodeHost,
        proc: SimProcess,
        key: string,
        lease: WorkerLease | undefined,
        ids: bigint[],
      ): void;
    },
    clockRate: number,
    wallEpochMs: number,
  ) {
    const rng = world.rng(`machine-${id}`);
    this.machine = new Machine(
      `n${id}`,
      new MachineClock(world.sched, clockRate, rng.range(1_000, 1_000_000), wallEpochMs),
    );
    this.dir = `/var/lib/floe/n${id}`;
    this.disk = new MemoryFs();
    this.installDiskHooks();
  }

  get httpAddr(): string {
    return this.member.httpAddr as string;
  }

  /** Runs with `--leader-lease` (a member listed in `leaderLeaseOff` runs without it: a rolling enable). */
  get leaderLease(): boolean {
    const s = this.settings;
    return s.leaderLease === true && !(s.leaderLeaseOff ?? []).includes(this.id);
  }

  get up(): boolean {
    return this.state === 'up';
  }

  /**
   * Starts a new process on this machine (from its disk). A removed machine is never started again, except by the
   * membership fault's operator mistake (`removed`: FS-23, it must learn its removal and stop by itself).
   */
  boot(opts?: { removed?: boolean }): void {
    if (this.state === 'booting' || this.state === 'up' || (this.removed && !opts?.removed)) return;
    const w = this.world;
    this.incarnation++;
    this.eioThisBoot = false;
    const proc = new SimProcess(w.sched, this.machine, `n${this.id}#${this.incarnation}`, w.nextPid());
    w.register(proc);
    this.proc = proc;
    this.state = 'booting';
    this.lastError = undefined;
    w.trace(`${proc.name} boot`);
    w.sched.after(0, proc, 'boot', () => {
      this.start(proc).catch((err: unknown) => {
        if (!proc.alive) return;
        this.lastError = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        w.trace(`${proc.name} failed to start: ${this.lastError}`);
        this.state = 'failed';
        proc.kill();
        this.hooks.stopped(this, `start failed: ${this.lastError}`);
      });
    });
  }

  private async start(proc: SimProcess): Promise<void> {
    const w = this.world;
    const s = this.settings;
    const bootstrapConf: ConfState | undefined = this.bootstrap
      ? { voters: this.members.map((m) => m.id), learners: [] }
      : undefined;
    let inner: NodeStorage & { storage: Storage };
    if (s.storage === 'durable') {
      inner = await DurableStorage.open(this.dir, {
        fs: this.disk,
        bootstrapConf,
        trailingEntries: s.trailingEntries,
        ...(s.production ? {} : { segmentBytes: 64 * 1024 }),
        lockOwner: { pid: proc.pid, isAlive: (pid) => w.isPidAlive(pid) },
        onWarning: (m) => w.trace(`${proc.name} storage warning: ${m}`),
      });
    } else {
      this.memoryStorage ??= new MemoryNodeStorage(bootstrapConf, { trailingEntries: s.trailingEntries });
      inner = this.memoryStorage;
    }
    if (!proc.alive) return;
    const rng = w.rng(`node-${this.id}-${this.incarnation}`);
    let node: FloeNode<unknown> | undefined;
    this.observer.started(this.id, inner.storage, () => node?.status().conf.voters ?? []);
    const storage = this.observer.wrap(this.id, inner);
    const sm = new FloeStateMachine();
    const incarnation = this.incarnation;
    const readContexts = this.hooks.readContexts;
    const sink: TransportSink = {
      onMessage: (m: Message) =>
        this.guard(proc, 'onMessage', () => {
          if (m.type === 'readIndexResp' && readContexts)
            readContexts.answered(this.id, incarnation, m.context, m.index);
          node?.onMessage(m);
        }),
      onUnreachable: (p: NodeId) => this.guard(proc, 'onUnreachable', () => node?.onUnreachable(p)),
      onSnapshotStatus: (p: NodeId, ok: boolean) =>
        this.guard(proc, 'onSnapshotStatus', () => node?.onSnapshotStatus(p, ok)),
      // FS-23: the removal verdict, both ways (as src/node/start.ts wires it).
      onRemoved: (from: NodeId, removedAt: number) =>
        this.guard(proc, 'onRemoved', () => node?.onRemoved(from, removedAt)),
      removedAt: (id: NodeId) => node?.removedAt(id),
    };
    const wire = this.hooks.peerTransport
      ? await this.hooks.peerTransport(proc, sink)
      : this.net.attach(this.id, proc, sink);
    // What the node sends, as the wire takes it: its ReadIndex requests go to the read-context oracle.
    const transport: NodeTransport = readContexts
      ? {
          send: (ms) => {
            for (const m of ms)
              if (m.type === 'readIndex') readContexts.asked(this.id, incarnation, m.context);
            wire.send(ms);
          },
          addPeer: (id, addr) => wire.addPeer(id, addr),
          removePeer: (id) => wire.removePeer(id),
          close: () => wire.close(),
        }
      : wire;
    if (!proc.alive) return;
    const logger: NodeLogger = {
      info: () => {},
      warn: (obj, msg) => this.log(proc, 'warn', obj, msg),
      error: (obj, msg) => this.log(proc, 'error', obj, msg),
    };
    node = new FloeNode<unknown>({
      id: this.id,
      storage,
      transport,
      stateMachine: sm,
      initialMembers: this.members,
      self: { httpAddr: this.member.httpAddr, respAddr: this.member.respAddr },
      tickMs: s.tickMs,
      electionTicks: s.electionTicks,
      snapshotEvery: s.snapshotEvery,
      ...(s.production ? {} : { heartbeatTicks: s.heartbeatTicks, proposalTimeoutMs: s.proposalTimeoutMs }),
      random: rng.asRandomInt(),
      ...(this.leaderLease ? { leaderLease: true } : {}),
      // From a stream of its own (the node's randomness keeps its draws): the ReadIndex contexts' incarnation.
      incarnation: incarnationBytes(w.rng(`node-incarnation-${this.id}-${this.incarnation}`), 8),
      clock: { monotonicMs: () => proc.monoMs(), wallMs: () => proc.wallMs() },
      // Every timer of the node runs on this process: paused with it, gone when it dies. An immediate
      // runs within the current event (as a real one runs before the next I/O), unless the process
      // has meanwhile died (dropped) or stopped (then it waits as an event of the process).
      // An exception out of a timer callback would kill the real process: it is a process-crash failure here.
      timers: {
        setTimeout: (fn, ms) => proc.setTimeout(() => this.guard(proc, 'a node timer', fn), ms, 'node-timer'),
        clearTimeout: (h) => proc.clearTimer(h),
        setInterval: (fn, ms) =>
          proc.setInterval(() => this.guard(proc, 'the tick timer', fn), ms, 'node-tick'),
        clearInterval: (h) => proc.clearTimer(h),
        setImmediate: (fn) =>
          setImmediate(() => {
            if (!proc.alive) return;
            if (proc.paused || proc.machine.clock.suspended) w.sched.after(0, proc, 'node-immediate', fn);
            else fn();
          }),
      },
      logger,
    });
    const n = node;
    n.on('role', (role) => {
      this.observer.role(this.id, role === 'leader', n.status().term);
      if (role === 'leader') this.onLeads?.(this);
    });
    n.on('applied', (index) => this.observer.applied(this.id, index));
    n.on('stopped', (reason) => {
      if (!proc.alive) return;
      w.trace(`${proc.name} stopped: ${reason}`);
      this.state = 'halted';
      this.lastError = reason;
      this.hooks.stopped(this, reason);
    });
    sm.leases.subscribe((e) => this.hooks.leaseEvent(this.id, e));
    // The cluster's UUID, minted by the first leader from the seed; every replica must learn the same one, once.
    sm.cluster.onKnown((uid) => {
      w.clusterUid ??= uid;
      if (uid !== w.clusterUid)
        w.fail('cluster-identity', `n${this.id} holds cluster ${uid}, another replica holds ${w.clusterUid}`);
    });
    const uidRng = w.rng(`cluster-uid-${this.id}-${this.incarnation}`);
    new ClusterIdentityKeeper({
      node: leaseNodeOf(n),
      state: sm.cluster,
      mint: () => uuidOf(uidRng),
      askMembers: () =>
        askMembersForClusterUid(
          n,
          'http',
          this.hooks.memberFetch(proc, `n${this.id}`, 1000),
          SIM_CLUSTER_SECRET,
        ),
      timers: {
        setTimeout: (fn, ms) =>
          proc.setTimeout(() => this.guard(proc, 'the cluster identity timer', fn), ms, 'cluster-uid'),
        clearTimeout: (h) => proc.clearTimer(h),
      },
      onError: (what, err) => w.trace(`${proc.name} ${what}: ${String(err)}`),
    });
    const leases = new LeaseService({
      node: leaseNodeOf(n),
      state: sm.leases,
      clock: { monotonicMs: () => proc.monoMs(), wallMs: () => proc.wallMs() },
      timers: {
        setTimeout: (fn, ms) => proc.setTimeout(fn, ms, 'lease-service'),
        clearTimeout: (h) => proc.clearTimer(h),
      },
      ...(s.production ? {} : { defaultTtlMs: s.leaseTtlMs }),
      newRequestId: () => `rq-${this.id}-${rng.nextU32().toString(16)}`,
      onError: (what, err) => w.trace(`${proc.name} lease service: ${what}: ${String(err)}`),
    });
    // Sequences as src/node/start.ts serves them: strict keys on the leader, node-mode keys from each node's own
    // segments (a follower allocates them through the leader's internal route, with the cluster secret).
    const memberFetch = this.hooks.memberFetch(proc, `n${this.id}`, 1000);
    // The simulated fetch times out after what the caller's own timeout would be (it cannot see the AbortSignal).
    const allocFetch = s.production
      ? this.hooks.memberFetch(proc, `n${this.id}`, REMOTE_ALLOC_DEFAULT_TIMEOUT_MS)
      : memberFetch;
    const sequences = !s.sequences
      ? undefined
      : new SequenceService({
          node: sequenceNodeOf(n, { leaderLease: this.leaderLease }),
          state: sm.sequences,
          owner: `node-${this.id}`,
          monotonic: () => proc.monoMs(),
          incarnation: Buffer.from(
            incarnationBytes(w.rng(`seq-incarnation-${this.id}-${this.incarnation}`), 6),
          ).toString('hex'),
          remoteAlloc: httpRemoteAlloc({
            secret: SIM_CLUSTER_SECRET,
            leaderHttpAddr: () => n.leaderHint()?.httpAddr,
            ...(s.production ? {} : { timeoutMs: 1000 }),
            fetch: async (url, init) => {
              const r = await allocFetch(url, init);
              const text = await r.text();
              return { status: r.status, headers: r.headers, json: async () => JSON.parse(text) as unknown };
            },
            clusterUid: () => sm.cluster.uid,
          }),
        });
    const snowflakes = s.snowflakes
      ? this.snowflakeService(
          proc,
          n,
          sm,
          leases,
          s.production ? this.hooks.memberFetch(proc, `n${this.id}`, sdkTimeoutMs()) : memberFetch,
        )
      : undefined;
    const services: FloeServices = {
      node: n,
      leases,
      auth: sm.auth,
      ...(sequences ? { sequences } : {}),
      ...(snowflakes ? { snowflakes } : {}),
      memberSecret: SIM_CLUSTER_SECRET,
      clusterUid: () => sm.cluster.uid,
    };
    const app = await buildSimHttpApp(n, sm.kv, services, SIM_CLUSTER_SECRET);
    if (!proc.alive) return;
    this.node = n;
    this.sm = sm;
    this.leases = leases;
    this.sequences = sequences;
    this.snowflakes = snowflakes;
    this.app = app;
    this.services = services;
    n.start();
    this.state = 'up';
    // It started: a bit flipped before now was in nothing it reads at start, and excuses no later refusal.
    this.corrupted = false;
    // So were the bits flipped in writes of earlier incarnations (the running node never reads its files back).
    const inc = this.incarnation;
    this.pendingWriteFlips = this.pendingWriteFlips.filter((f) => f.incarnation >= inc);
    w.trace(`${proc.name} up (term ${n.status().term}, applied ${n.status().appliedIndex})`);
  }

  /**
   * Server-side Snowflake as src/node/start.ts wires it: the keys of the state machine, creates proposed through this
   * node, pools sized and pins read through its LeaseService and lease state, and a FloeClient of the node itself (its
   * own HTTP API, followed to the leader, signed as a member) on the process's clocks, timers and randomness, with
   * holder `floe-node-N` and, in some seeds, its lease cache under the data directory on the machine's disk.
   * The harness watches what it does from outside: each lease the client returns, and each batch `next` returns.
   */
  private snowflakeService(
    proc: SimProcess,
    n: FloeNode<unknown>,
    sm: FloeStateMachine,
    leases: LeaseService,
    fetch: FetchLike,
  ): SnowflakeService {
    const w = this.world;
    const rng = w.rng(`sf-${proc.name}`);
    const rids = w.rng(`sf-rid-${proc.name}`);
    const client = new FloeClient({
      endpoints: [`http://${this.httpAddr}`],
      ...(this.settings.production ? {} : { requestTimeoutMs: 1000 }),
      fetch: signedMemberFetch(SIM_CLUSTER_SECRET, this.id, fetch),
      // Its own cluster only, as src/node/start.ts pins it.
      clusterUid: () => sm.cluster.uid,
      clock: {
        now: () => Math.floor(proc.wallMs()),
        waitUntil: (ms: number) => proc.busyWaitUntilWall(ms),
      },
      ...(this.settings.machineMonotonic
        ? { monotonic: () => proc.bootMonoMs(), monotonicIsSystemWide: true }
        : { monotonic: () => proc.monoMs() }),
      bootId: this.machine.bootId,
      cacheFs: memoryCacheFs(() => this.disk),
      cacheHost: simCacheHost(w, proc, w.rng(`sf-cache-${proc.name}`)),
      setTimer: (fn, ms) => {
        const t = proc.setTimeout(fn, ms, 'sdk-timer');
        return { cancel: () => proc.clearTimer(t) };
      },
      sleep: (ms) => proc.sleep(ms),
      random: () => rng.float(),
      incarnation: proc.name,
      // SnowflakeService names no requestId, and the SDK would draw a real randomUUID(): one from the seed instead,
      // so a seed writes the same log bytes every time it runs.
      newRequestId: () => `${proc.name}-sf-${rids.nextU32().toString(16)}`,
    });
    const byKey = new Map<string, WorkerLease>();
    const leaseWorker = client.leaseWorker.bind(client);
    client.leaseWorker = async (o) => {
      const askedAtUs = proc.effectiveUs;
      const lease = await leaseWorker(o);
      byKey.set(o.app, lease);
      this.hooks.snowflakeLeased?.(proc, lease, askedAtUs);
      return lease;
    };
    const sf = new SnowflakeService({
      state: sm.snowflakes,
      propose: (cmd) => n.propose(cmd),
      configurePool: async (app, bits, dcBits) => {
        const r = await leases.configurePool(app, bits, dcBits);
        return r.ok ? { ok: true } : { ok: false, message: r.message };
      },
      client,
      holder: `floe-node-${this.id}`,
      pinnedLayout: (app) => sm.leases.pool(app)?.layout || undefined,
      linearizableRead: () => n.linearizableRead(),
      ...(this.settings.snowflakes?.cache
        ? {
            cacheDir: `${this.dir}/snowflake-leases`,
            // As `mkdir -p`, on whatever disk the machine has now (a new view after a power loss).
            mkdirCacheDir: async (dir: string) => {
              let at = '';
              for (const part of dir.split('/').filter((x) => x !== '')) {
                at += `/${part}`;
                if (!this.disk.existsNow(at)) await this.disk.mkdir(at);
              }
            },
          }
        : {}),
    });
    const next = sf.next.bind(sf);
    sf.next = async (key, count) => {
      const ids = await next(key, count);
      this.hooks.snowflakeIssued?.(this, proc, key, byKey.get(key), ids);
      return ids;
    };
    return sf;
  }

  /**
   * A log line of the node, traced. A stack in it is traced by its first line only (the error's name and message):
   * the frames depend on the build, and runs capture them only with --verbose, which prints them as `detail`.
   */
  private log(proc: SimProcess, level: 'warn' | 'error', obj: object, msg: string | undefined): void {
    const stack = (obj as { stack?: unknown }).stack;
    const shown = typeof stack === 'string' ? { ...obj, stack: stack.split('\n', 1)[0] } : obj;
    this.world.trace(`${proc.name} ${level}: ${msg ?? ''} ${brief(shown)}`);
    if (typeof stack === 'string' && stack.includes('\n')) this.world.detail?.(stack);
  }

  /** Runs a callback into production code; an exception there would kill the real process. */
  private guard(proc: SimProcess, what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.world.fail('process-crash', `${proc.name} threw from ${what}: ${errText(err)}`);
    }
  }

  /**
   * The process dies. 'process': the kernel keeps what it accepted (page cache survives);
   * 'power': the machine loses power (unsynced writes lost or torn, per `random`).
   */
  crash(kind: 'process' | 'power', random?: (n: number) => number): void {
    const p = this.proc;
    if (p?.alive) {
      p.lostPower = kind === 'power';
      p.kill();
    }
    this.world.trace(`n${this.id} crash (${kind})`);
    if (kind === 'power' && this.settings.machineMonotonic) this.machine.reboot();
    if (this.settings.storage === 'durable') {
      // No zero-filled tails: the failure model assumes a file system that orders data before size
      // updates (ext4 data=ordered, XFS); see docs/storage.md, "Failure model".
      this.disk = this.disk.crash(kind === 'power' ? { kind, random } : { kind });
    } else {
      // The twin keeps only what was synced across a power loss, like the disk under DurableStorage.
      this.memoryStorage = this.memoryStorage?.crash(kind);
    }
    this.state = 'down';
    this.node = undefined;
    this.leases = undefined;
    this.sequences = undefined;
    this.snowflakes = undefined;
    this.app = undefined;
    this.services = undefined;
    this.sm = undefined;
  }

  /** A bit flips at rest in one of the node's WAL or snapshot files (the node should be down). */
  async flipRandomBit(random: (n: number) => number): Promise<string | undefined> {
    const files: Array<{ path: string; size: number }> = [];
    for (const sub of ['wal', 'snap']) {
      const dir = `${this.dir}/${sub}`;
      const names = await this.disk.readdir(dir).catch(() => [] as string[]);
      for (const name of names.sort()) {
        const c = this.disk.durableContent(`${dir}/${name}`);
        if (c && c.length > 0) files.push({ path: `${dir}/${name}`, size: c.length });
      }
    }
    if (files.length === 0) return undefined;
    const f = files[random(files.length)] as { path: string; size: number };
    const off = random(f.size);
    const bit = random(8);
    this.disk.flipBit(f.path, off, bit);
    this.diskFaulted = true;
    this.corrupted = true;
    return `${f.path}@${off}.${bit}`;
  }

  /**
   * Whether a refusal to start is explained by a bit flipped in a write that this start was the first to read: the
   * reason must name a corruption of the very file that holds an unread flip, and, for the WAL, a frame at or before
   * the flipped byte (the frame holding it). Nothing else is excused: not another file, not a halt of a running node
   * (it never reads back what it wrote), not a flip the node wrote in this same incarnation.
   */
  explainsByWriteFlip(reason: string): boolean {
    if (this.state !== 'failed' || !/Corruption/.test(reason)) return false;
    const wal = /WAL corrupt: (\S+) at byte offset (\d+):/.exec(reason);
    const snap = /snapshot corrupt: (\S+?):/.exec(reason);
    const named = wal?.[1] ?? snap?.[1];
    if (named === undefined) return false;
    const base = (f: string) => f.slice(f.lastIndexOf('/') + 1);
    const hit = this.pendingWriteFlips.some(
      (f) =>
        f.incarnation < this.incarnation &&
        base(f.file) === base(named) &&
        (wal === null || Number(wal[2]) <= f.offset),
    );
    if (hit && this.flipStats) this.flipStats.writeFlipRefusals++;
    return hit;
  }

  private installDiskHooks(): void {
    const w = this.world;
    const rng = w.rng(`disk-${this.id}`);
    // Its own stream: seeds without write flips draw nothing from it, and the flips do not move the disk latencies.
    const flipRng = w.rng(`disk-write-flip-${this.id}`);
    const walDir = `${this.dir}/wal/`;
    const snapDir = `${this.dir}/snap/`;
    this.disk.faults = {
      onWrite: (file, position, data) => {
        const win = this.writeFlip;
        if (win === undefined || data.length === 0) return undefined;
        if (!file.startsWith(walDir) && !file.startsWith(snapDir)) return undefined;
        if (!win.allowed() || !flipRng.chance(win.chance)) return undefined;
        const at = flipRng.int(data.length);
        const bit = flipRng.int(8);
        data[at] = (data[at] as number) ^ (1 << bit);
        const final = file.endsWith('.tmp') ? file.slice(0, -'.tmp'.length) : file;
        this.pendingWriteFlips.push({
          file: final,
          offset: position + at,
          bit,
          incarnation: this.incarnation,
        });
        this.flipStats = win.stats;
        win.stats.writeFlips++;
        this.diskFaulted = true;
        w.trace(`n${this.id} disk: bit flipped in a write: ${file}@${position + at}.${bit}`);
        return undefined;
      },
      delay: (op, path) => {
        if (op !== 'datasync' && op !== 'syncDir') return undefined;
        const p = this.proc;
        if (!p?.alive) return new Promise(() => {});
        const [lo, hi] = this.settings.syncUs;
        const us = Math.ceil(rng.range(lo, hi) * this.diskFaults.slow);
        if (this.onWalSync && op === 'datasync' && path.includes('/wal/')) this.onWalSync(us);
        return new Promise<void>((resolve) => {
          w.sched.after(us, p, `disk ${op}`, resolve);
        });
      },
      syncError: (path: string) => {
        if (this.diskFaults.syncEio > 0 && rng.chance(this.diskFaults.syncEio)) {
          this.diskFaulted = true;
          // Only the Raft storage's fsyncs stop the node; the Snowflake lease cache's answer one request with an error.
          if (!path.includes('snowflake-leases')) this.eioThisBoot = true;
          w.trace(`n${this.id} disk: fsync fails with EIO`);
          return 'EIO';
        }
        return undefined;
      },
    };
  }
}

function brief(obj: object): string {
  try {
    const s = JSON.stringify(obj);
    return s.length > 300 ? `${s.slice(0, 300)}…` : s;
  } catch {
    return String(obj);
  }
}

let sdkTimeout: number | undefined;
/** The SDK's default request timeout (read once from the SDK). */
function sdkTimeoutMs(): number {
  sdkTimeout ??= sdkDefaultRequestTimeoutMs();
  return sdkTimeout;
}

/** The simulated cluster's shared secret (members' internal calls prove it). */
const SIM_CLUSTER_SECRET = 'sim-cluster-secret';

export function errText(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

/** `n` bytes from `rng`: a process's incarnation, from the seed instead of the real `randomBytes`. */
function incarnationBytes(rng: Prng, n: number): Uint8Array {
  return Uint8Array.from({ length: n }, () => rng.int(256));
}
