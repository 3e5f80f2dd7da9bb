/**
 * One SDK client process for test/cluster/client-incarnation.test.ts: leases a worker ID (optionally with a cache
 * path and/or a given requestId), then generates IDs in batches and appends each batch to `out` at once (so they
 * survive kill -9), until `runMs` passes, the lease is lost, or it is killed. Reports on stdout, one JSON per line:
 * `{event: 'leased', workerId, token, floorMs, requestId, pid}`, `{event: 'generating'}` (first batch on disk),
 * `{event: 'lost', reason}`, `{event: 'error', code, serverCode, message}`, `{event: 'done', ids}`.
 *
 * Usage: node --import tsx test/cluster/incarnation-client.ts '<json options>'
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { FloeClient, LeaseLostError } from '../../src/client/index.js';
import { CeilingReachedError } from '../../src/id/index.js';

interface Options {
  endpoints: string[];
  app: string;
  nodeId: string;
  ttlMs: number;
  out: string;
  runMs: number;
  cachePath?: string;
  requestId?: string;
  cacheLockWaitMs?: number;
  acquireTimeoutMs?: number;
}

const o = JSON.parse(process.argv[2] ?? '{}') as Options;
const say = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const client = new FloeClient({ endpoints: o.endpoints, requestTimeoutMs: 1000 });
  let lease: Awaited<ReturnType<FloeClient['leaseWorker']>>;
  try {
    lease = await client.leaseWorker({
      app: o.app,
      nodeId: o.nodeId,
      ttlMs: o.ttlMs,
      ...(o.cachePath === undefined ? {} : { cachePath: o.cachePath }),
      ...(o.requestId === undefined ? {} : { requestId: o.requestId }),
      ...(o.cacheLockWaitMs === undefined ? {} : { cacheLockWaitMs: o.cacheLockWaitMs }),
      ...(o.acquireTimeoutMs === undefined ? {} : { acquireTimeoutMs: o.acquireTimeoutMs }),
    });
  } catch (e) {
    const err = e as Error & { code?: string; serverCode?: string };
    say({ event: 'error', code: err.code, serverCode: err.serverCode, message: err.message });
    process.exit(2);
  }
  say({
    event: 'leased',
    workerId: lease.workerId,
    token: lease.token,
    floorMs: lease.floorMs,
    requestId: lease.requestId,
    pid: process.pid,
  });
  const gen = lease.snowflake('floe');
  const fd = openSync(o.out, 'a');
  const end = Date.now() + o.runMs;
  let ids = 0;
  while (Date.now() < end) {
    try {
      const batch = gen.nextBatch(1000);
      writeSync(fd, new Uint8Array(batch.buffer));
      if (ids === 0) say({ event: 'generating' });
      ids += batch.length;
    } catch (e) {
      if (e instanceof LeaseLostError) {
        say({ event: 'lost', reason: e.reason });
        break;
      }
      if (!(e instanceof CeilingReachedError)) throw e;
    }
    await sleep(2);
  }
  closeSync(fd);
  say({ event: 'done', ids });
  process.exit(0);
}

void main();
