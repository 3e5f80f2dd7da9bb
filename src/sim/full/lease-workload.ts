// SDK clients: service instances that lease worker IDs with the production FloeClient / WorkerLease
// / lease.snowflake() code and issue IDs, on their machine's virtual monotonic and wall clocks, with
// the SDK's fetch, timer, sleep and random seams routed into the simulation.
//
// A client host is one service identity (a machine and a nodeId). Processes come and go on it:
// crash and restart, a replacement started while the old process still runs; two hosts may share
// one nodeId. Every ID a process issues goes to the oracle at once, with the process's global time.

import { FloeClient } from '../../client/floe-client.js';
import type { LeaseSnowflakeOptions, WorkerLease } from '../../client/worker-lease.js';
import type { Layout, Snowflake } from '../../id/index.js';
import { MemoryFs } from '../../storage/memory-fs.js';
import type { Prng } from '../prng.js';
import { memoryCacheFs, simCacheHost } from './cache-disk.js';
import type { HttpRouter } from './http-router.js';
import type { IdOracle } from './id-oracle.js';
import { errText } from './node-host.js';
import { type Machine, SimProcess } from './process.js';
import type { World } from './world.js';

export interface LeaseClientSettings {
  app: string;
  ttlMs: number;
  layout: Layout;
  requestTimeoutMs: number;
  /** IDs per burst [min, max] and ms between bursts [min, max]. */
  burst: [number, number];
  gapMs: [number, number];
  /** Probability, after a burst, that the process releases its lease and acquires again. */
  releaseChance: number;
  /** Whether the processes keep their lease in a cache file (with its lock) on the machine's disk. */
  cache: boolean;
  /** Each process gives the SDK a monotonic clock of its own (starting near 0, like `performance.now()`). */
  processMonotonic?: boolean;
  /**
   * Unless `processMonotonic`: the SDK gets the machine's CLOCK_MONOTONIC of the current boot (`SimProcess.bootMonoMs`)
   * declared `monotonicIsSystemWide`, as the built-in clock is, so a restarted process on the same boot resumes a cached
   * lease on its cached monotonic deadline (FloeClient.resume's trusted branch). Else the machine's clock undeclared.
   */
  machineMonotonic?: boolean;
  /** The SDK's `acquireTimeoutMs` (undefined: its default). */
  acquireTimeoutMs?: number;
  /**
   * The processes name no tuning (production-defaults seeds): no `requestTimeoutMs`, `ttlMs` or `layout`, so the SDK's
   * defaults apply; `requestTimeoutMs`, `ttlMs` and `layout` above are what they resolve to (the simulated fetch times
   * out after `requestTimeoutMs`, and a lease of another TTL is a harness failure).
   */
  sdkDefaults?: boolean;
  /**
   * Each process of this host runs in a PID namespace of its own (a container per process, the cache on a volume they
   * share): the cache lock cannot check another process's PID and goes by the holder's heartbeat.
   */
  ownPidNamespaces?: boolean;
  /**
   * The SDK's `safetyMarginMs` (undefined: its default). Set only by the `coarse` profile, whose hosts then also keep
   * their generator options inside what the SDK accepts for that margin. (Its hosts also kept a lease whose generator
   * threw `LeaseLostError` one tick before the deadline while the lease was valid: FS-16, where the lease renewed on
   * and a service that leased again met it as `lease_held`. Since the fix that refusal is `LeaseRenewalLateError`,
   * retried like any transient one, and `LeaseLostError` means the lease has ended.)
   */
  safetyMarginMs?: number;
}

/** Where a host's processes keep their lease (on the host machine's own disk). */
export const CLIENT_CACHE_PATH = '/svc/lease.json';

export interface LeaseClientStats {
  acquired: number;
  acquireFailures: number;
  lost: number;
  released: number;
  issued: number;
}

export class LeaseClientHost {
  readonly procs: SimProcess[] = [];
  private incarnations = 0;
  private stopped = false;
  /** Global µs of this host's latest issued ID. */
  lastIssuedUs = -1;
  /** The machine's disk, where the lease cache lives (a new view after each power loss). */
  disk: MemoryFs;
  /**
   * How long a process waits for the cluster in `leaseWorker` before giving up or resuming from the cache (the SDK's
   * `acquireTimeoutMs`; undefined: its default). From the settings, or set from the seed's configuration
   * (`LeaseWorkloadConfig.acquireTimeoutMs`) before the run starts.
   */
  acquireTimeoutMs: number | undefined;
  /** Called when a process of this host resumes a lease from its cache (the fault director watches for it). */
  onResumed: ((proc: SimProcess) => void) | undefined;
  /** The lease a process of this host took last (the `coarse` profile's faults time a stall by its deadline). */
  current: { proc: SimProcess; lease: WorkerLease } | undefined;
  /** How this service's code uses its generator: drawn per host from a stream of its own (review of issue 10). */
  private readonly use: GeneratorUse;

  constructor(
    private readonly world: World,
    readonly name: string,
    /** The service identity sent as nodeId. */
    readonly serviceId: string,
    readonly machine: Machine,
    private readonly settings: LeaseClientSettings,
    private readonly router: HttpRouter,
    private readonly endpoints: string[],
    private readonly oracle: IdOracle,
    private readonly stats: LeaseClientStats,
  ) {
    this.acquireTimeoutMs = settings.acquireTimeoutMs;
    const use = drawGeneratorUse(world.rng(`gen-use-${name}`));
    this.use = settings.safetyMarginMs === undefined ? use : fitGeneratorUse(use, settings.safetyMarginMs);
    this.disk = new MemoryFs({ wallMs: () => Math.floor(machine.clock.wallAt(machine.clock.nowUs)) });
    // The service's directory exists (durably) before any process starts.
    void this.disk.mkdir('/svc').then(() => this.disk.syncDir('/'));
  }

  get live(): SimProcess[] {
    return this.procs.filter((p) => p.alive);
  }

  /** Starts a new process on this host (alongside any that still run). */
  spawn(): SimProcess {
    const w = this.world;
    const proc = new SimProcess(w.sched, this.machine, `${this.name}#${++this.incarnations}`, w.nextPid());
    w.register(proc);
    this.procs.push(proc);
    w.trace(`${proc.name} start (nodeId ${this.serviceId})`);
    w.sched.after(0, proc, 'client-start', () => {
      void this.main(proc).catch((err: unknown) => {
        if (proc.alive) w.fail('harness', `${proc.name} client loop threw: ${errText(err)}`);
      });
    });
    return proc;
  }

  crash(proc: SimProcess): void {
    if (!proc.alive) return;
    // A process busy-waiting inside the ID core has, in this model, already issued the IDs it returns at the end of
    // its wait (they carry that time): the kill lands when the wait ends, never in the middle of it, or a successor
    // could take over before IDs stamped later than the kill (a modelling artefact, not a real overlap).
    const w = this.world;
    if (proc.busyUntilUs > w.sched.nowUs) {
      w.sched.at(proc.busyUntilUs, undefined, 'crash-after-busy-wait', () => this.crash(proc));
      return;
    }
    w.trace(`${proc.name} crash`);
    proc.kill();
  }

  /**
   * The machine loses power: every process dies, the disk keeps only what was fsynced (plus a random prefix of the
   * rest, the next write torn), and it boots again with a new boot ID.
   */
  powerLoss(): void {
    const busy = Math.max(...this.live.map((p) => p.busyUntilUs));
    if (busy > this.world.sched.nowUs) {
      // As for a crash: the power goes when the busy waits in progress end (see crash()).
      this.world.sched.at(busy, undefined, 'power-loss-after-busy-wait', () => this.powerLoss());
      return;
    }
    for (const p of this.live) p.kill();
    const rng = this.world.rng(`power-${this.name}-${this.machine.boots}`);
    this.disk = this.disk.crash({ kind: 'power', random: (n) => rng.int(n) });
    this.machine.reboot();
    this.world.trace(`${this.name} power loss (boot ${this.machine.boots} next)`);
  }

  /** No more IDs: the run is over (the oracle is checked on what was issued). */
  stop(): void {
    this.stopped = true;
  }

  resumeWork(): void {
    this.stopped = false;
  }

  private async main(proc: SimProcess): Promise<void> {
    const w = this.world;
    const s = this.settings;
    const rng: Prng = w.rng(`client-${proc.name}`);
    // Test-only re-introductions of issue-9 bugs, from outside the SDK (see docs/simulator-full.md):
    // - 'client-shared-incarnation': every process of this host presents one incarnation and one
    //   requestId, as processes did before per-process incarnations (a cached requestId, none sent);
    // - 'client-wall-stops-in-suspend': the SDK's wall clock stops with the monotonic one in a
    //   suspend, as if generation stopped at the monotonic deadline only.
    const shared = w.bugs.has('client-shared-incarnation');
    const wallOffset = proc.wallMs() - proc.monoMs();
    // A user-supplied per-process clock (the SDK must not trust a previous process's cached deadline on it).
    const monoOrigin = s.processMonotonic ? proc.monoMs() - rng.range(1, 50) : 0;
    const wall = w.bugs.has('client-wall-stops-in-suspend')
      ? () => proc.monoMs() + wallOffset
      : () => proc.wallMs();
    // Half the processes started once the cluster's UUID exists are configured with it (`clusterUid`, as the docs
    // recommend); the others pin the first answer's (or their cache's). A stream of its own: other draws stay.
    const pinUid =
      w.clusterUid !== undefined && w.rng(`cluster-pin-${proc.name}`).chance(1 / 2)
        ? w.clusterUid
        : undefined;
    if (pinUid !== undefined) this.router.pinnedBy(proc);
    const client = new FloeClient({
      endpoints: this.endpoints,
      ...(pinUid === undefined ? {} : { clusterUid: pinUid }),
      ...(s.sdkDefaults ? {} : { requestTimeoutMs: s.requestTimeoutMs }),
      fetch: this.router.fetchFor(proc, this.name, s.requestTimeoutMs),
      clock: {
        now: () => Math.floor(wall()),
        waitUntil: (ms: number) => proc.busyWaitUntilWall(ms - wall() + proc.wallMs()),
      },
      ...(s.machineMonotonic && !s.processMonotonic
        ? { monotonic: () => proc.bootMonoMs(), monotonicIsSystemWide: true }
        : { monotonic: () => proc.monoMs() - monoOrigin }),
      bootId: this.machine.bootId,
      cacheFs: memoryCacheFs(() => this.disk),
      cacheHost: simCacheHost(
        w,
        proc,
        w.rng(`cache-${proc.name}`),
        s.ownPidNamespaces ? `pid:[${proc.name}]` : undefined,
      ),
      setTimer: (fn, ms) => {
        const t = proc.setTimeout(fn, ms, 'sdk-timer');
        return { cancel: () => proc.clearTimer(t) };
      },
      sleep: (ms) => proc.sleep(ms),
      random: () => rng.float(),
      incarnation: shared ? this.name : proc.name,
      newRequestId: () => `${proc.name}-${rng.nextU32().toString(16)}`,
    });
    while (proc.alive) {
      if (this.stopped) {
        await proc.sleep(100);
        continue;
      }
      let lease: WorkerLease;
      // The SDK's deadline counts from when the acquire was sent: a suspend (and a backward wall
      // step) between the send and the answer is inside the lease, for the P1 exemption too.
      const askedAtUs = proc.effectiveUs;
      // Which boot wrote the cache (a resume on the same boot, on the machine's clock, takes the SDK's trusted branch).
      const cachedBoot =
        s.cache && s.machineMonotonic && !s.processMonotonic ? this.cachedBootId() : undefined;
      try {
        lease = await client.leaseWorker({
          app: s.app,
          nodeId: this.serviceId,
          ...(s.sdkDefaults ? {} : { ttlMs: s.ttlMs, layout: s.layout }),
          // The SDK names each acquire (from the seeded stream), and sends an unanswered one's name again.
          ...(shared ? { requestId: `${this.name}-rq` } : {}),
          ...(s.cache ? { cachePath: CLIENT_CACHE_PATH } : {}),
          ...(this.acquireTimeoutMs === undefined ? {} : { acquireTimeoutMs: this.acquireTimeoutMs }),
          ...(s.safetyMarginMs === undefined ? {} : { safetyMarginMs: s.safetyMarginMs }),
        });
      } catch (err) {
        this.stats.acquireFailures++;
        w.trace(`${proc.name} acquire failed: ${errText(err)}`);
        // A service backs off before it tries again (in the `coarse` profile a service that polls for a worker ID).
        await proc.sleep(s.safetyMarginMs === undefined ? rng.range(200, 1_000) : rng.range(20, 200));
        continue;
      }
      this.stats.acquired++;
      if (s.sdkDefaults && (lease.ttlMs !== s.ttlMs || lease.layout.name !== s.layout.name))
        w.fail(
          'harness',
          `${proc.name} got a lease of ${lease.ttlMs} ms, layout ${lease.layout.name}: the SDK's defaults are not the ` +
            `${s.ttlMs} ms and ${s.layout.name} the harness assumes`,
        );
      this.current = { proc, lease };
      const onMono = lease.resumedFromCache && cachedBoot !== undefined && cachedBoot === this.machine.bootId;
      this.oracle.leased(proc.name, lease.token, this.machine, askedAtUs, lease.resumedFromCache, onMono);
      w.trace(
        `${proc.name} ${lease.resumedFromCache ? 'resumed from cache' : 'leased'} worker ${lease.workerId} token ${lease.token} (floor ${lease.floorMs})${onMono ? ', on the cached monotonic deadline' : ''}`,
      );
      if (lease.resumedFromCache) this.onResumed?.(proc);
      lease.on('lost', (e: Error) => {
        this.stats.lost++;
        w.trace(
          `${proc.name} lost worker ${lease.workerId} token ${lease.token}: ${e.message.slice(0, 120)}`,
        );
      });
      lease.on('renewFailed', () => {});
      // Two generators asked of one lease, used in turn: the SDK must hand out the same one (with
      // the 'client-two-generators' switch it does not, and they issue the same IDs).
      let gens: [Snowflake, Snowflake];
      try {
        gens = [lease.snowflake(s.layout, this.use.options), lease.snowflake(s.layout, this.use.options)];
      } catch (err) {
        // A service that cannot generate hands its worker ID back rather than hold it.
        w.trace(`${proc.name} no generator: ${errText(err)}`);
        await lease.release().catch(() => {});
        await proc.sleep(100);
        continue;
      }
      await this.generate(proc, rng, lease, gens);
    }
  }

  /** The boot ID in this host's lease cache record written on the machine's clock, if any (read, nothing drawn). */
  private cachedBootId(): string | undefined {
    try {
      const r = JSON.parse(this.disk.readFileNow(CLIENT_CACHE_PATH).toString('utf8')) as {
        bootId?: unknown;
        systemMonotonic?: unknown;
      };
      return r.systemMonotonic === true && typeof r.bootId === 'string' ? r.bootId : undefined;
    } catch {
      return undefined;
    }
  }

  /** Up to `k` IDs, through the generator call this service uses (one ID per call for `next` and `nextString`). */
  private take(gen: Snowflake, k: number): bigint[] {
    switch (this.use.call) {
      case 'next':
        return [gen.next()];
      case 'nextString':
        return [BigInt(gen.nextString())];
      case 'nextBatch':
        return [...gen.nextBatch(k)];
      case 'fill': {
        // Into the middle of a larger buffer, as a caller reusing one does.
        const buf = new BigInt64Array(k + 2);
        gen.fill(buf, 1, k);
        return [...buf.subarray(1, 1 + k)];
      }
    }
  }

  /** Bursts of IDs until the lease ends (lost, or released on purpose). */
  private async generate(
    proc: SimProcess,
    rng: Prng,
    lease: WorkerLease,
    gens: [Snowflake, Snowflake],
  ): Promise<void> {
    const w = this.world;
    const s = this.settings;
    for (let burst = 0; ; burst++) {
      const gen = gens[burst % 2] as Snowflake;
      await proc.sleep(rng.range(s.gapMs[0], s.gapMs[1]));
      if (!proc.alive) return;
      if (this.stopped) continue;
      const n = rng.range(s.burst[0], s.burst[1]);
      try {
        for (let i = 0; i < n; ) {
          const batched = this.use.call === 'nextBatch' || this.use.call === 'fill';
          const got = this.take(gen, batched ? Math.min(n - i, rng.range(1, 16)) : 1);
          for (const id of got) {
            this.oracle.issued(proc.name, s.app, lease.workerId, lease.token, s.layout, id, proc.effectiveUs);
          }
          this.stats.issued += got.length;
          this.lastIssuedUs = proc.effectiveUs;
          i += got.length;
        }
      } catch (err) {
        const name = (err as Error).name;
        if (name === 'LeaseLostError') return;
        // Renewals are late (LeaseRenewalLateError, ceiling) or the wall clock stepped back: try again later.
        w.trace(`${proc.name} generator: ${errText(err).slice(0, 160)}`);
        if (!lease.valid) return;
        continue;
      }
      if (rng.chance(s.releaseChance)) {
        try {
          await lease.release();
          this.stats.released++;
          w.trace(`${proc.name} released worker ${lease.workerId} token ${lease.token}`);
        } catch (err) {
          w.trace(`${proc.name} release failed: ${errText(err).slice(0, 160)}`);
        }
        return;
      }
    }
  }
}

/** How a service calls its lease's generator, and with which options (the SDK's defaults in about half the hosts). */
interface GeneratorUse {
  call: 'next' | 'nextString' | 'nextBatch' | 'fill';
  options: LeaseSnowflakeOptions;
}

/** The options within what the SDK accepts with this safety margin: a backwards tolerance of at most half of it. */
function fitGeneratorUse(use: GeneratorUse, safetyMarginMs: number): GeneratorUse {
  const t = use.options.backwardsToleranceMs;
  if (t === undefined || t <= safetyMarginMs / 2) return use;
  return { ...use, options: { ...use.options, backwardsToleranceMs: Math.floor(safetyMarginMs / 2) } };
}

function drawGeneratorUse(r: Prng): GeneratorUse {
  const call = r.pick(['next', 'next', 'nextString', 'nextBatch', 'fill'] as const);
  if (r.chance(0.5)) return { call, options: {} };
  const options: LeaseSnowflakeOptions = {
    onClockBackwards: r.pick(['wait', 'borrow'] as const),
    onSequenceExhausted: r.pick(['wait', 'borrow'] as const),
  };
  // Only values the SDK accepts for every drawn TTL (at least 1 s): a tolerance up to half the safety margin (at least
  // 100 ms), a tick plus lead under TTL - margin - renewal period (at least ~460 ms). Swarm seed 461379 drew 1,000 and
  // 2,000: the SDK refused them (ClientOptionError) and the clients kept their leases without generating.
  if (r.chance(0.5)) options.backwardsToleranceMs = r.pick([0, 5, 50, 100]);
  if (r.chance(0.5)) options.maxLeadMs = r.pick([0, 10, 200, 300]);
  return { call, options };
}
