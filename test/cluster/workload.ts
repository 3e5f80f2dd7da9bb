// A recorded client workload against a real cluster over HTTP, checked afterwards for
// linearizability (per-key register + counter models) and for lost acknowledged writes.
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  checkHistory,
  counterModel,
  decodeCounterRecord,
  decodeRegisterRecord,
  formatCheckResult,
  type HistoryRecord,
  HistoryRecorder,
  kvModel,
  toOperations,
} from '../../src/check/index.js';
import { type Cluster, http, until } from './harness.js';

interface ErrorBody {
  error?: string;
  /** The socket error of a request that got no HTTP answer (see http() in harness.ts). */
  code?: string;
}

export interface WorkloadStats {
  ok: number;
  failed: number;
  unknown: number;
  /** Why outcomes were unknown: "status error-code" -> count (shown when a check fails). */
  unknownWhy: Map<string, number>;
  ackedIncrs: bigint[];
}

/** Errors that prove the request never reached the state machine. */
function definitelyNotApplied(status: number, body: unknown): boolean {
  const b = body as ErrorBody;
  if (status === 0) return b?.code === 'ECONNREFUSED';
  return b?.error === 'not_leader' || b?.error === 'overloaded' || b?.error === 'bad_request';
}

export class Workload {
  readonly recorder = new HistoryRecorder({ keepInMemory: true });
  readonly stats: WorkloadStats = { ok: 0, failed: 0, unknown: 0, unknownWhy: new Map(), ackedIncrs: [] };
  private running = false;
  private loops: Promise<void>[] = [];
  private rnd: number;

  constructor(
    private readonly cluster: Cluster,
    private readonly clients = 4,
    seed = 1,
    private readonly timeoutMs = 4000,
  ) {
    this.rnd = seed;
  }

  private random(n: number): number {
    this.rnd = (Math.imul(this.rnd, 1103515245) + 12345) >>> 0;
    return (this.rnd >>> 8) % n;
  }

  start(): void {
    this.running = true;
    for (let c = 0; c < this.clients; c++) this.loops.push(this.loop(c));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.loops = [];
  }

  private endpoint(): string {
    // A client that knows a node is paused goes elsewhere (as a load balancer's health check
    // would); every request to it would only wait for its timeout.
    const up = this.cluster.nodes.filter((n) => n.running && !n.paused);
    const pick = up[this.random(up.length)] ?? this.cluster.nodes[0]!;
    return pick.http;
  }

  private settle(
    call: ReturnType<HistoryRecorder['invoke']>,
    status: number,
    body: unknown,
    output: () => unknown,
  ) {
    if (status === 200 || status === 409) {
      this.stats.ok++;
      call.ok(output());
    } else if (definitelyNotApplied(status, body)) {
      this.stats.failed++;
      call.failed();
    } else {
      this.stats.unknown++;
      const why = `${status} ${(body as ErrorBody)?.code ?? (body as ErrorBody)?.error ?? ''}`.trim();
      this.stats.unknownWhy.set(why, (this.stats.unknownWhy.get(why) ?? 0) + 1);
      call.unknown();
    }
  }

  private async loop(client: number): Promise<void> {
    let n = 0;
    while (this.running) {
      n++;
      const dice = this.random(100);
      const key = `k${this.random(3)}`;
      if (dice < 45) {
        const call = this.recorder.invoke('incr', 'c', 1, client);
        const r = await http<{ value?: string }>(
          this.endpoint(),
          'POST',
          '/v1/counters/c/incr',
          { by: 1 },
          this.timeoutMs,
        );
        this.settle(call, r.status, r.body, () => r.body.value);
        if (r.status === 200 && r.body.value) this.stats.ackedIncrs.push(BigInt(r.body.value));
      } else if (dice < 70) {
        const value = `${client}-${n}`;
        const call = this.recorder.invoke('write', key, value, client);
        const r = await http(this.endpoint(), 'PUT', `/v1/kv/${key}`, { value }, this.timeoutMs);
        this.settle(call, r.status, r.body, () => null);
      } else if (dice < 88) {
        const call = this.recorder.invoke('read', key, null, client);
        const r = await http<{ value?: string | null }>(
          this.endpoint(),
          'GET',
          `/v1/kv/${key}`,
          undefined,
          this.timeoutMs,
        );
        // A failed read has no effect on state: record it as failed, never as a value.
        if (r.status === 200) {
          this.stats.ok++;
          call.ok(r.body.value ?? null);
        } else {
          this.stats.failed++;
          call.failed();
        }
      } else {
        const expected = this.random(2) === 0 ? null : `${this.random(this.clients)}-${this.random(n + 1)}`;
        const value = `${client}-${n}-cas`;
        const call = this.recorder.invoke('cas', key, { expected, value }, client);
        const r = await http(
          this.endpoint(),
          'POST',
          `/v1/kv/${key}/cas`,
          { expect: expected, value },
          this.timeoutMs,
        );
        this.settle(call, r.status, r.body, () => r.status === 200);
      }
    }
  }

  /** Runs the checkers; returns a human-readable verdict, or undefined when everything holds. */
  verify(): string | undefined {
    const records = this.recorder.records();
    // Calls still in flight when stop() returned cannot exist (loops awaited), but be safe.
    const counter: HistoryRecord[] = records.filter((r) => r.op === 'incr' || r.op === 'get');
    const kv: HistoryRecord[] = records.filter((r) => r.op === 'read' || r.op === 'write' || r.op === 'cas');
    const problems: string[] = [];
    const sorted = [...this.stats.ackedIncrs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    for (let i = 1; i < sorted.length; i++) {
      if (sorted[i] === sorted[i - 1]) problems.push(`counter value ${sorted[i]} acknowledged twice`);
    }
    const c = checkHistory(counterModel(), toOperations(counter, decodeCounterRecord), { timeoutMs: 60_000 });
    if (c.result !== 'ok') problems.push(formatCheckResult(c as never));
    const k = checkHistory(kvModel(), toOperations(kv, decodeRegisterRecord), { timeoutMs: 60_000 });
    if (k.result !== 'ok') problems.push(formatCheckResult(k as never));
    if (problems.length === 0) return undefined;
    // Keep the history for a post-mortem (the cluster's own directory is removed after the test).
    const file = join(tmpdir(), `floe-history-${process.pid}-${Date.now()}.json`);
    writeFileSync(
      file,
      JSON.stringify(records, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)),
    );
    problems.push(`history written to ${file}`);
    problems.push(`unknown outcomes: ${JSON.stringify(Object.fromEntries(this.stats.unknownWhy))}`);
    return problems.join('\n');
  }
}

/** Lets the workload run until `count` more operations have succeeded (an event, not a timer). */
export async function progress(w: Workload, count: number): Promise<void> {
  const target = w.stats.ok + count;
  await until(
    `${count} more successful operations`,
    async () => (w.stats.ok >= target ? true : undefined),
    30_000,
  );
}
