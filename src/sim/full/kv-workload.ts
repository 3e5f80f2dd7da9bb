// Key-value and counter clients over the node's HTTP API, recording histories for src/check.
//
// Each client runs one operation at a time: put / compare-and-set / linearizable get on a few
// registers, increment / get on a few counters. A reply says what happened; an operation whose
// outcome is unknown (timeout, a 5xx after the proposal may have been made, a connection lost)
// is recorded with returnTime = +Infinity: it may have taken effect at any point after its call,
// or never. One that was certainly not applied (refused, or a follower's redirect) is left out.
// After healing, a final linearizable read of every key joins the history, so an acknowledged
// write that was lost shows up as a non-linearizable history.

import {
  type CounterInput,
  type CounterOutput,
  checkHistory,
  counterModel,
  formatCheckResult,
  kvModel,
  type Operation,
  type RegisterInput,
  type RegisterOutput,
} from '../../check/index.js';
import type { FetchLike } from '../../client/http-transport.js';
import type { Prng } from '../prng.js';
import { callLeader, type HttpAnswer } from './http-router.js';
import type { SimProcess } from './process.js';
import type { World } from './world.js';

export const KV_KEYS = ['k0', 'k1', 'k2'];
export const COUNTER_KEYS = ['c0', 'c1'];

type Outcome<T> = { kind: 'ok'; value: T } | { kind: 'unknown' } | { kind: 'not-applied' };

export class KvHistory {
  readonly registers: Operation<RegisterInput, RegisterOutput>[] = [];
  readonly counters: Operation<CounterInput, CounterOutput>[] = [];
  acknowledgedWrites = 0;
}

/** One key-value/counter client process. */
export class KvClient {
  private seq = 0;
  private stopped = false;
  private lastSeen = new Map<string, string | null>();
  busy = false;

  constructor(
    private readonly world: World,
    readonly name: string,
    readonly proc: SimProcess,
    private readonly fetch: FetchLike,
    private readonly endpoints: string[],
    private readonly history: KvHistory,
    private readonly rng: Prng,
    private readonly thinkMs: [number, number],
    /** Appended to every value written (a frame-shaped suffix: `SimConfig.kvFrameValues`); '' for plain values. */
    private readonly valueSuffix = '',
  ) {}

  start(): void {
    this.next();
  }

  stop(): void {
    this.stopped = true;
  }

  private next(): void {
    if (this.stopped || !this.proc.alive) return;
    const ms = this.rng.range(this.thinkMs[0], this.thinkMs[1]);
    this.proc.setTimeout(() => void this.one(), ms, 'kv-think');
  }

  private async one(): Promise<void> {
    this.busy = true;
    try {
      const r = this.rng.int(100);
      if (r < 25) await this.put(this.rng.pick(KV_KEYS));
      else if (r < 40) await this.cas(this.rng.pick(KV_KEYS));
      else if (r < 60) await this.get(this.rng.pick(KV_KEYS));
      else if (r < 85) await this.incr(this.rng.pick(COUNTER_KEYS), 1 + this.rng.int(3));
      else await this.counterGet(this.rng.pick(COUNTER_KEYS));
    } finally {
      this.busy = false;
    }
    this.next();
  }

  private call(method: string, path: string, body?: unknown): Promise<HttpAnswer | 'refused' | 'lost'> {
    return callLeader(
      this.fetch,
      this.endpoints[this.rng.int(this.endpoints.length)] as string,
      method,
      path,
      body,
    );
  }

  /** 2xx: ok; 503 not_leader / 400: not applied; anything else: unknown. */
  private async write(
    method: string,
    path: string,
    body: unknown,
  ): Promise<Outcome<Record<string, unknown>>> {
    const a = await this.call(method, path, body);
    if (a === 'refused') return { kind: 'not-applied' };
    if (a === 'lost') return { kind: 'unknown' };
    if (a.status >= 200 && a.status < 300) return { kind: 'ok', value: a.body };
    if (a.status === 409 && a.body.error === 'compare_failed') return { kind: 'ok', value: a.body };
    if (a.status === 400 || (a.status === 503 && a.body.error === 'not_leader'))
      return { kind: 'not-applied' };
    return { kind: 'unknown' };
  }

  private record<I, O>(
    list: Operation<I, O>[],
    key: string,
    input: I,
    invokeUs: number,
    out: Outcome<O>,
  ): void {
    this.world.trace(
      `${this.name} ${key} ${describe(input)} -> ${out.kind === 'ok' ? describe(out.value) : out.kind}`,
    );
    if (out.kind === 'not-applied') return;
    list.push({
      clientId: this.name,
      key,
      input,
      output: out.kind === 'ok' ? out.value : (undefined as O),
      invokeTime: invokeUs,
      returnTime: out.kind === 'ok' ? this.world.sched.nowUs : Number.POSITIVE_INFINITY,
    });
  }

  /**
   * A write enters the history when it is sent, with an unknown outcome: if the run ends before
   * its answer arrives, it may still have taken effect.
   */
  private begin<I, O>(list: Operation<I, O>[], key: string, input: I): Operation<I, O> {
    const op: Operation<I, O> = {
      clientId: this.name,
      key,
      input,
      output: undefined as O,
      invokeTime: this.world.sched.nowUs,
      returnTime: Number.POSITIVE_INFINITY,
    };
    list.push(op);
    return op;
  }

  private finish<I, O>(list: Operation<I, O>[], op: Operation<I, O>, out: Outcome<O>): void {
    this.world.trace(
      `${this.name} ${op.key} ${describe(op.input)} -> ${out.kind === 'ok' ? describe(out.value) : out.kind}`,
    );
    if (out.kind === 'not-applied') {
      const i = list.lastIndexOf(op);
      if (i >= 0) list.splice(i, 1);
    } else if (out.kind === 'ok') {
      op.output = out.value;
      op.returnTime = this.world.sched.nowUs;
    }
  }

  private async put(key: string): Promise<void> {
    const value = `${this.name}-${++this.seq}${this.valueSuffix}`;
    const op = this.begin(this.history.registers, key, { op: 'write', value });
    const r = await this.write('PUT', `/v1/kv/${key}`, { value });
    if (r.kind === 'ok') {
      if (r.value.value !== value) {
        this.world.fail(
          'reply-mismatch',
          `${this.name}: put ${key}=${value} answered ${JSON.stringify(r.value)}`,
        );
      }
      this.history.acknowledgedWrites++;
    }
    this.finish(this.history.registers, op, r.kind === 'ok' ? { kind: 'ok', value: null } : r);
  }

  private async cas(key: string): Promise<void> {
    const expect = this.lastSeen.get(key) ?? null;
    const value = `${this.name}-${++this.seq}${this.valueSuffix}`;
    const op = this.begin(this.history.registers, key, { op: 'cas', expected: expect, value });
    const r = await this.write('POST', `/v1/kv/${key}/cas`, { expect, value });
    let out: Outcome<RegisterOutput> = r.kind === 'ok' ? { kind: 'ok', value: false } : r;
    if (r.kind === 'ok') {
      if (r.value.ok === true) {
        if (r.value.value !== value) {
          this.world.fail(
            'reply-mismatch',
            `${this.name}: cas ${key} to ${value} answered ${JSON.stringify(r.value)}`,
          );
        }
        out = { kind: 'ok', value: true };
        this.history.acknowledgedWrites++;
      } else {
        this.lastSeen.set(key, (r.value.value as string | null | undefined) ?? null);
      }
    }
    this.finish(this.history.registers, op, out);
  }

  private async get(key: string): Promise<void> {
    const t = this.world.sched.nowUs;
    const a = await this.call('GET', `/v1/kv/${key}`);
    if (typeof a === 'string' || a.status !== 200) return; // a read that failed changed nothing
    if (a.body.key !== key) {
      this.world.fail('reply-mismatch', `${this.name}: get ${key} answered ${JSON.stringify(a.body)}`);
    }
    const v = (a.body.value as string | null | undefined) ?? null;
    this.lastSeen.set(key, v);
    this.record(this.history.registers, key, { op: 'read' }, t, { kind: 'ok', value: v });
  }

  private async incr(key: string, by: number): Promise<void> {
    const op = this.begin(this.history.counters, key, { op: 'incr', delta: BigInt(by) });
    const r = await this.write('POST', `/v1/counters/${key}/incr`, { by });
    let out: Outcome<CounterOutput> = r.kind === 'ok' ? { kind: 'unknown' } : r;
    if (r.kind === 'ok') {
      // A counter's reply is its new value, an integer: anything else answers another request (issue 9 item 1).
      if (!/^-?\d+$/.test(String(r.value.value))) {
        this.world.fail(
          'reply-mismatch',
          `${this.name}: incr ${key} by ${by} answered ${JSON.stringify(r.value)}`,
        );
        this.finish(this.history.counters, op, { kind: 'unknown' });
        return;
      }
      out = { kind: 'ok', value: BigInt(String(r.value.value)) };
      this.history.acknowledgedWrites++;
    }
    this.finish(this.history.counters, op, out);
  }

  private async counterGet(key: string): Promise<void> {
    const t = this.world.sched.nowUs;
    const a = await this.call('GET', `/v1/counters/${key}`);
    if (typeof a === 'string' || a.status !== 200) return;
    if (a.body.key !== key) {
      this.world.fail(
        'reply-mismatch',
        `${this.name}: counter get ${key} answered ${JSON.stringify(a.body)}`,
      );
    }
    this.record(this.history.counters, key, { op: 'get' }, t, {
      kind: 'ok',
      value: BigInt(String(a.body.value)),
    });
  }

  private readonly finalDone = new Set<string>();

  /** The final reads after healing, one per key and counter; true once all are done (call again until then). */
  async finalReads(): Promise<boolean> {
    for (const [kind, key] of [
      ...KV_KEYS.map((k) => ['kv', k] as const),
      ...COUNTER_KEYS.map((k) => ['counter', k] as const),
    ]) {
      if (this.finalDone.has(key)) continue;
      const t = this.world.sched.nowUs;
      const a = await this.call('GET', kind === 'kv' ? `/v1/kv/${key}` : `/v1/counters/${key}`);
      if (typeof a === 'string' || a.status !== 200) {
        this.world.trace(`${this.name} final read of ${key}: ${typeof a === 'string' ? a : a.status}`);
        continue;
      }
      this.finalDone.add(key);
      if (kind === 'kv') {
        const v = (a.body.value as string | null | undefined) ?? null;
        this.record(this.history.registers, key, { op: 'read' }, t, { kind: 'ok', value: v });
      } else {
        this.record(this.history.counters, key, { op: 'get' }, t, {
          kind: 'ok',
          value: BigInt(String(a.body.value)),
        });
      }
    }
    return this.finalDone.size === KV_KEYS.length + COUNTER_KEYS.length;
  }
}

/**
 * Checks both histories; returns a failure text, or undefined when both are linearizable. The search's budget is
 * counted in its own steps (it asks the clock once per 1,024 steps), not in real time: on a loaded machine a real
 * timeout would let a history pass unchecked, and a seed would not replay the same way.
 */
export function checkKvHistories(h: KvHistory, budgetSteps: number): { failure?: string; unknown?: string } {
  let calls = 0;
  const opts = { timeoutMs: Math.ceil(budgetSteps / 1024), now: () => calls++ };
  const regs = checkHistory(kvModel(), h.registers, opts);
  if (regs.result === 'illegal') return { failure: formatCheckResult(regs as never) };
  calls = 0;
  const ctrs = checkHistory(counterModel(), h.counters, opts);
  if (ctrs.result === 'illegal') return { failure: formatCheckResult(ctrs as never) };
  if (regs.result === 'unknown' || ctrs.result === 'unknown') {
    return { unknown: `linearizability check did not finish within ${budgetSteps} search steps` };
  }
  return {};
}

function describe(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x)) ?? 'undefined';
}
