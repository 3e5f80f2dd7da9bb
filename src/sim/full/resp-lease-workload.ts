// RESP lease clients: service processes that hold worker IDs without the SDK, through the production RESP server of
// the nodes (WORKER.ACQUIRE / WORKER.RENEW / WORKER.RELEASE over the simulated RESP links of resp-link.ts, the same
// connections, resets, losses and delays the RESP sequence clients get), and generate Snowflake IDs from what they
// hold with the ID core (src/id's Snowflake: floor, ceiling and a guard), as docs/leases.md ("Holding a lease without
// the SDK") tells a raw holder to:
// - every acquire names REQID, INCARNATION (the process), LAYOUT (the run's layout: the app is the SDK clients' app,
//   so both kinds of holders share its worker IDs and its pin), TTL and BOUND; an acquire without an answer is sent
//   again with the same REQID;
// - the deadline is send + TTL - margin (TTL/10 + 100 ms) on the monotonic clock and on the wall clock, from the send
//   time of the acquire or renewal that was acknowledged, never from the answer; IDs only while both deadlines are
//   more than one tick away (the ID core's fast path runs to the end of its tick without calling the guard);
// - timestamps only in (high_water_ms, bound_ms], the bound raised only by a committed renewal's bound_ms;
// - every reply checked against its request (a mismatch is `reply-mismatch` and is never used); MOVED followed to
//   the leader, CLUSTERDOWN and lost replies sent to another member;
// - the cluster named by the first lease record is pinned for the client's life (as a user configures the output of
//   `floe cluster uid`): every later WORKER.* command names it (`CLUSTER uuid`), and every record must name it;
// - a lease whose deadline passed is revived by a renewal sent now, or (one time in five) given up (safe: the
//   leader acknowledges a renewal only of the live token, before its own deadline; the deadline then counts from this
//   send); a release stops generation first and names the last timestamp used (LAST).
// Every grant, renewal and release goes to the lease ledger (replies against the committed lease state) and every ID
// to the ID oracle (unique, one holder at a time, above the floor at grant, disjoint timestamp ranges).

import { decode, type Layout, layoutFingerprint, Snowflake } from '../../id/index.js';
import type { Prng } from '../prng.js';
import type { RespLeaseWorkloadConfig } from './config.js';
import type { IdOracle } from './id-oracle.js';
import type { LeaseLedger } from './lease-ledger.js';
import { errText } from './node-host.js';
import { type Machine, type SimProcess, startProcess } from './process.js';
import { RespConnection, type RespValue, show } from './resp-client.js';
import {
  type AcquireAsked,
  checkAcquireReply,
  checkRenewReply,
  deadlinesAfterAck,
  mayIssue,
  recordOf,
  renewBound,
} from './resp-lease-reply.js';
import { type RespNet, respAddrOf } from './resp-link.js';
import type { World } from './world.js';

/** What one RESP lease client runs with: the seed's drawn configuration, and the lease clients' app, TTL and layout. */
export type RespLeaseSettings = Omit<RespLeaseWorkloadConfig, 'clients'> & {
  app: string;
  ttlMs: number;
  layout: Layout;
};

export interface RespLeaseStats {
  /** WORKER.* commands sent (each MOVED hop counts). */
  commands: number;
  /** Of them, those that named the pinned cluster (`CLUSTER uuid`). */
  named: number;
  moved: number;
  grants: number;
  renewals: number;
  /** Renewals sent after the holder's deadline had passed that were acknowledged (the lease went on). */
  revived: number;
  /** Leases given up at their deadline (renewals not acknowledged in time). */
  lapsed: number;
  releases: number;
  /** Refusals by reason (lease_held, pool_exhausted, stale_token, ...). */
  refused: Record<string, number>;
  issued: number;
  crashes: number;
}

export const zeroRespLeaseStats = (): RespLeaseStats => ({
  commands: 0,
  named: 0,
  moved: 0,
  grants: 0,
  renewals: 0,
  revived: 0,
  lapsed: 0,
  releases: 0,
  refused: {},
  issued: 0,
  crashes: 0,
});

/** What a process holds. */
interface Held {
  workerId: number;
  token: number;
  deadline: { mono: number; wall: number };
  boundMs: number;
  gen: Snowflake;
  /** Monotonic ms of the last acknowledged send (renewals count from it). */
  ackSentMono: number;
  /**
   * How far the generator's clock runs ahead of the wall clock (ms): the floor (the worker's high-water mark, which an
   * earlier holder's BOUND may have put ahead of real time) plus one, minus the wall clock at grant, if positive. IDs
   * are then misdated by up to that much, never below the floor; deadlines stay on the real clocks.
   */
  leadMs: number;
  /** The last ID issued under this lease (IDs of one generator increase), if any. */
  lastId: bigint | undefined;
}

/** One RESP command's fate: a value, an error line, or no answer at all ('lost'). */
type Answer = { v: RespValue } | { err: string } | 'lost';

/** Thrown by the generator's guard: the deadline is too close. */
class PastDeadline extends Error {}

export class RespLeaseClient {
  private stopped = false;
  private started = false;
  private incarnations = 1;
  private conns = new Map<string, RespConnection>();
  private target: string | undefined;
  private held: Held | undefined;
  /** The REQID of this process's last acquire that got no answer (sent again by its next acquire). */
  private unanswered: { proc: string; requestId: string } | undefined;
  /** Global µs of this client's latest issued ID (liveness after healing). */
  lastIssuedUs = -1;
  /** The cluster the first lease record named: named in every later command (`CLUSTER uuid`) and checked in records. */
  private cluster: string | undefined;

  constructor(
    private readonly world: World,
    /** The client's name (its RESP links are cut as `name->nodeId`), also its nodeId. */
    readonly name: string,
    public proc: SimProcess,
    private readonly settings: RespLeaseSettings,
    private readonly respNet: RespNet,
    private readonly nodeIds: () => number[],
    private readonly oracle: IdOracle,
    private readonly ledger: LeaseLedger,
    private readonly stats: RespLeaseStats,
    private readonly rng: Prng,
  ) {}

  get machine(): Machine {
    return this.proc.machine;
  }

  stop(): void {
    this.stopped = true;
  }

  /** Started and running: may be crashed. */
  get crashable(): boolean {
    return this.started && this.proc.alive && !this.stopped;
  }

  /** Starts the workload (once the pool is configured, or at the heal if it never was). */
  start(): void {
    if (this.started) return;
    this.started = true;
    const proc = this.proc;
    this.world.sched.after(0, proc, 'resp-lease-start', () => void this.run(proc));
  }

  /** The process dies (a busy wait in progress ends first: the IDs it returns carry its end). */
  crash(): void {
    const p = this.proc;
    if (!p.alive) return;
    if (p.busyUntilUs > this.world.sched.nowUs) {
      this.world.sched.at(p.busyUntilUs, undefined, 'resp-lease-crash-after-busy-wait', () => this.crash());
      return;
    }
    this.world.trace(`${p.name} crash`);
    p.kill();
    this.stats.crashes++;
    this.conns = new Map();
    this.target = undefined;
    this.held = undefined;
  }

  /** A new process on the same machine (after a crash). */
  restart(): void {
    if (this.proc.alive) return;
    const w = this.world;
    const proc = startProcess(w, this.proc.machine, this.name, ++this.incarnations);
    this.proc = proc;
    w.trace(`${proc.name} start`);
    if (this.started) w.sched.after(0, proc, 'resp-lease-start', () => void this.run(proc));
  }

  private async run(proc: SimProcess): Promise<void> {
    try {
      await this.loop(proc);
    } catch (err) {
      if (proc.alive) this.world.fail('harness', `${proc.name} RESP lease loop threw: ${errText(err)}`);
    }
  }

  private async loop(proc: SimProcess): Promise<void> {
    const s = this.settings;
    const renewEveryMs = Math.floor(s.ttlMs / 3);
    while (proc.alive) {
      if (this.stopped) {
        await proc.sleep(100);
        continue;
      }
      if (!this.held) {
        if (!(await this.acquire(proc))) await proc.sleep(this.rng.range(50, 400));
        continue;
      }
      await proc.sleep(this.rng.range(s.gapMs[0], s.gapMs[1]));
      if (!proc.alive || this.stopped) continue;
      const h = this.held;
      if (!h) continue;
      if (!mayIssue(h.deadline, proc.monoMs(), proc.wallMs(), s.layout.unitMs)) {
        await this.lapsed(proc, h);
        continue;
      }
      // Renew every TTL/3, and at once when the committed bound leaves less than half a window above the generator's
      // clock (a fresh lease whose floor, an earlier holder's bound, lies above the BOUND this acquire asked).
      if (
        proc.monoMs() >= h.ackSentMono + renewEveryMs ||
        renewBound(h.boundMs, proc.wallMs() + h.leadMs, s.boundWindowMs) !== undefined
      ) {
        await this.renew(proc, h, false);
        if (this.held !== h) continue;
      }
      this.burst(proc, h);
      if (this.held === h && this.rng.chance(s.releaseChance)) await this.release(proc, h);
    }
  }

  /** The deadline passed without an acknowledged renewal: give the lease up, or try to revive it with a renewal. */
  private async lapsed(proc: SimProcess, h: Held): Promise<void> {
    if (this.rng.chance(0.8)) {
      this.world.trace(
        `${proc.name} deadline passed on worker ${h.workerId} token ${h.token}: renewing late`,
      );
      await this.renew(proc, h, true);
      if (this.held === h && mayIssue(h.deadline, proc.monoMs(), proc.wallMs(), this.settings.layout.unitMs))
        return;
    }
    if (this.held !== h) return;
    this.stats.lapsed++;
    this.world.trace(`${proc.name} gives up worker ${h.workerId} token ${h.token} (deadline passed)`);
    this.held = undefined;
  }

  /** IDs from the generator until the burst is done or the guard stops it. */
  private burst(proc: SimProcess, h: Held): void {
    const s = this.settings;
    const n = this.rng.range(s.burst[0], s.burst[1]);
    try {
      for (let i = 0; i < n; i++) {
        const id = h.gen.next();
        if (!proc.alive) return;
        h.lastId = id;
        this.oracle.issued(proc.name, s.app, h.workerId, h.token, s.layout, id, proc.effectiveUs);
        this.stats.issued++;
        this.lastIssuedUs = proc.effectiveUs;
      }
    } catch (err) {
      if (!(err instanceof PastDeadline))
        this.world.trace(`${proc.name} generator: ${errText(err).slice(0, 160)}`);
    }
  }

  // ---- WORKER.ACQUIRE ------------------------------------------------------------------------

  private async acquire(proc: SimProcess): Promise<boolean> {
    const s = this.settings;
    const w = this.world;
    // An acquire of this process that got no answer may have left a grant nobody uses: its REQID is sent again, so
    // the cluster answers with that lease instead of `lease_held` until it expires (rule 1 of docs/leases.md, "Holding
    // a lease without the SDK"; swarm seed 834519). Never a REQID whose lease issued IDs: only a lost acquire sets it.
    const fresh = `${proc.name}-${this.rng.nextU32().toString(16)}`;
    const carried = this.unanswered?.proc === proc.name ? this.unanswered.requestId : undefined;
    this.unanswered = undefined;
    const asked: AcquireAsked = {
      app: s.app,
      nodeId: this.name,
      requestId: carried ?? fresh,
      incarnation: proc.name,
      ttlMs: s.ttlMs,
      layout: layoutFingerprint(s.layout),
      boundMs: 0,
    };
    // An acquire without an answer is sent again with the same REQID (the cluster answers a retry by the same
    // incarnation with the same grant), a few times.
    for (let attempt = 0; attempt < 4 && proc.alive && !this.stopped; attempt++) {
      const sentMono = proc.monoMs();
      const sentWall = proc.wallMs();
      const askedAtUs = proc.effectiveUs;
      asked.boundMs = Math.ceil(sentWall + s.boundWindowMs);
      this.ledger.acquireSent(
        proc.name,
        JSON.stringify({ requestId: asked.requestId, incarnation: asked.incarnation }),
      );
      const args = [
        'WORKER.ACQUIRE',
        s.app,
        asked.nodeId,
        'TTL',
        String(s.ttlMs),
        'REQID',
        asked.requestId,
        'INCARNATION',
        asked.incarnation,
        'LAYOUT',
        asked.layout,
        'BOUND',
        String(asked.boundMs),
        ...this.named(),
      ];
      const a = await this.send(proc, args);
      if (!proc.alive) return false;
      if (a === 'lost') continue;
      if ('err' in a) {
        this.refused(proc, 'WORKER.ACQUIRE', a.err);
        return false;
      }
      const rec = recordOf(a.v);
      const g =
        rec === undefined
          ? 'not a lease record'
          : (this.clusterProblem(rec) ?? checkAcquireReply(asked, rec));
      if (typeof g === 'string') {
        w.fail('reply-mismatch', `${proc.name}: ${args.join(' ')} answered ${show(a.v)}: ${g}`);
        return false;
      }
      const res = ledgerFields(rec as Map<string, string>, g);
      const wrong = this.ledger.replyMismatch('acquire', s.app, undefined, {}, res);
      if (wrong) {
        w.fail('reply-mismatch', `${proc.name}: ${args.join(' ')} answered ${show(a.v)}: ${wrong}`);
        return false;
      }
      // The ID oracle checks the lease is a grant for one of this process's own acquires before any ID is issued.
      this.oracle.leased(proc.name, g.token, proc.machine, askedAtUs);
      const split = s.layout.datacenterBits > 0;
      let gen: Snowflake;
      const held: Held = {
        workerId: g.workerId,
        token: g.token,
        deadline: deadlinesAfterAck(undefined, sentMono, sentWall, s.ttlMs),
        boundMs: Math.max(g.boundMs, g.floorMs),
        gen: undefined as unknown as Snowflake,
        ackSentMono: sentMono,
        leadMs: Math.max(0, Math.ceil(g.floorMs + 1 - proc.wallMs())),
        lastId: undefined,
      };
      try {
        gen = new Snowflake({
          layout: s.layout,
          worker: split ? g.localWorkerId : g.workerId,
          datacenter: split ? g.datacenterId : 0,
          clock: {
            now: () => Math.floor(proc.wallMs()) + held.leadMs,
            waitUntil: (ms) => proc.busyWaitUntilWall(ms - held.leadMs),
          },
          floor: g.floorMs,
          ceiling: held.boundMs,
          guard: (now) => {
            if (
              this.held !== held ||
              !mayIssue(held.deadline, proc.monoMs(), now - held.leadMs, s.layout.unitMs)
            )
              throw new PastDeadline('deadline');
          },
        });
      } catch (err) {
        w.trace(`${proc.name} no generator for worker ${g.workerId}: ${errText(err)}`);
        return false;
      }
      held.gen = gen;
      this.held = held;
      this.stats.grants++;
      w.trace(
        `${proc.name} resp leased worker ${g.workerId} token ${g.token} (floor ${g.floorMs}, bound ${held.boundMs}, lead ${held.leadMs} ms)`,
      );
      return true;
    }
    if (proc.alive) this.unanswered = { proc: proc.name, requestId: asked.requestId };
    return false;
  }

  // ---- WORKER.RENEW --------------------------------------------------------------------------

  /** One renewal; `late`: sent after the deadline passed (a revival). */
  private async renew(proc: SimProcess, h: Held, late: boolean): Promise<void> {
    const s = this.settings;
    const w = this.world;
    const sentMono = proc.monoMs();
    const sentWall = proc.wallMs();
    const bound = renewBound(h.boundMs, sentWall + h.leadMs, s.boundWindowMs);
    const args = ['WORKER.RENEW', s.app, String(h.workerId), String(h.token)];
    if (bound !== undefined) args.push('BOUND', String(bound));
    args.push(...this.named());
    const a = await this.send(proc, args);
    if (!proc.alive || this.held !== h || a === 'lost') return;
    if ('err' in a) {
      const code = this.refused(proc, 'WORKER.RENEW', a.err);
      // The cluster fenced this token: stop at once.
      if (['stale_token', 'not_held', 'lease_expired', 'lease_unhealthy'].includes(code)) {
        w.trace(`${proc.name} lost worker ${h.workerId} token ${h.token}: ${code}`);
        this.held = undefined;
      }
      return;
    }
    const rec = recordOf(a.v);
    const r =
      rec === undefined
        ? 'not a lease record'
        : (this.clusterProblem(rec) ??
          checkRenewReply(
            {
              app: s.app,
              workerId: h.workerId,
              token: h.token,
              ttlMs: s.ttlMs,
              ...(bound === undefined ? {} : { boundMs: bound }),
            },
            rec,
          ));
    if (typeof r === 'string') {
      w.fail('reply-mismatch', `${proc.name}: ${args.join(' ')} answered ${show(a.v)}: ${r}`);
      return;
    }
    const wrong = this.ledger.replyMismatch(
      'renew',
      s.app,
      h.workerId,
      { token: h.token, ...(bound === undefined ? {} : { boundMs: bound }) },
      { token: h.token, boundMs: r.boundMs },
    );
    if (wrong) {
      w.fail('reply-mismatch', `${proc.name}: ${args.join(' ')} answered ${show(a.v)}: ${wrong}`);
      return;
    }
    this.stats.renewals++;
    if (late) this.stats.revived++;
    h.deadline = deadlinesAfterAck(h.deadline, sentMono, sentWall, s.ttlMs);
    h.ackSentMono = Math.max(h.ackSentMono, sentMono);
    if (r.boundMs > h.boundMs) {
      h.boundMs = r.boundMs;
      h.gen.setCeiling(r.boundMs);
    }
    if (late) w.trace(`${proc.name} revived worker ${h.workerId} token ${h.token} by a late renewal`);
  }

  // ---- WORKER.RELEASE ------------------------------------------------------------------------

  private async release(proc: SimProcess, h: Held): Promise<void> {
    const s = this.settings;
    // Generation stops before the release is sent: nothing above LAST is ever issued.
    this.held = undefined;
    // LAST: the timestamp of the last ID issued (its tick's start, as IDs carry it), the next holder's floor.
    const last = h.lastId === undefined ? undefined : decode(h.lastId, s.layout).timestamp;
    const args = ['WORKER.RELEASE', s.app, String(h.workerId), String(h.token)];
    if (last !== undefined) args.push('LAST', String(last));
    args.push(...this.named());
    // A release without an answer is sent again (same token: a repeat is answered OK), a few times: a lost one leaves
    // the worker ID held, and this nodeId refused `lease_held`, until the lease expires.
    let a: Awaited<ReturnType<typeof this.send>> = 'lost';
    for (let attempt = 0; attempt < 4 && proc.alive && a === 'lost'; attempt++)
      a = await this.send(proc, args);
    if (!proc.alive || a === 'lost') return;
    if ('err' in a) {
      this.refused(proc, 'WORKER.RELEASE', a.err);
      return;
    }
    if (a.v.type !== 'simple' || a.v.value !== 'OK') {
      this.world.fail('reply-mismatch', `${proc.name}: ${args.join(' ')} answered ${show(a.v)}`);
      return;
    }
    const wrong = this.ledger.replyMismatch(
      'release',
      s.app,
      h.workerId,
      { token: h.token, ...(last === undefined ? {} : { lastTimestampMs: last }) },
      {},
    );
    if (wrong) {
      this.world.fail('reply-mismatch', `${proc.name}: ${args.join(' ')} answered OK: ${wrong}`);
      return;
    }
    this.stats.releases++;
    this.world.trace(`${proc.name} released worker ${h.workerId} token ${h.token} (last ${last})`);
  }

  // ---- the cluster -------------------------------------------------------------------------

  /** `CLUSTER uuid` once a record named the cluster. */
  private named(): string[] {
    return this.cluster === undefined ? [] : ['CLUSTER', this.cluster];
  }

  /**
   * Why a lease record's `cluster` is wrong (the pinned one, once pinned; the record pins the first one it names).
   * One cluster runs here: a record that names another, or names none once a command named ours, is a node's fault.
   */
  private clusterProblem(rec: Map<string, string>): string | undefined {
    const named = rec.get('cluster');
    if (this.cluster === undefined) {
      if (named !== undefined) this.cluster = named;
      return undefined;
    }
    return named === this.cluster
      ? undefined
      : `cluster is ${JSON.stringify(named)}, the pinned one is ${this.cluster}`;
  }

  // ---- the connection ------------------------------------------------------------------------

  /** The refusal's code (`lease_held`, `pool_exhausted`, ..., or the RESP error word), counted and traced. */
  private refused(proc: SimProcess, cmd: string, err: string): string {
    const m = /^(?:ERR|TRYAGAIN) ([a-z_]+):/.exec(err);
    const code = m ? (m[1] as string) : (err.split(' ')[0] as string);
    // One cluster runs here: a node that says it belongs to another misreports its identity.
    if (code === 'cluster_mismatch') this.world.fail('cluster-identity', `${proc.name} ${cmd}: -${err}`);
    this.stats.refused[code] = (this.stats.refused[code] ?? 0) + 1;
    this.world.trace(`${proc.name} ${cmd}: -${err.slice(0, 160)}`);
    return code;
  }

  private conn(proc: SimProcess, addr: string): RespConnection {
    let c = this.conns.get(addr);
    if (!c) {
      c = new RespConnection(this.world, this.respNet, proc, this.name, addr, this.settings.requestTimeoutMs);
      this.conns.set(addr, c);
    }
    return c;
  }

  /**
   * One command, following MOVED to the leader (up to 3 hops). CLUSTERDOWN, TRYAGAIN and a lost answer send the next
   * command to another member. A MOVED is never an answer: only the node that executed the command answers it.
   */
  private async send(proc: SimProcess, args: string[]): Promise<Answer> {
    const members = this.nodeIds();
    let target = this.target ?? respAddrOf(this.rng.pick(members));
    for (let hop = 0; ; hop++) {
      this.stats.commands++;
      if (args.includes('CLUSTER')) this.stats.named++;
      const [a] = await this.conn(proc, target).pipeline([args]);
      if (!proc.alive) return 'lost';
      const v = a?.outcome;
      if (v === undefined || typeof v === 'string') {
        this.target = undefined;
        return 'lost';
      }
      if (v.type !== 'error') {
        this.target = target;
        return { v };
      }
      const m = /^MOVED \d+ (\S+)$/.exec(v.value);
      if (m) {
        this.stats.moved++;
        target = m[1] as string;
        this.target = target;
        if (hop < 3) continue;
        return { err: v.value };
      }
      if (/^(CLUSTERDOWN|TRYAGAIN)/.test(v.value)) this.target = undefined;
      return { err: v.value };
    }
  }
}

/** An acquire reply's fields as the ledger reads a reply (the HTTP body's names). */
function ledgerFields(
  rec: Map<string, string>,
  g: { workerId: number; token: number; floorMs: number },
): Record<string, unknown> {
  return {
    app: rec.get('app'),
    workerId: g.workerId,
    nodeId: rec.get('node_id'),
    requestId: rec.get('request_id'),
    incarnation: rec.get('incarnation'),
    token: g.token,
    highWaterMs: g.floorMs,
  };
}
