// The ID oracle: checks every ID every simulated client issues, in global simulated time.
//
// - Unique: no ID is issued twice, by anyone, within one app. An app is one ID namespace: the SDK clients' app, or
//   one server-side Snowflake key (each key is its own lease pool with its own layout; two keys' IDs may be equal,
//   as two apps' may, and are told apart by their key). Holders are SDK client processes and node processes
//   (`floe-node-N`'s SnowflakeService, one holder per node process and lease token).
// - One holder at a time (P1 of docs/decisions/0002-lease-safety.md): a holder (one process
//   incarnation with one lease token) uses a worker ID from its first to its last issued ID, in
//   global time; two holders' intervals of one worker ID never overlap. IDs are recorded as they
//   are issued, in-process, so the last use of a crashed client is exact (no buffered tail to lose,
//   unlike a chaos run, which must take the kill time as the end).
// - Above the floor: an ID's timestamp is above its worker's high-water mark at grant time, as
//   the replicated state had it (tracked here from the lease events every replica emits).
// - Disjoint ID spaces (P2): a later grant of a worker ID issues only timestamps above every
//   timestamp an earlier grant of it issued.

import { decode, type Layout, MAX_ID, resolveLayout } from '../../id/index.js';
import type { LeaseEvent } from '../../state/leases/types.js';
import type { LeaseLedger } from './lease-ledger.js';
import type { Machine } from './process.js';
import type { World } from './world.js';

interface Holder {
  key: string;
  /** When the holder's process asked for the lease (its deadline counts from then), and its machine (for the documented P1 exemption). */
  leasedAtUs: number;
  machine: Machine | undefined;
  /** Resumed from a lease cache (not granted to this process), when, and when the cluster granted its token. */
  resumed: boolean;
  /**
   * Resumed on its cached monotonic deadline (the SDK's trusted branch: the machine's clock, declared system-wide, on
   * the boot that wrote the record) as well as the cached wall deadline, which it then keeps without a margin.
   */
  resumedOnMono: boolean;
  gotAtUs: number;
  grantedAtUs: number;
  worker: string;
  token: number;
  first: number;
  last: number;
  minTs: number;
  maxTs: number;
  count: number;
  /**
   * The latest `last` of the worker's other holders when h's interval was last checked against them all (-Infinity
   * if none): while h stays the worker's last issuer, no other holder's interval has changed since.
   */
  othersLastUs: number;
}

export interface OracleStats {
  ids: number;
  holders: number;
  grants: number;
  /** Worker IDs that were granted to more than one token (changed hands). */
  reusedWorkers: number;
  /** Overlaps in time outside P1's failure model (a suspend hidden by a backward wall step): P2 still checked. */
  exemptOverlaps: number;
}

export class IdOracle {
  /** Per app: every ID issued. */
  private readonly ids = new Map<string, IdSet>();
  private readonly holders = new Map<string, Holder>();
  private readonly byWorker = new Map<string, Holder[]>();
  /** app/worker → high-water mark after its last release or expiry. */
  private readonly hwFree = new Map<string, number>();
  /** app/worker/token → high-water mark when it was granted. */
  private readonly floorAtGrant = new Map<string, number>();
  private readonly grantsPerWorker = new Map<string, number>();
  private readonly seenEvents = new Set<string>();
  private grants = 0;
  private readonly lastIssuer = new Map<string, Holder>();
  private readonly maxToken = new Map<string, number>();
  private exemptOverlaps = 0;
  private readonly leasedAt = new Map<
    string,
    { atUs: number; machine: Machine; resumed: boolean; resumedOnMono: boolean; gotAtUs: number }
  >();
  /** Global µs at which each worker's token was granted ("app/worker/token"). */
  private readonly grantedAt = new Map<string, number>();
  /** The keys of the last call's holder and worker (a client issues its IDs in bursts under one lease). */
  private keys: IssueKeys | undefined;

  /** What the replicated lease state committed (run.ts sets it): a lease taken from a reply must be one of its grants. */
  ledger: LeaseLedger | undefined;

  constructor(private readonly world: World) {}

  /** A lease event applied on some replica (each is taken once, by log index). */
  leaseEvent(e: LeaseEvent): void {
    if (e.type === 'restored' || e.type === 'renewed') return;
    const key = `${e.index}/${e.type}/${e.app}/${e.workerId}`;
    if (this.seenEvents.has(key)) return;
    this.seenEvents.add(key);
    const w = `${e.app}/${e.workerId}`;
    if (e.type === 'granted') {
      this.grants++;
      this.grantsPerWorker.set(w, (this.grantsPerWorker.get(w) ?? 0) + 1);
      this.floorAtGrant.set(`${w}/${e.token}`, this.hwFree.get(w) ?? 0);
      this.grantedAt.set(`${w}/${e.token}`, this.world.sched.nowUs);
      this.world.trace(
        `oracle: ${w} granted token ${e.token} to ${e.nodeId} (floor ${this.hwFree.get(w) ?? 0})`,
      );
    } else {
      this.hwFree.set(w, Math.max(this.hwFree.get(w) ?? 0, e.highWaterMs));
      this.world.trace(`oracle: ${w} token ${e.token} ${e.type} (high-water ${e.highWaterMs})`);
    }
  }

  /**
   * `holderName` (a process incarnation, on `machine`) got lease `token` at global time `atUs` (or resumed it;
   * `resumedOnMono`: on the cached monotonic deadline, see `Holder.resumedOnMono`).
   */
  leased(
    holderName: string,
    token: number,
    machine: Machine,
    atUs: number,
    resumed = false,
    resumedOnMono = false,
  ): void {
    this.leasedAt.set(`${holderName}/${token}`, {
      atUs,
      machine,
      resumed,
      resumedOnMono: resumed && resumedOnMono,
      gotAtUs: this.world.sched.nowUs,
    });
    // A lease taken from a reply is the grant committed for one of the holder's own acquires (a swapped reply the
    // client took for its own is caught here, before any ID is issued under it).
    const wrong = resumed ? undefined : this.ledger?.accepted(holderName, token);
    if (wrong) this.world.fail('reply-mismatch', wrong);
  }

  /** `holder` (process incarnation) issued `id` under lease (app, workerId, token) at global time `atUs`. */
  issued(
    holderName: string,
    app: string,
    workerId: number,
    token: number,
    layout: Layout,
    id: bigint,
    atUs: number,
  ): void {
    let k = this.keys;
    if (
      k === undefined ||
      k.holderName !== holderName ||
      k.app !== app ||
      k.workerId !== workerId ||
      k.token !== token ||
      k.layout !== layout
    ) {
      const w = `${app}/${workerId}`;
      k = {
        holderName,
        app,
        workerId,
        token,
        layout,
        bits: layoutBits(layout),
        w,
        floorKey: `${w}/${token}`,
        key: `${holderName}/${token}`,
        ids: this.idsOf(app),
      };
      this.keys = k;
    }
    const w = k.w;
    if (!k.ids.add(id)) {
      this.world.fail('duplicate-id', `ID ${id} issued again by ${holderName} (worker ${w}, token ${token})`);
      return;
    }
    const parts = decodeFast(id, layout, k.bits);
    const worker = parts.worker;
    if (worker !== workerId) {
      this.world.fail(
        'harness',
        `ID ${id} of ${holderName} decodes to worker ${worker}, its lease is ${workerId}`,
      );
      return;
    }
    const floor = this.floorAtGrant.get(k.floorKey);
    if (floor === undefined) {
      this.world.fail(
        'reply-mismatch',
        `${holderName} issues IDs under token ${token} of ${w}, which was never granted`,
      );
      return;
    }
    if (!(parts.timestamp > floor)) {
      this.world.fail(
        'below-floor',
        `${holderName} issued ID ${id} with timestamp ${parts.timestamp}, not above the high-water mark ${floor} of ${w} at grant (token ${token})`,
      );
      return;
    }
    const key = k.key;
    let h = this.holders.get(key);
    if (!h) {
      const l = this.leasedAt.get(key);
      h = {
        key,
        leasedAtUs: l?.atUs ?? atUs,
        machine: l?.machine,
        resumed: l?.resumed ?? false,
        resumedOnMono: l?.resumedOnMono ?? false,
        gotAtUs: l?.gotAtUs ?? atUs,
        grantedAtUs: this.grantedAt.get(k.floorKey) ?? 0,
        worker: w,
        token,
        first: atUs,
        last: atUs,
        minTs: parts.timestamp,
        maxTs: parts.timestamp,
        count: 0,
        othersLastUs: Number.NEGATIVE_INFINITY,
      };
      this.holders.set(key, h);
      let list = this.byWorker.get(w);
      if (!list) this.byWorker.set(w, (list = []));
      list.push(h);
    }
    // Fast path, sound in any order of recording times: h issued the worker's previous ID too (so no other holder's
    // interval changed since h was last checked against all of them), holds its newest token, stays above its own
    // first timestamp (so neither P2 comparison can change), and every other holder's last use was before h's first
    // (so stretching h's end later cannot meet any of them). Recording times are each process's `effectiveUs`, which
    // a busy wait puts in the future: an older holder's future-stamped use can lie after a newer holder's first ID
    // (audit of issue 10: the fast path once skipped the check then, and a later use of h stretched over it unseen).
    const fast =
      this.lastIssuer.get(w) === h &&
      h.othersLastUs < h.first &&
      h.token >= (this.maxToken.get(w) ?? 0) &&
      parts.timestamp >= h.minTs;
    h.last = atUs;
    h.count++;
    if (parts.timestamp < h.minTs) h.minTs = parts.timestamp;
    if (parts.timestamp > h.maxTs) h.maxTs = parts.timestamp;
    if (fast) return;
    this.lastIssuer.set(w, h);
    if (h.token > (this.maxToken.get(w) ?? 0)) this.maxToken.set(w, h.token);
    let othersLastUs = Number.NEGATIVE_INFINITY;
    for (const g of this.byWorker.get(w) ?? []) {
      if (g === h) continue;
      if (g.last > othersLastUs) othersLastUs = g.last;
      if (g.first <= h.last && h.first <= g.last && !this.exempt(g, h)) {
        this.world.fail(
          'lease-overlap',
          `worker ${w} used by ${g.key} until t=${fmt(g.last)} and by ${h.key} from t=${fmt(h.first)} (global time)`,
        );
        return;
      }
      // A later grant must start above everything an earlier one issued (and vice versa).
      if ((g.token < h.token && !(g.maxTs < h.minTs)) || (g.token > h.token && !(h.maxTs < g.minTs))) {
        this.world.fail(
          'timestamp-ranges-overlap',
          `worker ${w}: ${g.key} issued timestamps ${g.minTs}..${g.maxTs}, ${h.key} ${h.minTs}..${h.maxTs}`,
        );
        return;
      }
    }
    h.othersLastUs = othersLastUs;
  }

  private idsOf(app: string): IdSet {
    let s = this.ids.get(app);
    if (!s) this.ids.set(app, (s = new IdSet()));
    return s;
  }

  /** Global µs of the last ID process `holderName` issued, under any lease (-1: none). */
  lastIssuedBy(holderName: string): number {
    const prefix = `${holderName}/`;
    let t = -1;
    for (const h of this.holders.values()) if (h.last > t && h.key.startsWith(prefix)) t = h.last;
    return t;
  }

  /** Whether `id` of `app` was issued (recorded by `issued`). */
  wasIssued(app: string, id: bigint): boolean {
    return this.ids.get(app)?.has(id) ?? false;
  }

  /** A P1 overlap the documented failure model allows (counted and traced once per pair). */
  private readonly exemptPairs = new Set<string>();
  private exempt(g: Holder, h: Holder): boolean {
    // Only as long as a hidden suspend explains it (its length in the machine's clock, up to 10% off in global
    // time): a longer overlap is a violation all the same.
    // Only the older lease can outstay its deadline, and only by what its own machine hid: the overlap is how long
    // it went on after the newer holder began (re-review: a nested interval measured 0, and the newer holder's
    // suspend excused the older one's overstay).
    const [older, newer] = g.token < h.token || (g.token === h.token && g.first <= h.first) ? [g, h] : [h, g];
    const overlapUs = older.last - newer.first;
    // A process that resumed the lease from a cache derived its deadlines from its predecessor's wall-clock deadline:
    // a backward wall step between the grant and the resume lets it run that much past it (docs/client.md, "Clocks":
    // P1 broken for at most the step). A step after the resume is caught by its monotonic deadline: no excuse.
    // One resumed on its cached monotonic deadline is held to it whatever the wall clock did (no excuse for a step),
    // but that deadline, on a clock that stops in a suspend, dates from its predecessor's last renewal: a suspend since
    // the grant that a backward step hid from the cached wall deadline is what may excuse it (docs/client.md, "Clocks").
    const steppedBackUs =
      older.resumed && !older.resumedOnMono
        ? (older.machine?.wallBackUsBetween(older.grantedAtUs, older.gotAtUs) ?? 0)
        : 0;
    const hiddenSinceUs = older.resumedOnMono ? older.grantedAtUs : older.leasedAtUs;
    const hiddenUs = Math.max(older.machine?.suspendHiddenUsSince(hiddenSinceUs) ?? 0, steppedBackUs);
    if (!(hiddenUs > 0 && 1.1 * hiddenUs >= overlapUs)) return false;
    const hidden = older;
    const pair = `${g.key}|${h.key}`;
    if (!this.exemptPairs.has(pair)) {
      this.exemptPairs.add(pair);
      this.exemptOverlaps++;
      this.world.trace(
        `oracle: ${g.key} and ${h.key} overlap on ${h.worker} while ${hidden.key}'s machine hid a suspend, or its resumed deadline, with a backward wall step (outside P1, documented); IDs still checked`,
      );
    }
    return true;
  }

  get stats(): OracleStats {
    let reused = 0;
    for (const n of this.grantsPerWorker.values()) if (n > 1) reused++;
    let ids = 0;
    for (const s of this.ids.values()) ids += s.size;
    return {
      ids,
      holders: this.holders.size,
      grants: this.grants,
      reusedWorkers: reused,
      exemptOverlaps: this.exemptOverlaps,
    };
  }
}

interface IssueKeys {
  holderName: string;
  app: string;
  workerId: number;
  token: number;
  layout: Layout;
  bits: LayoutBits;
  w: string;
  floorKey: string;
  key: string;
  ids: IdSet;
}

const LOW_BITS = 20;
const LOW_SHIFT = BigInt(LOW_BITS);

/**
 * A set of bigint IDs, exact for any bigint: one set of the low 20 bits (small integers) per value of the bits above
 * them, the last one used kept at hand. A client issues its IDs in bursts that share the high bits, so an ID costs a
 * small integer's hash in a small set, not a bigint's in a set of every ID of the run (about 3% of a seed's CPU, most
 * of it cache misses), and no bigint is kept alive. IDs outside 0..MAX_ID (never valid; `decode` refuses them) are kept
 * as they are, in a set of their own.
 */
export class IdSet {
  private readonly byHigh = new Map<number, Set<number>>();
  private readonly odd = new Set<bigint>();
  private lastHigh = -1;
  private last: Set<number> | undefined;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Adds `id`; false if it was in the set already. */
  add(id: bigint): boolean {
    if (id < 0n || id > MAX_ID) {
      const n = this.odd.size;
      if (this.odd.add(id).size === n) return false;
      this.count++;
      return true;
    }
    const high = Number(id >> LOW_SHIFT);
    let lows = high === this.lastHigh ? this.last : this.byHigh.get(high);
    if (lows === undefined) this.byHigh.set(high, (lows = new Set()));
    this.lastHigh = high;
    this.last = lows;
    const n = lows.size;
    if (lows.add(Number(BigInt.asUintN(LOW_BITS, id))).size === n) return false;
    this.count++;
    return true;
  }

  has(id: bigint): boolean {
    if (id < 0n || id > MAX_ID) return this.odd.has(id);
    return this.byHigh.get(Number(id >> LOW_SHIFT))?.has(Number(BigInt.asUintN(LOW_BITS, id))) ?? false;
  }
}

/** A layout's fields as bigint shifts and masks, for the oracle's own decoding of every ID (see decodeFast). */
interface LayoutBits {
  timestampShift: bigint;
  epochMs: number;
  unitMs: number;
  workerShift: bigint;
  workerMask: bigint;
  workerBits: number;
  datacenterShift: bigint;
  datacenterMask: bigint;
  datacenterBits: number;
}

const bitsByLayout = new WeakMap<Layout, LayoutBits>();

function layoutBits(layout: Layout): LayoutBits {
  let b = bitsByLayout.get(layout);
  if (b === undefined) {
    const l = resolveLayout(layout);
    b = {
      timestampShift: BigInt(l.timestampShift),
      epochMs: l.epochMs,
      unitMs: l.unitMs,
      workerShift: BigInt(l.workerShift),
      workerMask: (1n << BigInt(l.workerBits)) - 1n,
      workerBits: l.workerBits,
      datacenterShift: BigInt(l.datacenterShift),
      datacenterMask: (1n << BigInt(l.datacenterBits)) - 1n,
      datacenterBits: l.datacenterBits,
    };
    bitsByLayout.set(layout, b);
  }
  return b;
}

/**
 * An ID's timestamp and its worker ID as the oracle counts it (datacenter bits, if any, above the worker bits), as
 * `decode` (src/id) computes them, without its Date and its other fields: the oracle decodes every ID a run issues.
 * An ID `decode` refuses (negative, above MAX_ID) goes to `decode`, which throws as before.
 */
function decodeFast(id: bigint, layout: Layout, b: LayoutBits): { timestamp: number; worker: number } {
  if (id < 0n || id > MAX_ID) decode(id, layout);
  const timestamp = b.epochMs + Number(id >> b.timestampShift) * b.unitMs;
  const worker = b.workerBits === 0 ? 0 : Number((id >> b.workerShift) & b.workerMask);
  if (b.datacenterBits === 0) return { timestamp, worker };
  const datacenter = Number((id >> b.datacenterShift) & b.datacenterMask);
  return { timestamp, worker: (datacenter << b.workerBits) | worker };
}

function fmt(us: number): string {
  return `${(us / 1000).toFixed(3)}ms`;
}
