// Server-side Snowflake clients (src/snowflakes, docs/snowflake-server.md): every node runs the production
// SnowflakeService (node-host.ts), leasing its own worker ID per key from the cluster through its own FloeClient
// (holder `floe-node-N`), and serves IDs over the production HTTP routes and RESP commands. These clients create a
// few keys with different layouts, then ask random nodes for IDs, one call at a time:
// - `http`: `POST /v1/snowflakes/:key/next` with `{count}` (JSON, decimal strings) or Leaf's
//   `GET /api/snowflake/get/:key[?count=n]` (plain text, one ID per line);
// - `resp`: `SNOWFLAKE.NEXT key [COUNT n]` (an integer, or an array of them), served by the node it is sent to.
//
// Oracles. On the node side (run.ts, through NodeHost's hooks) every batch a SnowflakeService issues goes into the
// run's IdOracle under the key's name, as the IDs of holder `<node process>/<token>`: unique within the key, one
// holder per worker ID at a time, timestamps above the worker's high-water mark at grant, later grants above earlier
// ones (the SDK clients' checks; a key is an ID namespace of its own, see id-oracle.ts). Here, on the client side,
// every reply is checked against its request: the key, exactly `count` IDs, decimal, strictly increasing, each one an
// ID some node issued for that key (so not another key's or another layout's), and none delivered twice (a reply
// replayed to a second caller is a duplicate for the application too).

import type { FetchLike } from '../../client/http-transport.js';
import type { Prng } from '../prng.js';
import type { SnowflakeClientKind, SnowflakeKeyConfig, SnowflakeWorkloadConfig } from './config.js';
import { callLeader } from './http-router.js';
import type { IdOracle } from './id-oracle.js';
import type { SimProcess } from './process.js';
import { RespConnection, type RespValue, show } from './resp-client.js';
import { type RespNet, respAddrOf } from './resp-link.js';
import type { World } from './world.js';

export interface SnowflakeStats {
  calls: number;
  ok: number;
  /** IDs delivered to the clients. */
  ids: number;
  respCalls: number;
  respOk: number;
  /** Leases the nodes' SnowflakeServices took, and how many of them were resumed from a node's cache. */
  leases: number;
  resumed: number;
  /** IDs the nodes issued (delivered or not). */
  issued: number;
}

export function zeroSnowflakeStats(): SnowflakeStats {
  return { calls: 0, ok: 0, ids: 0, respCalls: 0, respOk: 0, leases: 0, resumed: 0, issued: 0 };
}

const MAX_ID = (1n << 63n) - 1n;

/** The client side of the checks: what was delivered, per key. */
export class SnowflakeDeliveries {
  readonly stats = zeroSnowflakeStats();
  private readonly delivered = new Map<string, Map<bigint, string>>();
  /** Per key: which node issued each ID (recorded at the node, as its SnowflakeService returns them). */
  private readonly issuer = new Map<string, Map<bigint, number>>();

  constructor(
    private readonly world: World,
    private readonly oracle: IdOracle,
  ) {}

  /** Node `nodeId` issued `ids` of `key` (after the IdOracle took them). */
  issued(key: string, ids: readonly bigint[], nodeId: number): void {
    let m = this.issuer.get(key);
    if (!m) this.issuer.set(key, (m = new Map()));
    for (const id of ids) m.set(id, nodeId);
    this.stats.issued += ids.length;
  }

  /**
   * `ids` of `key` reached `who` as the answer to `what` (asked `count` of node `nodeId`, which serves from its own
   * worker ID): false (and the run failed) if wrong.
   */
  check(
    key: string,
    count: number,
    ids: readonly string[],
    who: string,
    what: string,
    nodeId: number,
  ): boolean {
    const w = this.world;
    if (ids.length !== count || !ids.every((s) => /^\d{1,19}$/.test(s))) {
      w.fail('reply-mismatch', `${who}: ${what} answered ${JSON.stringify(ids).slice(0, 300)}`);
      return false;
    }
    let m = this.delivered.get(key);
    if (!m) this.delivered.set(key, (m = new Map()));
    let prev = -1n;
    for (const s of ids) {
      const id = BigInt(s);
      if (id <= prev || id > MAX_ID) {
        w.fail('reply-mismatch', `${who}: ${what} answered IDs out of order or range (${prev}, then ${id})`);
        return false;
      }
      prev = id;
      const by = this.issuer.get(key)?.get(id);
      if (by === undefined || !this.oracle.wasIssued(key, id)) {
        w.fail('reply-mismatch', `${who}: ${what} answered ID ${id}, which no node issued for ${key}`);
        return false;
      }
      if (by !== nodeId) {
        w.fail('reply-mismatch', `${who}: ${what} answered ID ${id}, which n${by} issued, not n${nodeId}`);
        return false;
      }
      const before = m.get(id);
      if (before !== undefined) {
        w.fail('duplicate-id', `${key}: ID ${id} delivered to ${who} (${what}) and before to ${before}`);
        return false;
      }
    }
    // Recorded only once the whole reply passed (a refused reply delivered nothing).
    for (const s of ids) m.set(BigInt(s), who);
    this.stats.ids += ids.length;
    return true;
  }
}

/** Creates every key (retrying until the cluster answers). */
export async function createSnowflakeKeys(
  proc: SimProcess,
  fetch: FetchLike,
  endpoints: string[],
  cfg: SnowflakeWorkloadConfig,
  rng: Prng,
  world: World,
): Promise<void> {
  for (const k of cfg.keys) {
    while (proc.alive) {
      const a = await callLeader(fetch, rng.pick(endpoints), 'POST', '/v1/snowflakes', {
        key: k.key,
        layout: k.layout,
        ttlMs: k.ttlMs,
      });
      if (typeof a !== 'string' && (a.status === 200 || a.status === 201)) break;
      if (typeof a !== 'string' && a.status !== 503 && a.status !== 500)
        world.trace(
          `snowflake key ${k.key}: create answered ${a.status} ${JSON.stringify(a.body).slice(0, 160)}`,
        );
      await proc.sleep(100);
    }
    world.trace(`snowflake key ${k.key} (${k.layout}, TTL ${k.ttlMs} ms) exists`);
  }
  const bits = cfg.poolBits;
  if (bits === undefined) return;
  for (const k of cfg.keys) {
    if (k.layout === 'twitter') continue; // its pool keeps the datacenter bits of its layout
    while (proc.alive) {
      const a = await callLeader(fetch, rng.pick(endpoints), 'PUT', `/v1/apps/${k.key}/pool`, { bits });
      if (typeof a !== 'string' && a.status === 200) break;
      await proc.sleep(100);
    }
    world.trace(`snowflake key ${k.key}: pool of ${bits} bits`);
  }
}

/** One snowflake client process: one call at a time, until stopped. */
export class SnowflakeClient {
  private stopped = false;
  /** Global µs of this client's latest call answered with IDs (liveness after healing). */
  lastOkUs = -1;
  private readonly respConns = new Map<string, RespConnection>();

  constructor(
    private readonly world: World,
    readonly name: string,
    readonly proc: SimProcess,
    private readonly fetch: FetchLike,
    private readonly cfg: SnowflakeWorkloadConfig,
    private readonly deliveries: SnowflakeDeliveries,
    private readonly rng: Prng,
    readonly kind: SnowflakeClientKind,
    private readonly respNet: RespNet | undefined,
    /** The members a client may call (each at `nN:8080` over HTTP, `nN:6379` over RESP). */
    private readonly nodeIds: () => number[],
  ) {}

  stop(): void {
    this.stopped = true;
  }

  async run(): Promise<void> {
    while (!this.stopped && this.proc.alive) {
      await this.proc.sleep(this.rng.range(this.cfg.thinkMs[0], this.cfg.thinkMs[1]));
      if (this.stopped || !this.proc.alive) return;
      await this.one();
    }
  }

  /** One call on a random node; true when it was answered with IDs. */
  async one(): Promise<boolean> {
    const k = this.rng.pick(this.cfg.keys) as SnowflakeKeyConfig;
    // Mostly small batches, sometimes the largest (a sonyflake tick holds 256 IDs: they borrow ticks ahead).
    const count = this.rng.chance(0.5) ? 1 : 1 + this.rng.int(this.cfg.maxCount);
    this.deliveries.stats.calls++;
    const ok =
      this.kind === 'resp' && this.respNet
        ? await this.resp(k.key, count)
        : this.rng.chance(0.5)
          ? await this.json(k.key, count)
          : await this.leaf(k.key, count);
    if (ok) {
      this.deliveries.stats.ok++;
      this.lastOkUs = this.world.sched.nowUs;
    }
    return ok;
  }

  /** A running member's base URL, and its node ID. */
  private endpoint(): [string, number] {
    const id = this.rng.pick(this.nodeIds());
    return [`http://n${id}:8080`, id];
  }

  private async json(key: string, count: number): Promise<boolean> {
    const [base, node] = this.endpoint();
    const what = `POST /v1/snowflakes/${key}/next {count: ${count}}`;
    const a = await callLeader(this.fetch, base, 'POST', `/v1/snowflakes/${key}/next`, { count });
    if (typeof a === 'string') {
      this.world.trace(`${this.name} ${what}: ${a}`);
      return false;
    }
    if (a.status !== 200) {
      this.world.trace(`${this.name} ${what}: ${a.status} ${JSON.stringify(a.body).slice(0, 160)}`);
      return false;
    }
    const b = a.body;
    if (b.key !== key || !Array.isArray(b.ids)) {
      this.world.fail('reply-mismatch', `${this.name}: ${what} answered ${JSON.stringify(b).slice(0, 300)}`);
      return false;
    }
    return this.got(key, count, b.ids as string[], what, node);
  }

  private async leaf(key: string, count: number): Promise<boolean> {
    const plain = count === 1 && this.rng.chance(0.5);
    const path = `/api/snowflake/get/${key}${plain ? '' : `?count=${count}`}`;
    const [base, node] = this.endpoint();
    let res: Awaited<ReturnType<FetchLike>>;
    try {
      res = await this.fetch(`${base}${path}`, {
        method: 'GET',
        headers: {},
        redirect: 'manual',
        signal: NEVER_ABORTED,
      });
    } catch (err) {
      this.world.trace(`${this.name} GET ${path}: ${String(err).slice(0, 120)}`);
      return false;
    }
    const text = await res.text();
    if (res.status !== 200) {
      this.world.trace(`${this.name} GET ${path}: ${res.status} ${text.slice(0, 160)}`);
      return false;
    }
    return this.got(key, count, text.split('\n'), `GET ${path}`, node);
  }

  private async resp(key: string, count: number): Promise<boolean> {
    const st = this.deliveries.stats;
    const cmd =
      count === 1 && this.rng.chance(0.5)
        ? ['SNOWFLAKE.NEXT', key]
        : ['SNOWFLAKE.NEXT', key, 'COUNT', String(count)];
    const node = this.rng.pick(this.nodeIds());
    const addr = respAddrOf(node);
    let c = this.respConns.get(addr);
    if (!c) {
      c = new RespConnection(this.world, this.respNet as RespNet, this.proc, this.name, addr, 1000);
      this.respConns.set(addr, c);
    }
    st.respCalls++;
    const [a] = await c.pipeline([cmd]);
    const v = a?.outcome;
    const what = `${cmd.join(' ')} on ${addr}`;
    if (v === undefined || typeof v === 'string') {
      this.world.trace(`${this.name} ${what}: ${v ?? 'no answer'}`);
      return false;
    }
    if (v.type === 'error') {
      this.world.trace(`${this.name} ${what}: -${v.value.slice(0, 160)}`);
      return false;
    }
    let ids: string[];
    if (cmd.length === 2) {
      if (v.type !== 'int') return this.mismatch(what, v);
      ids = [String(v.value)];
    } else {
      if (v.type !== 'array' || v.value === null || !v.value.every((x) => x.type === 'int'))
        return this.mismatch(what, v);
      ids = v.value.map((x) => String((x as { value: bigint }).value));
    }
    if (!this.got(key, count, ids, what, node)) return false;
    st.respOk++;
    return true;
  }

  private mismatch(what: string, v: RespValue): false {
    this.world.fail('reply-mismatch', `${this.name}: ${what} answered ${show(v).slice(0, 300)}`);
    return false;
  }

  private got(key: string, count: number, ids: string[], what: string, node: number): boolean {
    if (!this.deliveries.check(key, count, ids, this.name, what, node)) return false;
    this.world.trace(`${this.name} ${what} -> ${ids[0]}..${ids[ids.length - 1]}`);
    return true;
  }
}

const NEVER_ABORTED = new AbortController().signal;
