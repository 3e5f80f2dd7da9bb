// Sequence clients over the production HTTP routes (src/server/http-sequences.ts): a strict-mode and a
// node-mode sequence, INCRBY (`POST /v1/sequences/:key/incr`), Leaf's `GET /api/segment/get/:key?count=n`
// and segment allocation (`POST /v1/sequences/:key/alloc`, SEQ.ALLOC), under the run's crashes, partitions
// and leadership changes.
//
// The oracle (SeqOracle), in global simulated time:
// - every value any client was given for a key is unique (INCRBY values and allocated segments alike);
// - strict mode, real-time order: an INCRBY sent after another one's reply arrived gets larger values
//   (checked over the recorded (invoke, return, first, last) of every completed call, `checkOrder`);
// - every reply answers its request (key, count; a range of exactly `count` values).
// A call whose answer is lost changes nothing here: values nobody saw cannot be issued twice.
//
// Each client speaks one way (SeqWorkloadConfig.kinds): `http` as above; `resp` the same calls over RESP
// (INCR / INCRBY / SEQ.ALLOC, sometimes pipelined, following MOVED) through the production connection code
// (resp-link.ts, resp-client.ts), its strict INCRs in the same real-time order check; `sdk` the SDK's
// FloeSequence (`client.sequence(key)`, segments over HTTP in a double buffer), whose promise is narrower:
// values unique across everybody and increasing within the object (one per key and client process), no
// order across processes — exactly what is checked.

import { FloeClient } from '../../client/floe-client.js';
import type { FetchLike } from '../../client/http-transport.js';
import type { FloeSequence } from '../../client/sequence.js';
import type { Prng } from '../prng.js';
import type { SeqClientKind, SeqWorkloadConfig } from './config.js';
import { callLeader } from './http-router.js';
import { errText } from './node-host.js';
import { type SimProcess, startProcess } from './process.js';
import { RespConnection, type RespValue, show } from './resp-client.js';
import { type RespNet, respAddrOf } from './resp-link.js';
import type { World } from './world.js';

export const STRICT_KEY = 'seq-strict';
export const NODE_KEY = 'seq-node';

/** One completed strict-mode INCRBY: sent at `invokeUs`, answered at `returnUs` with [first, last]. */
export interface StrictCall {
  client: string;
  invokeUs: number;
  returnUs: number;
  first: bigint;
  last: bigint;
}

export interface SeqStats {
  calls: number;
  ok: number;
  values: number;
  segments: number;
  /** RESP commands sent (pipelined ones each), and those answered with values. */
  respCalls: number;
  respOk: number;
  /** MOVED replies followed or noted. */
  respMoved: number;
  /** Values the SDK's FloeSequence handed out. */
  sdkValues: number;
  /** Sequence client processes killed (`clientCrash`), each followed by a new process. */
  crashes: number;
}

/** What every sequence client was given, checked as it arrives (uniqueness) and at the end (order). */
export class SeqOracle {
  readonly stats: SeqStats = {
    calls: 0,
    ok: 0,
    values: 0,
    segments: 0,
    respCalls: 0,
    respOk: 0,
    respMoved: 0,
    sdkValues: 0,
    crashes: 0,
  };
  readonly strict: StrictCall[] = [];
  /** Per key: every value handed out, and who got it. */
  private readonly given = new Map<string, Map<bigint, string>>();

  constructor(private readonly world: World) {}

  /** Values [first, last] of `key` reached `who`; a value seen before is a duplicate. */
  values(key: string, first: bigint, last: bigint, who: string): void {
    let m = this.given.get(key);
    if (!m) {
      m = new Map();
      this.given.set(key, m);
    }
    for (let v = first; v <= last; v++) {
      const before = m.get(v);
      if (before !== undefined) {
        this.world.fail(
          'duplicate-id',
          `sequence ${key}: value ${v} given to ${who} and before to ${before}`,
        );
        return;
      }
      m.set(v, who);
      this.stats.values++;
    }
  }

  /** Undefined when strict calls respect real time, else what broke it. */
  checkOrder(): string | undefined {
    const byReturn = [...this.strict].sort((a, b) => a.returnUs - b.returnUs);
    const byInvoke = [...this.strict].sort((a, b) => a.invokeUs - b.invokeUs);
    let j = 0;
    let max: StrictCall | undefined;
    for (const c of byInvoke) {
      while (j < byReturn.length && (byReturn[j] as StrictCall).returnUs < c.invokeUs) {
        const r = byReturn[j++] as StrictCall;
        if (!max || r.last > max.last) max = r;
      }
      if (max && c.first <= max.last) {
        return (
          `strict ${STRICT_KEY}: ${c.client}'s call sent at ${c.invokeUs} µs got ${c.first}..${c.last}, ` +
          `but ${max.client}'s call answered at ${max.returnUs} µs (before it was sent) got ${max.first}..${max.last}`
        );
      }
    }
    return undefined;
  }
}

/** Creates both sequences, retrying until the cluster answers. */
export async function createSequences(
  proc: SimProcess,
  fetch: FetchLike,
  endpoints: string[],
  cfg: SeqWorkloadConfig,
  rng: Prng,
  world: World,
): Promise<void> {
  for (const [key, mode] of [
    [STRICT_KEY, 'strict'],
    [NODE_KEY, 'node'],
  ] as const) {
    while (proc.alive) {
      const a = await callLeader(fetch, rng.pick(endpoints), 'POST', '/v1/sequences', {
        key,
        mode,
        step: cfg.step,
        minStep: cfg.step,
        maxStep: cfg.step * 4,
      });
      if (typeof a !== 'string' && (a.status === 200 || a.status === 201)) break;
      await proc.sleep(100);
    }
    world.trace(`sequence ${key} (${mode}, step ${cfg.step}) exists`);
  }
}

/** One sequence client process: one call at a time, until stopped. */
export class SeqClient {
  private stopped = false;
  /** The workload has started (the sequences exist): only then may the process crash and restart. */
  private started = false;
  private incarnations = 1;
  private fetch: FetchLike;
  /** Global µs of this client's latest successful strict call (liveness after healing). */
  lastStrictOkUs = -1;

  constructor(
    private readonly world: World,
    readonly name: string,
    /** The current process: a crash kills it, `restart` starts the next one on the same machine. */
    public proc: SimProcess,
    private readonly fetchFor: (proc: SimProcess) => FetchLike,
    private readonly endpoints: string[],
    private readonly cfg: SeqWorkloadConfig,
    private readonly oracle: SeqOracle,
    private readonly rng: Prng,
    readonly kind: SeqClientKind = 'http',
    /** The RESP network (`resp` clients). */
    private readonly respNet?: RespNet,
    /** The members a RESP client may dial: the operator keeps its list current as members are replaced (dialled first; MOVED leads on). */
    private readonly nodeIds: () => number[] = () => [],
  ) {
    this.fetch = fetchFor(proc);
  }

  stop(): void {
    this.stopped = true;
  }

  /** Running, and past the creation of the sequences (a crash before would leave nobody to create them). */
  get crashable(): boolean {
    return this.started && this.proc.alive && !this.stopped;
  }

  /**
   * The process dies mid-call: a call in flight never returns (the values it was given are a gap, as in production),
   * and what the process held goes with it: its RESP connections and its FloeSequence objects with their buffers.
   */
  crash(): void {
    if (!this.proc.alive) return;
    this.world.trace(`${this.proc.name} crash`);
    this.proc.kill();
    this.oracle.stats.crashes++;
    this.respConns.clear();
    this.respTarget = undefined;
    this.sdk = undefined;
    this.sdkSeqs.clear();
    this.sdkLast.clear();
  }

  /** A new process of this client on the same machine, which takes up the workload (after a crash). */
  restart(): void {
    if (this.proc.alive) return;
    const w = this.world;
    const proc = startProcess(w, this.proc.machine, this.name, ++this.incarnations);
    this.proc = proc;
    this.fetch = this.fetchFor(proc);
    w.trace(`${proc.name} start`);
    if (this.started) w.sched.after(0, proc, 'seq-start', () => void this.run());
  }

  async run(): Promise<void> {
    this.started = true;
    // This process's loop: after a crash it never wakes again, and the next process runs its own.
    const proc = this.proc;
    while (!this.stopped && proc.alive) {
      await proc.sleep(this.rng.range(this.cfg.thinkMs[0], this.cfg.thinkMs[1]));
      if (this.stopped || !proc.alive) return;
      await this.one();
    }
  }

  /** One call; true when it succeeded. */
  async one(forceStrict = false): Promise<boolean> {
    if (this.kind === 'sdk') return this.sdkNext(this.rng.chance(0.5) ? STRICT_KEY : NODE_KEY);
    const r = forceStrict ? 0 : this.rng.int(100);
    const count = 1 + this.rng.int(this.cfg.maxCount);
    if (this.kind === 'resp') {
      if (r < 75) return this.respIncr(r < 45 ? STRICT_KEY : NODE_KEY, count);
      return this.respAlloc(this.rng.chance(0.5) ? STRICT_KEY : NODE_KEY, count);
    }
    if (r < 45) return this.incr(STRICT_KEY, count, this.rng.chance(0.2));
    if (r < 75) return this.incr(NODE_KEY, count, false);
    return this.alloc(this.rng.chance(0.5) ? STRICT_KEY : NODE_KEY, count);
  }

  private endpoint(): string {
    return this.endpoints[this.rng.int(this.endpoints.length)] as string;
  }

  private mismatch(what: string, body: unknown): false {
    this.world.fail('reply-mismatch', `${this.name}: ${what} answered ${JSON.stringify(body)}`);
    return false;
  }

  /** INCRBY `count` through the JSON route, or through Leaf's text route (`leaf`). */
  private async incr(key: string, count: number, leaf: boolean): Promise<boolean> {
    const o = this.oracle;
    o.stats.calls++;
    const invokeUs = this.proc.effectiveUs;
    let first: bigint;
    let last: bigint;
    if (leaf) {
      const res = await this.raw('GET', `/api/segment/get/${key}?count=${count}`);
      if (res === undefined || res.status !== 200) return false;
      const lines = res.text.split('\n');
      if (lines.length !== count || !lines.every((l) => /^\d+$/.test(l)))
        return this.mismatch(`leaf get ${key} count=${count}`, res.text);
      first = BigInt(lines[0] as string);
      last = BigInt(lines[lines.length - 1] as string);
      for (let i = 0; i < lines.length; i++)
        if (BigInt(lines[i] as string) !== first + BigInt(i))
          return this.mismatch(`leaf get ${key} count=${count}`, res.text);
    } else {
      const a = await callLeader(this.fetch, this.endpoint(), 'POST', `/v1/sequences/${key}/incr`, { count });
      if (typeof a === 'string' || a.status !== 200) return false;
      const b = a.body;
      if (b.key !== key || b.count !== count || typeof b.first !== 'string' || typeof b.last !== 'string')
        return this.mismatch(`incr ${key} count=${count}`, b);
      first = BigInt(b.first);
      last = BigInt(b.last);
      if (last - first + 1n !== BigInt(count)) return this.mismatch(`incr ${key} count=${count}`, b);
    }
    const returnUs = this.world.sched.nowUs;
    o.stats.ok++;
    this.world.trace(`${this.name} ${leaf ? 'leaf ' : ''}incr ${key} ${count} -> ${first}..${last}`);
    o.values(key, first, last, `${this.name}@${returnUs}`);
    if (key === STRICT_KEY) {
      o.strict.push({ client: this.name, invokeUs, returnUs, first, last });
      this.lastStrictOkUs = returnUs;
    }
    return true;
  }

  private async alloc(key: string, count: number): Promise<boolean> {
    const o = this.oracle;
    o.stats.calls++;
    const a = await callLeader(this.fetch, this.endpoint(), 'POST', `/v1/sequences/${key}/alloc`, { count });
    if (typeof a === 'string' || a.status !== 200) return false;
    const b = a.body;
    if (b.key !== key || typeof b.start !== 'string' || typeof b.end !== 'string')
      return this.mismatch(`alloc ${key} count=${count}`, b);
    const start = BigInt(b.start);
    const end = BigInt(b.end);
    if (end - start !== BigInt(count)) return this.mismatch(`alloc ${key} count=${count}`, b);
    o.stats.ok++;
    o.stats.segments++;
    this.world.trace(`${this.name} alloc ${key} ${count} -> [${start}, ${end})`);
    o.values(key, start, end - 1n, `${this.name}@${this.world.sched.nowUs} (segment)`);
    return true;
  }

  // ---- RESP --------------------------------------------------------------------------------

  private readonly respConns = new Map<string, RespConnection>();
  /** Where this client sends its next RESP command (a MOVED reply moves it). */
  private respTarget: string | undefined;

  private respConn(addr: string): RespConnection {
    let c = this.respConns.get(addr);
    if (!c) {
      c = new RespConnection(this.world, this.respNet as RespNet, this.proc, this.name, addr, 1000);
      this.respConns.set(addr, c);
    }
    return c;
  }

  /**
   * Sends `cmds` as one pipeline; a lone command that is MOVED follows the redirect (up to 3 hops), a
   * pipelined one is only counted (the next call goes to the new address). Returns each command's reply
   * (undefined: none, or an error reply) and when it arrived.
   */
  private async respSend(
    cmds: string[][],
    split?: number,
  ): Promise<Array<{ v: RespValue | undefined; atUs: number }>> {
    const o = this.oracle;
    let target = this.respTarget ?? respAddrOf(this.rng.pick(this.nodeIds()));
    for (let hop = 0; ; hop++) {
      o.stats.respCalls += cmds.length;
      const answers = await this.respConn(target).pipeline(cmds, split);
      let movedTo: string | undefined;
      let elsewhere = false;
      const out = answers.map((a) => {
        const v = a.outcome;
        if (typeof v === 'string') return { v: undefined, atUs: a.atUs };
        if (v.type === 'error') {
          const m = /^MOVED \d+ (\S+)$/.exec(v.value);
          if (m) {
            o.stats.respMoved++;
            movedTo = m[1];
          } else if (/^CLUSTERDOWN/.test(v.value)) {
            elsewhere = true; // this node knows no leader (cut off, or an election): ask another one next
          } else if (!/^TRYAGAIN/.test(v.value)) {
            this.world.trace(`${this.name} resp ${target}: -${v.value}`);
          }
          return { v: undefined, atUs: a.atUs };
        }
        return { v, atUs: a.atUs };
      });
      if (movedTo) this.respTarget = movedTo;
      else if (elsewhere || answers.some((a) => typeof a.outcome === 'string')) this.respTarget = undefined;
      if (!movedTo || cmds.length > 1 || hop >= 3) return out;
      target = movedTo;
    }
  }

  /** INCR / INCRBY over RESP: one command, or a pipeline (2-3 commands, or a run of 4-16 copies). */
  private async respIncr(key: string, count: number): Promise<boolean> {
    const o = this.oracle;
    // Pipelines: mostly one command, some of 2-3, and one in ten a run of 4-16 byte-identical copies (the shape of
    // redis-benchmark -P 16, which the server answers together), sometimes with an INCR of the other key inside it;
    // three in ten of the longer ones are written in two pieces, cut anywhere (read in two chunks).
    const shape = this.rng.int(10);
    const n = shape < 7 ? 1 : shape < 9 ? 2 + this.rng.int(2) : 4 + this.rng.int(13);
    const args = count === 1 && this.rng.chance(0.5) ? ['INCR', key] : ['INCRBY', key, String(count)];
    const calls = Array.from({ length: n }, () => ({ key, count, args }));
    if (n >= 4 && this.rng.chance(0.3)) {
      const other = key === STRICT_KEY ? NODE_KEY : STRICT_KEY;
      calls[this.rng.int(n)] = { key: other, count: 1, args: ['INCR', other] };
    }
    const split = n >= 2 && this.rng.chance(0.3) ? this.rng.nextU32() : undefined;
    o.stats.calls += n;
    const invokeUs = this.proc.effectiveUs;
    const answers = await this.respSend(
      calls.map((c) => c.args),
      split,
    );
    let any = false;
    for (const [i, a] of answers.entries()) {
      if (a.v === undefined) continue;
      const c = calls[i] as (typeof calls)[number];
      const what = `${c.args.join(' ')} (${i + 1} of a pipeline of ${n})`;
      if (a.v.type !== 'int') return this.mismatch(what, show(a.v));
      const last = a.v.value;
      const first = last - BigInt(c.count) + 1n;
      if (first < 0n) return this.mismatch(what, show(a.v));
      o.stats.ok++;
      o.stats.respOk++;
      any = true;
      this.world.trace(`${this.name} resp ${what} -> ${first}..${last}`);
      o.values(c.key, first, last, `${this.name}@${a.atUs} (resp)`);
      if (c.key === STRICT_KEY) {
        o.strict.push({ client: this.name, invokeUs, returnUs: a.atUs, first, last });
        this.lastStrictOkUs = a.atUs;
      }
    }
    return any;
  }

  /** SEQ.ALLOC over RESP: a segment [start, end) of exactly `count` values. */
  private async respAlloc(key: string, count: number): Promise<boolean> {
    const o = this.oracle;
    o.stats.calls++;
    const [a] = await this.respSend([['SEQ.ALLOC', key, String(count)]]);
    if (a?.v === undefined) return false;
    const v = a.v;
    const what = `SEQ.ALLOC ${key} ${count}`;
    if (v.type !== 'array' || v.value === null || v.value.length !== 2) return this.mismatch(what, show(v));
    const [s, e] = v.value;
    if (s?.type !== 'int' || e?.type !== 'int' || e.value - s.value !== BigInt(count) || s.value < 0n)
      return this.mismatch(what, show(v));
    o.stats.ok++;
    o.stats.respOk++;
    o.stats.segments++;
    this.world.trace(`${this.name} resp ${what} -> [${s.value}, ${e.value})`);
    o.values(key, s.value, e.value - 1n, `${this.name}@${a.atUs} (resp segment)`);
    return true;
  }

  // ---- the SDK's FloeSequence -----------------------------------------------------------------

  private sdk: FloeClient | undefined;
  private readonly sdkSeqs = new Map<string, FloeSequence>();
  /** The last value each of this process's FloeSequences handed out. */
  private readonly sdkLast = new Map<string, number>();

  private sdkSeq(key: string): FloeSequence {
    const proc = this.proc;
    this.sdk ??= new FloeClient({
      endpoints: this.endpoints,
      requestTimeoutMs: 1000,
      fetch: this.checkedAllocFetch(),
      clock: {
        now: () => Math.floor(proc.wallMs()),
        waitUntil: (ms: number) => proc.busyWaitUntilWall(ms),
      },
      monotonic: () => proc.monoMs(),
      bootId: proc.machine.bootId,
      setTimer: (fn, ms) => {
        const t = proc.setTimeout(fn, ms, 'sdk-timer');
        return { cancel: () => proc.clearTimer(t) };
      },
      sleep: (ms) => proc.sleep(ms),
      random: () => this.rng.float(),
      incarnation: proc.name,
    });
    let s = this.sdkSeqs.get(key);
    if (!s) {
      // Leaf's adaptive step, timed on the process's virtual monotonic clock (the client's `monotonic`), with a
      // target duration short enough that segments grow and shrink within a run.
      s = this.sdk.sequence(key, {
        step: this.cfg.step,
        minStep: this.cfg.step,
        maxStep: this.cfg.step * 4,
        targetDurationMs: 300,
        fetchTimeoutMs: 3000,
      });
      this.sdkSeqs.set(key, s);
    }
    return s;
  }

  /**
   * The SDK's fetch, with every successful segment allocation reply checked against its request (key, and
   * `end − start` = the count asked) here, independently of FloeSequence's own check.
   */
  private checkedAllocFetch(): FetchLike {
    return async (url, init) => {
      const res = await this.fetch(url, init);
      const m = /\/v1\/sequences\/([^/]+)\/alloc$/.exec(new URL(url).pathname);
      if (!m || res.status !== 200) return res;
      const text = await res.text();
      let ok = false;
      try {
        const req = JSON.parse(init.body ?? '{}') as { count?: unknown };
        const b = JSON.parse(text) as { key?: unknown; start?: unknown; end?: unknown };
        ok =
          b.key === decodeURIComponent(m[1] as string) &&
          typeof b.start === 'string' &&
          typeof b.end === 'string' &&
          typeof req.count === 'number' &&
          BigInt(b.end) - BigInt(b.start) === BigInt(req.count);
      } catch {}
      if (!ok)
        this.mismatch(`FloeSequence's ${init.method} ${new URL(url).pathname} ${init.body ?? ''}`, text);
      return { status: res.status, headers: res.headers, text: async () => text };
    };
  }

  /** One value (`next()`) or a few (`nextBatch(n)`) of `key` from this process's FloeSequence. */
  private async sdkNext(key: string): Promise<boolean> {
    const o = this.oracle;
    const seq = this.sdkSeq(key);
    const n = this.rng.chance(0.6) ? 1 : 1 + this.rng.int(this.cfg.maxCount);
    o.stats.calls++;
    let vals: number[];
    try {
      vals = n === 1 && this.rng.chance(0.5) ? [await seq.next()] : await seq.nextBatch(n);
    } catch (err) {
      this.world.trace(`${this.name} sequence(${key}) failed: ${errText(err)}`);
      return false;
    }
    const what = `sequence(${key}).${n === 1 ? 'next' : `nextBatch(${n})`}`;
    if (vals.length !== n || !vals.every((v) => Number.isSafeInteger(v) && v >= 0))
      return this.mismatch(what, vals);
    const now = this.world.sched.nowUs;
    for (const v of vals) {
      const before = this.sdkLast.get(key);
      if (before !== undefined && v <= before) {
        this.world.fail(
          'sequence-order',
          `${this.name}: ${what} gave ${v} after ${before} from the same FloeSequence (values must increase)`,
        );
        return false;
      }
      this.sdkLast.set(key, v);
      o.values(key, BigInt(v), BigInt(v), `${this.name}@${now} (FloeSequence)`);
      o.stats.sdkValues++;
    }
    o.stats.ok++;
    this.world.trace(`${this.name} ${what} -> ${vals[0]}..${vals[vals.length - 1]}`);
    return true;
  }

  /** A text reply (Leaf's route), following the leader's redirects. */
  private async raw(method: string, path: string): Promise<{ status: number; text: string } | undefined> {
    let base = this.endpoint();
    for (let hop = 0; hop < 4; hop++) {
      let res: Awaited<ReturnType<FetchLike>>;
      try {
        res = await this.fetch(`${base}${path}`, {
          method,
          headers: {},
          redirect: 'manual',
          signal: NEVER_ABORTED,
        });
      } catch {
        return undefined;
      }
      const text = await res.text();
      if (res.status === 307) {
        let leader: string | undefined;
        try {
          leader = (JSON.parse(text) as { leader?: { httpAddr?: string } }).leader?.httpAddr;
        } catch {}
        if (!leader) return undefined;
        base = `http://${leader}`;
        continue;
      }
      return { status: res.status, text };
    }
    return undefined;
  }
}

const NEVER_ABORTED = new AbortController().signal;
