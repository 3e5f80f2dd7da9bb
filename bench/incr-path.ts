/**
 * `npx tsx bench/incr-path.ts [--batches N] [--pipeline N]` (`LEASE=1`: as with `--leader-lease`): the CPU cost of the RESP INCR path in one process, without sockets,
 * Raft or other processes, so that changes to it can be compared on a shared machine (bench:standalone's rates and
 * even its CPU figures move with the load).
 *
 * 50 connections (a fake socket each) send pipelines of 16 `INCR key` as redis-benchmark -P 16 does, in one chunk;
 * the server answers with the real parser, dispatch, command table (timed per command as production's metrics do),
 * SequenceService (strict key, every request confirmed by a ReadIndex round that started after it arrived: rounds
 * are answered at the next turn of the event loop, as a quorum's acknowledgements would be) and reply encoding.
 * A first run checks the replies (integers, increasing per client, none twice); then prints µs of this process's CPU
 * per INCR (user + system), best of 5 runs. NO_INLINE=1 / NO_REPEAT=1: without the backend's synchronous answers
 * (`incrByNow` / `incrRepeatedNow`), for comparison.
 */
import { Registry } from 'prom-client';
import { SequenceService } from '../src/sequences/sequence-service.js';
import { LATENCY_BUCKETS } from '../src/server/metrics.js';
import { FastRequestMetrics } from '../src/server/metrics-fast.js';
import { instrumentCommandTable } from '../src/server/metrics-resp.js';
import { LatencyWindow } from '../src/server/metrics-window.js';
import type { SequenceBackend } from '../src/server/resp/backend.js';
import { ClientConnection, type RespSocket } from '../src/server/resp/client-connection.js';
import { type ServerState, zeroServerCounters } from '../src/server/resp/command.js';
import { ALL_COMMANDS, buildCommandTable } from '../src/server/resp/commands/index.js';
import { FakeBackend, FakeCluster } from '../src/server/resp/fake-backend.js';
import { resolveLimits } from '../src/server/resp/limits.js';
import { buildCreate, encodeSequenceCommand, SequenceStateMachine } from '../src/state/sequences/index.js';
import { arg } from './args.js';

const BATCHES = arg('batches', 2000);
const CLIENTS = 50;
/** `--pipeline n` (default 16): INCRs per chunk; 1 is redis-benchmark without -P. */
const PIPELINE = arg('pipeline', 16);
/** `LEASE=1`: the node holds a leader lease (`--leader-lease`, decision 0009): no rounds at all. */
const LEASE = process.env.LEASE === '1';
const KEY = 'counter:__rand_int__';

/** A socket that keeps the 'data' listener and counts the replies written to it. */
class FakeSocket implements RespSocket {
  readonly remoteAddress = '127.0.0.1';
  readonly remotePort = 40000;
  readonly localAddress = '127.0.0.1';
  readonly localPort = 7379;
  readonly writableLength = 0;
  readonly writable = true;
  readonly destroyed = false;
  replies = 0;
  bytes = 0;
  /** Set: every reply written (for the check run). */
  written: Buffer[] | undefined;
  onData: ((chunk: Buffer) => void) | undefined;
  setNoDelay(): void {}
  setTimeout(): void {}
  write(data: Uint8Array): boolean {
    this.bytes += data.length;
    this.written?.push(Buffer.from(data));
    for (let i = 0; i < data.length; i++) if (data[i] === 0x3a /* ':' */) this.replies++;
    return true;
  }
  end(): void {}
  destroy(): void {}
  pause(): void {}
  resume(): void {}
  on(event: string, listener: (...a: never[]) => void): this {
    if (event === 'data') this.onData = listener as (chunk: Buffer) => void;
    return this;
  }
}

function sequenceService(): SequenceService {
  const state = new SequenceStateMachine();
  let index = 0;
  const apply = (cmd: Uint8Array) => state.apply(cmd, { index: ++index, term: 1, leaderTimeMs: Date.now() });
  const create = buildCreate(KEY, { step: 1000 });
  if ('ok' in create) throw new Error(create.message);
  apply(encodeSequenceCommand(create));
  return new SequenceService({
    node: {
      propose: async (cmd) => apply(cmd),
      // A quorum's acknowledgement arrives in a later turn of the event loop.
      linearizableRead: () => new Promise<void>((resolve) => setImmediate(resolve)),
      isLeader: () => true,
      term: () => 1,
      onRoleChange: () => () => {},
      notLeaderError: () => new Error('not leader'),
      ...(LEASE ? { holdsLeaderLease: (term: number) => term === 1 } : {}),
    },
    state,
    owner: 'node-1',
    onRange: () => {},
  });
}

function serverState(seqs: SequenceService): ServerState {
  const cluster = new FakeCluster();
  cluster.setMember(1, '127.0.0.1:7379');
  cluster.setLeader(1);
  const backend = new FakeBackend(cluster, 1);
  const sequences: SequenceBackend = {
    servesLocally: (key) => seqs.servesLocally(key),
    create: () => Promise.reject(new Error('not here')),
    info: () => Promise.reject(new Error('not here')),
    list: () => Promise.reject(new Error('not here')),
    delete: () => Promise.reject(new Error('not here')),
    incrBy: (key, count, opts) => seqs.incrBy(key, count, opts),
    incrByNow: process.env.NO_INLINE ? undefined : (key, count, at) => seqs.incrByNow(key, count, at),
    incrRepeatedNow: process.env.NO_REPEAT
      ? undefined
      : (key, count, times, at) => seqs.incrRepeatedNow(key, count, times, at),
    get: () => Promise.reject(new Error('not here')),
    alloc: () => Promise.reject(new Error('not here')),
  };
  Object.assign(backend, { sequences });
  // As production's NodeMetrics.observeRespCommand: the per-command counter/histogram and the dashboard window.
  const fast = new FastRequestMetrics(new Registry(), {
    counterName: 'c',
    counterHelp: 'c',
    histogramName: 'h',
    histogramHelp: 'h',
    label: 'command',
    buckets: LATENCY_BUCKETS,
  });
  const win = new LatencyWindow();
  const noop = () => {};
  return {
    backend,
    limits: resolveLimits(),
    options: { mode: 'cluster', sentinelName: 'floe', floeVersion: '0', redisVersion: '7.2.0' },
    counters: zeroServerCounters(),
    startedAt: Date.now(),
    runId: '0'.repeat(40),
    logger: { debug: noop, info: noop, warn: noop, error: noop },
    table: instrumentCommandTable(buildCommandTable([...ALL_COMMANDS]), (c, s, ok, count) => {
      fast.observe(c, s, ok, count);
      win.observe(s, ok, count);
    }),
    selfAddr: () => ({ host: '127.0.0.1', port: 7379 }),
    topology: () => {
      throw new Error('not here');
    },
    sessions: () => [],
  } as unknown as ServerState;
}

async function run(check = false): Promise<number> {
  const seqs = sequenceService();
  const server = serverState(seqs);
  const hooks = { onPaused: () => {}, onResumed: () => {}, onClosed: () => {} };
  const sockets = Array.from({ length: CLIENTS }, () => new FakeSocket());
  if (check) for (const s of sockets) s.written = [];
  for (const [i, s] of sockets.entries()) new ClientConnection(i + 1, s, server, hooks);
  const one = Buffer.from(`*2\r\n$4\r\nINCR\r\n$${KEY.length}\r\n${KEY}\r\n`);
  const chunk = Buffer.concat(Array.from({ length: PIPELINE }, () => one));
  const turn = () => new Promise<void>((r) => setImmediate(r));
  const c0 = process.cpuUsage();
  for (let b = 1; b <= BATCHES; b++) {
    for (const s of sockets) s.onData!(Buffer.from(chunk));
    // Every client waits for its replies before sending its next pipeline, as redis-benchmark does.
    while (sockets.some((s) => s.replies < b * PIPELINE)) await turn();
  }
  const c = process.cpuUsage(c0);
  const n = BATCHES * CLIENTS * PIPELINE;
  if (check) {
    // Every reply an integer, each client's strictly increasing, no value twice (gaps allowed, none expected).
    const seen = new Set<bigint>();
    for (const s of sockets) {
      const text = Buffer.concat(s.written!).toString('latin1');
      const values = text.split('\r\n').filter(Boolean);
      if (values.length !== BATCHES * PIPELINE)
        throw new Error(`${values.length} replies, want ${BATCHES * PIPELINE}`);
      let prev = -1n;
      for (const line of values) {
        if (!/^:\d+$/.test(line)) throw new Error(`unexpected reply ${line}`);
        const v = BigInt(line.slice(1));
        if (v <= prev || seen.has(v)) throw new Error(`value ${v} after ${prev} (or seen before)`);
        seen.add(v);
        prev = v;
      }
    }
    const last = await seqs.get(KEY);
    if (last !== BigInt(n)) console.log(`note: ${last} values issued for ${n} requests (gaps)`);
  }
  seqs.close();
  return (c.user + c.system) / n;
}

await run(true);
const results: number[] = [];
for (let i = 0; i < 5; i++) results.push(await run());
console.log(
  `RESP INCR path${LEASE ? ' (leader lease)' : ''}, ${CLIENTS} clients x -P ${PIPELINE}, ${BATCHES} pipelines each: ` +
    `${Math.min(...results).toFixed(3)} µs CPU per INCR (best of 5; all: ${results.map((r) => r.toFixed(3)).join(' ')})`,
);
