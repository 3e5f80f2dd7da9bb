// INCR under load across kill -9 and SIGSTOP of the leader (ioredis), recorded for src/check: shared by the
// sequences test (ReadIndex rounds) and the --leader-lease test (decision 0009).

import { Redis } from 'ioredis';
import { expect } from 'vitest';
import type { Operation } from '../../src/check/index.js';
import type { IdInput, IdOutput } from '../../src/check/models/unique-id.js';
import { type Cluster, waitForLeader } from './harness.js';
import { redisCli } from './lease-cluster.js';

/** An INCR that may or may not have been applied (an error other than MOVED): it never returns, for the checker. */
const unknownOutcome = (clientId: number, invokeTime: number): Operation<IdInput, IdOutput> => ({
  clientId,
  key: 'load',
  input: { op: 'issue' },
  output: 0n,
  invokeTime,
  returnTime: Number.POSITIVE_INFINITY,
});

/**
 * Six clients INCR key `load` (four one at a time, two in pipelines of 8) while the leader is killed with -9 and
 * restarted, then stopped with SIGSTOP past the election timeout and resumed, with a late pipeline sent to it while
 * it was stopped. Returns the history and the leader at the end.
 */
export async function incrAcrossFailovers(
  cluster: Cluster,
  startLeader: number,
): Promise<{
  history: Operation<IdInput, IdOutput>[];
  served: number;
  servedBy: Set<number>;
  leader: number;
}> {
  let leader = startLeader;
  const portOf = (id: number) => cluster.node(id).spec.respPort;
  const cli = async (...args: string[]) =>
    (await redisCli(['-c', '-p', String(portOf(leader)), ...args])).stdout.trim();
  await cli('SEQ.CREATE', 'load', 'STEP', '50');
  const history: Operation<IdInput, IdOutput>[] = [];
  const servedBy = new Set<number>();
  const ids = cluster.nodes.map((n) => n.spec.id);
  const clients = new Map(
    ids.map((id) => [
      id,
      new Redis({
        port: portOf(id),
        host: '127.0.0.1',
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        commandTimeout: 1500,
        retryStrategy: () => 100,
      }),
    ]),
  );
  for (const c of clients.values()) c.on('error', () => {});
  await Promise.all([...clients.values()].map((c) => c.connect().catch(() => {})));
  let stop = false;
  let served = 0;
  const waiting: { n: number; resolve(): void }[] = [];
  /** Resolves once `n` more INCRs have been answered with a value. */
  const progress = (n: number) => new Promise<void>((resolve) => waiting.push({ n: served + n, resolve }));
  const answered = () => {
    served++;
    for (let i = waiting.length - 1; i >= 0; i--)
      if (served >= waiting[i]!.n) waiting.splice(i, 1)[0]!.resolve();
  };
  const worker = async (w: number) => {
    let target = leader;
    let n = 0;
    while (!stop) {
      const c = clients.get(target)!;
      const invokeTime = performance.now();
      try {
        const v = (await c.call('INCR', 'load')) as number | string;
        history.push({
          clientId: w,
          key: 'load',
          input: { op: 'issue' },
          output: BigInt(v),
          invokeTime,
          returnTime: performance.now(),
        });
        servedBy.add(target);
        answered();
        n++;
      } catch (err) {
        const msg = String((err as Error).message);
        const moved = /^MOVED \d+ 127\.0\.0\.1:(\d+)/.exec(msg);
        if (moved) {
          target = ids.find((id) => portOf(id) === Number(moved[1])) ?? target;
          continue; // not executed
        }
        // Anything else may or may not have been applied: an unknown outcome.
        history.push(unknownOutcome(w, invokeTime));
        target = ids[(ids.indexOf(target) + 1) % ids.length]!;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    return n;
  };
  // Pipelines of 8 INCRs in one write: the leader answers copies read together in one call (CommandSpec.repeat,
  // SequenceService.incrRepeatedNow), under the same leadership rule. Each value is its own operation; the eight
  // overlap, so only uniqueness binds them to each other.
  const pipelined = async (w: number) => {
    let target = leader;
    let n = 0;
    while (!stop) {
      const c = clients.get(target)!;
      const invokeTime = performance.now();
      const p = c.pipeline();
      for (let i = 0; i < 8; i++) p.incr('load');
      const results = await p.exec().catch((err: unknown) => [...Array(8)].map(() => [err, null]));
      const returnTime = performance.now();
      let moved: number | undefined;
      let failed = false;
      for (const [err, v] of results ?? []) {
        if (!err) {
          history.push({
            clientId: w,
            key: 'load',
            input: { op: 'issue' },
            output: BigInt(v as number),
            invokeTime,
            returnTime,
          });
          servedBy.add(target);
          answered();
          n++;
          continue;
        }
        const m = /^MOVED \d+ 127\.0\.0\.1:(\d+)/.exec(String((err as Error).message));
        if (m) {
          moved = Number(m[1]);
          continue; // not executed
        }
        failed = true;
        history.push(unknownOutcome(w, invokeTime));
      }
      if (moved !== undefined) target = ids.find((id) => portOf(id) === moved) ?? target;
      else if (failed) {
        target = ids[(ids.indexOf(target) + 1) % ids.length]!;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    return n;
  };
  const workers = [...[0, 1, 2, 3].map(worker), ...[4, 5].map(pipelined)];
  await progress(500);
  // kill -9 of the leader, restarted on the same data directory once another leads.
  const first = leader;
  await cluster.node(first).kill9();
  leader = await waitForLeader(cluster);
  cluster.node(first).start();
  await progress(500);
  // SIGSTOP of the leader past the election timeout (values continue on a new leader), then
  // SIGCONT: the old leader must not serve from the segment it still buffers.
  const paused = leader;
  // A client of the old leader with a long timeout: its INCR, sent while the new leader already
  // serves, waits in the paused process's socket and is read when it resumes.
  const late = new Redis({
    port: portOf(paused),
    host: '127.0.0.1',
    maxRetriesPerRequest: 0,
    commandTimeout: 20_000,
  });
  late.on('error', () => {});
  await late.ping();
  cluster.node(paused).signal('SIGSTOP');
  await progress(300);
  const lateInvoke = performance.now();
  // Four INCRs in one write (copies the resumed node would answer together if it could confirm its leadership).
  const latePipeline = late.pipeline();
  for (let i = 0; i < 4; i++) latePipeline.incr('load');
  const lateReply = latePipeline.exec().then(
    (rs) => ({ rs: rs ?? [], at: performance.now() }),
    (err: unknown) => ({
      rs: [...Array(4)].map(() => [err, null] as [unknown, unknown]),
      at: performance.now(),
    }),
  );
  cluster.node(paused).signal('SIGCONT');
  const lr = await lateReply;
  late.disconnect();
  // Answered with a value only if the resumed node could confirm it still led (it cannot).
  for (const [err, v] of lr.rs) {
    if (!err)
      history.push({
        clientId: 'late',
        key: 'load',
        input: { op: 'issue' },
        output: BigInt(v as number),
        invokeTime: lateInvoke,
        returnTime: lr.at,
      });
    else expect(String(err)).toMatch(/MOVED|TRYAGAIN|CLUSTERDOWN|not the leader|read not confirmed/i);
  }
  await progress(300);
  stop = true;
  await Promise.all(workers);
  for (const c of clients.values()) c.disconnect();
  leader = await waitForLeader(cluster);
  return { history, served, servedBy, leader };
}
