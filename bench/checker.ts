// Measures the checker on large simulated histories: npx tsx src/check/checker-bench.ts
// Each history comes from clients running concurrently against a correct register/counter, so
// it is linearizable by construction; one variant corrupts a single late read.

import { checkHistory } from '../src/check/linearizability.js';
import type { Operation } from '../src/check/model.js';
import { type CounterInput, type CounterOutput, counterModel } from '../src/check/models/counter.js';
import {
  kvModel,
  type RegisterInput,
  type RegisterOutput,
  type RegisterValue,
} from '../src/check/models/register.js';
import { checkUniqueIds, type IdInput, type IdOutput } from '../src/check/models/unique-id.js';

/** Deterministic PRNG (mulberry32) so every run measures the same histories. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Call<I> {
  key: string;
  input: I;
  clientId: number;
  invokeTime: number;
  point: number;
  returnTime: number;
}

/** clients issue calls back to back; each takes effect at a random point inside its interval. */
function schedule<I>(
  rand: () => number,
  clients: number,
  perClient: number,
  keys: number,
  input: () => I,
): Call<I>[] {
  const calls: Call<I>[] = [];
  for (let c = 0; c < clients; c++) {
    let t = rand() * 10;
    for (let i = 0; i < perClient; i++) {
      const latency = 1 + rand() * 100;
      const key = `k${Math.floor(rand() * keys)}`;
      calls.push({
        key,
        input: input(),
        clientId: c,
        invokeTime: t,
        point: t + rand() * latency,
        returnTime: t + latency,
      });
      t += latency + rand() * 5;
    }
  }
  return calls.sort((a, b) => a.point - b.point);
}

function kvHistory(seed: number, clients: number, perClient: number, keys: number, unknownRate: number) {
  const rand = rng(seed);
  let next = 0;
  const input = (): RegisterInput => {
    const x = rand();
    if (x < 0.5) return { op: 'read' };
    if (x < 0.8) return { op: 'write', value: next++ };
    return { op: 'cas', expected: Math.max(0, next - 1 - Math.floor(rand() * 3)), value: next++ };
  };
  const state = new Map<string, RegisterValue>();
  return schedule(rand, clients, perClient, keys, input).map(
    (c): Operation<RegisterInput, RegisterOutput> => {
      const s = state.get(c.key) ?? null;
      let output: RegisterOutput = null;
      if (c.input.op === 'read') output = s;
      else if (c.input.op === 'write') state.set(c.key, c.input.value);
      else {
        output = s === c.input.expected;
        if (output) state.set(c.key, c.input.value);
      }
      const unknown = rand() < unknownRate;
      return { ...c, output, returnTime: unknown ? Number.POSITIVE_INFINITY : c.returnTime };
    },
  );
}

function counterHistory(seed: number, clients: number, perClient: number, keys: number) {
  const rand = rng(seed);
  const input = (): CounterInput => (rand() < 0.6 ? { op: 'incr', delta: 1n } : { op: 'get' });
  const state = new Map<string, bigint>();
  return schedule(rand, clients, perClient, keys, input).map((c): Operation<CounterInput, CounterOutput> => {
    const s = (state.get(c.key) ?? 0n) + (c.input.op === 'incr' ? c.input.delta : 0n);
    state.set(c.key, s);
    return { ...c, output: s };
  });
}

function measure(label: string, run: () => { result: string }) {
  const t0 = performance.now();
  const { result } = run();
  console.log(
    `${label.padEnd(62)} ${result.padEnd(8)} ${(performance.now() - t0).toFixed(0).padStart(6)} ms`,
  );
}

const kv1 = kvHistory(1, 8, 625, 1, 0);
measure('kv: 1 key, 5,000 ops, 8 clients', () => checkHistory(kvModel(), kv1));
const kv1u = kvHistory(2, 8, 625, 1, 0.02);
measure('kv: 1 key, 5,000 ops, 8 clients, 2% unknown outcomes', () => checkHistory(kvModel(), kv1u));
const kv2 = kvHistory(3, 16, 6250, 100, 0.01);
measure('kv: 100 keys, 100,000 ops, 16 clients, 1% unknown', () => checkHistory(kvModel(), kv2));
const bad = kvHistory(4, 8, 625, 1, 0);
let lastRead = bad.length - 1;
while (bad[lastRead]!.input.op !== 'read') lastRead--;
bad[lastRead] = { ...bad[lastRead]!, output: 'corrupt' };
measure('kv: 1 key, 5,000 ops, one corrupted read near the end', () => checkHistory(kvModel(), bad));
const ctr = counterHistory(5, 8, 625, 1);
measure('counter: 1 key, 5,000 ops, 8 clients', () => checkHistory(counterModel(), ctr));

const ids: Operation<IdInput, IdOutput>[] = [];
for (let i = 0; i < 1_000_000; i++) {
  ids.push({
    clientId: i % 16,
    input: { op: 'issue' },
    output: BigInt(i),
    invokeTime: i,
    returnTime: i + 20,
  });
}
measure('unique ids: 1,000,000 IDs, increasing mode', () => checkUniqueIds(ids, { mode: 'increasing' }));
