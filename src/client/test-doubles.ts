// An in-process fake of a Floe cluster's HTTP lease API, for the SDK's unit tests and benchmark. Not exported.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { lockPathOf, lockRecordFor } from './cache-lock.js';
import type { ClusterPin } from './cluster-pin.js';
import { FloeClient, type FloeClientOptions, type LeaseWorkerOptions } from './floe-client.js';
import { type FetchInit, type FetchLike, type FetchResponseLike, HttpTransport } from './http-transport.js';
import type { WorkerLease } from './worker-lease.js';

/**
 * Leaves on `cachePath` the lock of a process that has died (a real PID, of a child that has exited), as a crashed
 * predecessor would: a restarted process takes it over.
 */
export function leaveDeadLock(cachePath: string, bootId = 'boot-1', ttlMs = 3000): number {
  const pid = spawnSync(process.execPath, ['-e', '']).pid;
  writeFileSync(lockPathOf(cachePath), JSON.stringify(lockRecordFor(pid, bootId, ttlMs)));
  return pid;
}

export interface FakeRequest {
  url: string;
  host: string;
  path: string;
  body: Record<string, unknown>;
  auth: string | undefined;
}

interface FakeLease {
  workerId: number;
  token: number;
  nodeId: string;
  requestId: string;
  incarnation: string;
  ttlMs: number;
  live: boolean;
  highWaterAtGrant: number;
}

type Fault =
  | 'network'
  | 'timeout504'
  | 'applyThenDrop'
  | 'noLeader503'
  | 'notCommitted503'
  | 'outcomeUnknown504'
  | 'leaseExpired410';

/**
 * A fake cluster: `hosts` are node addresses; `leader` is the one that answers writes, the others answer 307 with
 * the leader's address (or 503 when `leader` is undefined). Leases are kept per app without expiry unless a test
 * calls `expire`. `faults` are consumed one per request.
 */
export class FakeCluster {
  leader: string | undefined;
  readonly requests: FakeRequest[] = [];
  readonly faults: Fault[] = [];
  nextToken = 10;
  poolSize = 4;
  /** Per app: worker ID -> high-water mark; -> live lease. */
  private readonly highWater = new Map<string, number>();
  private readonly leases = new Map<string, FakeLease>();
  /** Leader wall time used in replies (informational). */
  wallNow = () => Date.now();
  /** Rewrites a 200 reply's body before it is sent (what a node answering with another proposal's result does). */
  tamper: ((path: string, body: Record<string, unknown>) => Record<string, unknown>) | undefined;
  /** When true, renewals never raise the bound (the reply carries the current one). */
  ignoreBounds = false;
  /** Per app: the layout fingerprint the first acquire naming one pinned. */
  readonly layouts = new Map<string, string>();

  constructor(readonly hosts: string[]) {
    this.leader = hosts[0];
  }

  /** The cluster's UUID, named on every answer (`floe-cluster`) when set. */
  clusterUid: string | undefined;

  readonly fetch: FetchLike = async (url: string, init: FetchInit): Promise<FetchResponseLike> => {
    const res = await this.answer(url, init);
    const uid = this.clusterUid;
    if (uid === undefined) return res;
    return {
      ...res,
      headers: { get: (n) => (n.toLowerCase() === 'floe-cluster' ? uid : res.headers.get(n)) },
    };
  };

  private readonly answer = async (url: string, init: FetchInit): Promise<FetchResponseLike> => {
    const u = new URL(url);
    const body = init.body ? (JSON.parse(init.body) as Record<string, unknown>) : {};
    this.requests.push({ url, host: u.host, path: u.pathname, body, auth: init.headers.authorization });
    const fault = this.faults.shift();
    if (fault === 'network') throw new TypeError('fetch failed (fake network error)');
    if (fault === 'noLeader503' || this.leader === undefined)
      return reply(503, { error: 'not_leader', message: 'no leader known' });
    if (u.host !== this.leader)
      return reply(
        307,
        { error: 'not_leader', message: 'not the leader', leader: { id: 1, httpAddr: this.leader } },
        `http://${this.leader}${u.pathname}`,
      );
    if (fault === 'timeout504') return reply(504, { error: 'timeout', message: 'proposal timed out' });
    // What a node answers when the proposal's index committed with another leader's entry (docs/http-errors.md).
    if (fault === 'notCommitted503')
      return reply(503, { error: 'not_committed', message: 'not committed, retry' }, undefined, {
        'retry-after': '1',
      });
    // What the leader answers a retried acquire whose lease an expiry applied right after (LeaseService.acquire).
    if (fault === 'leaseExpired410')
      return reply(410, { error: 'lease_expired', message: 'the lease passed its deadline on the leader' });
    if (fault === 'outcomeUnknown504')
      return reply(504, { error: 'outcome_unknown', message: 'outcome unknown: leadership lost' });
    const res = this.handle(u.pathname, body);
    if (fault === 'applyThenDrop') throw new TypeError('fetch failed (fake: applied, answer lost)');
    return res;
  };

  lease(app: string, workerId: number): FakeLease | undefined {
    return this.leases.get(`${app}/${workerId}`);
  }

  highWaterOf(app: string, workerId: number): number {
    return this.highWater.get(`${app}/${workerId}`) ?? 0;
  }

  setHighWater(app: string, workerId: number, ms: number): void {
    this.highWater.set(`${app}/${workerId}`, ms);
  }

  /** As if the leader's deadline passed: the lease ends; renewals get `lease_expired`/`not_held`. */
  expire(app: string, workerId: number): void {
    const l = this.lease(app, workerId);
    if (l) l.live = false;
  }

  private handle(path: string, b: Record<string, unknown>): FetchResponseLike {
    const m = /^\/v1\/apps\/([^/]+)\/workers\/(acquire|(\d+)\/(renew|release))$/.exec(path);
    if (!m) return reply(404, { error: 'not_found', message: path });
    const app = decodeURIComponent(m[1] as string);
    if (m[2] === 'acquire') {
      const nodeId = String(b.nodeId);
      const pinned = this.layouts.get(app);
      if (typeof b.layout === 'string' && pinned !== undefined && pinned !== b.layout)
        return reply(409, { error: 'layout_mismatch', message: `app ${app} is pinned to ${pinned}` });
      for (const l of this.leases.values()) {
        if (l.live && l.nodeId === nodeId && this.appOf(l) === app) {
          if (l.requestId === b.requestId && l.incarnation === String(b.incarnation ?? ''))
            return this.ok(path, this.grantBody(app, l, true));
          return reply(409, { error: 'lease_held', message: `${nodeId} holds worker ${l.workerId}` });
        }
      }
      for (let w = 0; w < this.poolSize; w++) {
        const key = `${app}/${w}`;
        const cur = this.leases.get(key);
        if (cur?.live) continue;
        const hw = this.highWater.get(key) ?? 0;
        const l: FakeLease = {
          workerId: w,
          token: this.nextToken++,
          nodeId,
          requestId: String(b.requestId),
          incarnation: String(b.incarnation ?? ''),
          ttlMs: Number(b.ttlMs ?? 10_000),
          live: true,
          highWaterAtGrant: hw,
        };
        (l as FakeLease & { app: string }).app = app;
        if (typeof b.boundMs === 'number' && b.boundMs > hw) this.highWater.set(key, b.boundMs);
        this.leases.set(key, l);
        if (typeof b.layout === 'string' && pinned === undefined) this.layouts.set(app, b.layout);
        return this.ok(path, this.grantBody(app, l, false));
      }
      return reply(503, { error: 'pool_exhausted', message: `pool of ${app} is full` });
    }
    const workerId = Number(m[3]);
    const key = `${app}/${workerId}`;
    const l = this.leases.get(key);
    if (!l) return reply(410, { error: 'not_held', message: 'not held' });
    if (l.token !== b.token) return reply(409, { error: 'stale_token', message: 'stale token' });
    if (m[4] === 'renew') {
      if (!l.live) return reply(410, { error: 'lease_expired', message: 'expired' });
      const hw = this.highWater.get(key) ?? 0;
      const logged = !this.ignoreBounds && typeof b.boundMs === 'number' && b.boundMs > hw;
      if (logged) this.highWater.set(key, b.boundMs as number);
      return this.ok(path, {
        ok: true,
        op: 'renew',
        app,
        workerId,
        token: l.token,
        ttlMs: l.ttlMs,
        boundMs: this.highWater.get(key) ?? 0,
        expiresAtMs: this.wallNow() + l.ttlMs,
        logged,
      });
    }
    const already = !l.live;
    if (typeof b.lastTimestampMs === 'number' && b.lastTimestampMs > (this.highWater.get(key) ?? 0))
      this.highWater.set(key, b.lastTimestampMs);
    l.live = false;
    return this.ok(path, {
      ok: true,
      op: 'release',
      app,
      workerId,
      highWaterMs: this.highWater.get(key) ?? 0,
      alreadyReleased: already,
    });
  }

  private ok(path: string, body: Record<string, unknown>): FetchResponseLike {
    return reply(200, this.tamper ? this.tamper(path, body) : body);
  }

  private appOf(l: FakeLease): string {
    return (l as FakeLease & { app: string }).app;
  }

  private grantBody(app: string, l: FakeLease, retried: boolean): Record<string, unknown> {
    return {
      ok: true,
      op: 'acquire',
      app,
      workerId: l.workerId,
      datacenterId: 0,
      localWorkerId: l.workerId,
      datacenterBits: 0,
      workerBits: 10,
      token: l.token,
      nodeId: l.nodeId,
      ttlMs: l.ttlMs,
      grantedAtMs: this.wallNow(),
      expiresAtMs: this.wallNow() + l.ttlMs,
      highWaterMs: l.highWaterAtGrant,
      boundMs: this.highWater.get(`${app}/${l.workerId}`) ?? 0,
      requestId: l.requestId,
      incarnation: l.incarnation,
      layout: this.layouts.get(app) ?? '',
      retried,
    };
  }
}

function reply(
  status: number,
  body: unknown,
  location?: string,
  extraHeaders: Record<string, string> = {},
): FetchResponseLike {
  const text = JSON.stringify(body);
  return {
    status,
    headers: {
      get: (n: string) =>
        n.toLowerCase() === 'location' ? (location ?? null) : (extraHeaders[n.toLowerCase()] ?? null),
    },
    text: async () => text,
  };
}

/**
 * Virtual time for the SDK's tests: one monotonic clock (`mono`), a wall clock that moves with it (`wall`, a
 * ManualClock-like object a test may also jump), and timers that fire only when the test calls `advance`.
 */
export class FakeTime {
  t = 0;
  private seq = 0;
  private timers: { at: number; seq: number; fn: () => void }[] = [];
  readonly wall: { now(): number; waitUntil(ms: number): void; offset: number };

  constructor(wallStartMs: number) {
    const self = this;
    this.wall = {
      offset: wallStartMs,
      now() {
        return this.offset + self.t;
      },
      waitUntil(ms: number) {
        // A generator waiting for a tick: jump the wall clock (not the monotonic one) as a ManualClock does.
        if (ms > this.now()) this.offset += ms - this.now();
      },
    };
  }

  readonly mono = (): number => this.t;

  readonly setTimer = (fn: () => void, ms: number): { cancel(): void } => {
    const entry = { at: this.t + Math.max(0, ms), seq: this.seq++, fn };
    this.timers.push(entry);
    return {
      cancel: () => {
        this.timers = this.timers.filter((e) => e !== entry);
      },
    };
  };

  readonly sleep = (ms: number): Promise<void> => new Promise((r) => this.setTimer(r, ms));

  /** Moves time forward, firing due timers in order and letting their promises settle. */
  async advance(ms: number): Promise<void> {
    const target = this.t + ms;
    for (;;) {
      await settle();
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers[0];
      if (!next || next.at > target) break;
      this.timers.shift();
      this.t = Math.max(this.t, next.at);
      next.fn();
    }
    this.t = target;
    await settle();
  }

  get pendingTimers(): number {
    return this.timers.length;
  }
}

/** Lets every pending promise chain run (the fake cluster answers without I/O). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

/** A client's options on the fake cluster and virtual time (boot 'boot-1', jitter at its middle), plus `more`. */
export function fakeClientOptions(
  cluster: FakeCluster,
  time: FakeTime,
  more: Partial<FloeClientOptions> = {},
): FloeClientOptions {
  return {
    endpoints: cluster.hosts,
    fetch: cluster.fetch,
    clock: time.wall,
    monotonic: time.mono,
    setTimer: time.setTimer,
    sleep: time.sleep,
    random: () => 0.5,
    bootId: 'boot-1',
    ...more,
  };
}

/** One fake cluster, virtual time from `wall0`, and a maker of clients on them. */
export function fakeWorld(wall0: number) {
  const cluster = new FakeCluster(['10.0.0.1:7380']);
  const time = new FakeTime(wall0);
  const mk = (more: Partial<FloeClientOptions> = {}) =>
    new FloeClient(fakeClientOptions(cluster, time, more));
  return { cluster, time, mk };
}

/** Drives `time` in 10 ms steps until `leaseWorker(o)` settles (at most `steps` of them); its result or rejection. */
export async function leaseDriven(
  time: FakeTime,
  client: FloeClient,
  o: LeaseWorkerOptions,
  steps = 2000,
): Promise<WorkerLease> {
  let done = false;
  const p = client.leaseWorker(o).finally(() => {
    done = true;
  });
  p.catch(() => {}); // observed by the caller; keeps the rejection handled while time is driven
  for (let i = 0; i < steps && !done; i++) await time.advance(10);
  return p;
}

/**
 * An HttpTransport on virtual time (each sleep moves it; every answer comes at once from `answer(host)`), pinned to
 * `cluster` if given; `hosts` lists the hosts asked, in order.
 */
export function virtualTransport(
  endpoints: string[],
  answer: (host: string, headers: Record<string, string>) => FetchResponseLike,
  cluster?: ClusterPin,
): { t: HttpTransport; hosts: string[] } {
  let now = 0;
  const hosts: string[] = [];
  const fetch: FetchLike = async (url, init) => {
    const host = new URL(url).host;
    hosts.push(host);
    return answer(host, init.headers);
  };
  const t = new HttpTransport({
    endpoints,
    requestTimeoutMs: 2000,
    fetch,
    monotonic: () => now,
    wall: () => 1_780_000_000_000 + now,
    sleep: async (ms) => {
      now += ms;
    },
    random: () => 0.5,
    ...(cluster ? { cluster } : {}),
  });
  return { t, hosts };
}

/**
 * A transport whose attempts and waits go to one log, in order: a host, or `wait <ms>`. Its monotonic clock moves by
 * `clock.tick` ms at every read (a real one moves between any two reads); 0 keeps it still between waits.
 */
export function loggingTransport(
  endpoints: string[],
  answer: (host: string, url: string) => FetchResponseLike | Promise<FetchResponseLike>,
  clock: { now: number; tick: number } = { now: 0, tick: 0 },
) {
  const log: string[] = [];
  const t = new HttpTransport({
    endpoints,
    requestTimeoutMs: 2000,
    fetch: async (url) => {
      const host = new URL(url).host;
      log.push(host);
      return answer(host, url);
    },
    monotonic: () => {
      const v = clock.now;
      clock.now += clock.tick;
      return v;
    },
    wall: () => clock.now,
    sleep: async (ms) => {
      log.push(`wait ${ms}`);
      clock.now += ms;
    },
    random: () => 0.5,
  });
  return { t, log };
}
