/**
 * `npm run bench:standalone`: standalone IDs (issue 11), one run, side by side with peers.
 *
 * 1. `redis-benchmark -t incr -c 50` (no pipelining, then -P 16) against
 *    - Floe strict mode (the leader of a real 3-node cluster from dist/),
 *    - Floe strict mode on a second 3-node cluster run with `--leader-lease` (decision 0009; `--no-lease` skips it),
 *    - Floe node mode, one redis-benchmark per member at once (the sum),
 *    - redis-server (started here) with `appendonly no`, and with `appendonly yes` + `appendfsync everysec`.
 * 2. Leaf's HTTP segment path `GET /api/segment/get/{key}` under autocannon (50 connections), next to
 *    the figure Leaf quotes (about 50,000 QPS on 4 cores / 8 GB; not measured here).
 * 3. `SNOWFLAKE.NEXT key COUNT 1000`: IDs/s per member.
 * 4. Memory per sequence key with 1,000,000 keys in the replicated state (in this process).
 *
 * Everything runs on this machine (load generators included); figures are for one run. Next to each rate: the
 * server's CPU time per request (µs, from /proc; for node mode the three members' sum), steadier than a rate on a
 * shared machine. Bounded to
 * about 2-3 minutes. Options: --n <requests per redis-benchmark run> (default 200000),
 * --seconds <autocannon duration> (default 10), --keys <memory test keys> (default 1000000), --only incr (the INCR
 * section alone), --no-node (without node mode), --pipelines 1,16 (the -P values), --warmup <n> (unmeasured requests
 * to each server before each measured INCR run, so the Node.js servers run optimized code). With
 * FLOE_TEST_NODE_ARGS='--cpu-prof --cpu-prof-dir=DIR' the members are stopped with SIGTERM so they write profiles.
 * Needs `npm run build` (done by the npm script), redis-server and redis-benchmark
 * (`apt-get install redis-server`).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { buildCreate, encodeSequenceCommand, SequenceStateMachine } from '../src/state/sequences/index.js';
import type { Cluster } from '../test/cluster/harness.js';
import { redisCli, startCluster } from '../test/cluster/lease-cluster.js';
import { arg } from './args.js';

const REDIS_SERVER = process.env.REDIS_SERVER ?? 'redis-server';
const REDIS_BENCHMARK = process.env.REDIS_BENCHMARK ?? 'redis-benchmark';

const N = arg('n', 200_000);
const SECONDS = arg('seconds', 10);
const KEYS = arg('keys', 1_000_000);
const CLIENTS = 50;
/** `--only incr`: the INCR section alone (redis, the ceiling, Floe strict; node mode too unless `--no-node`). */
const ONLY_INCR = (() => {
  const i = process.argv.indexOf('--only');
  if (i === -1) return false;
  if (process.argv[i + 1] !== 'incr') throw new Error(`--only takes 'incr', got ${process.argv[i + 1]}`);
  return true;
})();
const NO_NODE = process.argv.includes('--no-node');
/** `--no-lease`: leave out the second cluster, run with `--leader-lease` (decision 0009). */
const NO_LEASE = process.argv.includes('--no-lease');
/** `--warmup n`: n unmeasured requests to each server before each measured INCR run (default 0). */
const WARMUP = process.argv.includes('--warmup') ? arg('warmup', 1) : 0;
/** `--pipelines 16` or `--pipelines 1,16`: the redis-benchmark -P values of the INCR section (default 1,16). */
const PIPELINES = (() => {
  const i = process.argv.indexOf('--pipelines');
  if (i === -1) return [1, 16];
  const v = (process.argv[i + 1] ?? '').split(',').map(Number);
  if (v.length === 0 || !v.every((x) => Number.isInteger(x) && x >= 1))
    throw new Error(`--pipelines takes a comma-separated list of integers >= 1, got ${process.argv[i + 1]}`);
  return v;
})();

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

function run(cmd: string, args: string[], timeoutMs = 300_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
    });
    p.stderr.on('data', (d) => {
      out += d;
    });
    const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('error', reject);
    p.on('close', (code) => {
      clearTimeout(t);
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}: ${out.slice(-500)}`));
    });
  });
}

/**
 * CPU time (ms, user + system) a process has used so far, from /proc (Linux), or undefined. On a shared machine the
 * server's CPU per request is a steadier figure than requests/s, which moves with whatever else runs.
 */
function cpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // clock ticks of 1/100 s (USER_HZ)
  } catch {
    return undefined;
  }
}

/** Server CPU per request (µs) over a run of `n` requests, as text. */
function cpuPerReq(before: (number | undefined)[], after: (number | undefined)[], n: number): string {
  let sum = 0;
  for (let i = 0; i < before.length; i++) {
    const a = before[i];
    const b = after[i];
    if (a === undefined || b === undefined) return '?';
    sum += b - a;
  }
  return ((sum * 1000) / n).toFixed(1);
}

/** requests/s of one redis-benchmark run of `command` (or `-t incr`), and the servers' CPU µs per request. */
async function measured(
  pids: (number | undefined)[],
  run: () => Promise<number>,
  n: number,
): Promise<{ rate: number; cpu: string }> {
  const before = pids.map(cpuMs);
  const r = await run();
  return { rate: r, cpu: cpuPerReq(before, pids.map(cpuMs), n) };
}

/** requests/s of one redis-benchmark run of `command` (or `-t incr`). */
async function rate(port: number, pipeline: number, command?: string[], n = N): Promise<number> {
  const args = ['-h', '127.0.0.1', '-p', String(port), '-n', String(n), '-c', String(CLIENTS), '-q'];
  if (pipeline > 1) args.push('-P', String(pipeline));
  if (command) args.push(...command);
  else args.push('-t', 'incr');
  const out = await run(REDIS_BENCHMARK, args);
  const m = /([0-9.]+) requests per second/.exec(out);
  if (!m) throw new Error(`could not parse redis-benchmark output:\n${out}`);
  // redis-benchmark prints errors it got back; a run that failed is no figure.
  if (/ERR|MOVED|TRYAGAIN/.test(out))
    throw new Error(`redis-benchmark saw error replies:\n${out.slice(0, 500)}`);
  return Number(m[1]);
}

async function startRedis(appendonly: boolean): Promise<{ port: number; proc: ChildProcess; dir: string }> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'floe-bench-redis-'));
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--dir',
    dir,
    '--daemonize',
    'no',
  ];
  args.push('--appendonly', appendonly ? 'yes' : 'no');
  if (appendonly) args.push('--appendfsync', 'everysec');
  const proc = spawn(REDIS_SERVER, args, { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode}`);
    try {
      await run('redis-cli', ['-p', String(port), 'PING'], 2000);
      return { port, proc, dir };
    } catch {
      await new Promise((r) => setTimeout(r, 50)); // a process starting: no event to wait on
    }
  }
  throw new Error('redis-server did not start');
}

/**
 * Starts one of the Node.js ceiling servers of bench/peers/ (this script's own tsx loader), in `workers` processes
 * sharing its port, and waits for `ready <pid>...` (the PIDs whose CPU counts).
 */
async function startPeer(
  file: string,
  workers = 1,
): Promise<{ port: number; proc: ChildProcess; pids: number[] }> {
  const port = await freePort();
  const proc = spawn(
    process.execPath,
    ['--import', 'tsx', join(import.meta.dirname, 'peers', file), String(port), String(workers)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const pids = await new Promise<number[]>((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`${file} exited with ${code}`)));
    proc.stdout!.on('data', (d) => {
      const m = /ready((?: \d+)+)/.exec(String(d));
      if (m) resolve(m[1]!.trim().split(' ').map(Number));
    });
  });
  return { port, proc, pids };
}

function table(rows: string[][]): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  for (const r of rows) console.log(r.map((c, i) => c.padStart(widths[i]!)).join('  '));
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

/**
 * Waits until every member serves `key` itself (a node-mode key it has applied): a member that has not applied the
 * SEQ.CREATE yet answers MOVED, which redis-benchmark would count as a reply. Polls (no event to wait on from here),
 * bounded.
 */
async function settled(cluster: Cluster, key: string): Promise<void> {
  for (const n of cluster.nodes) {
    for (let i = 0; ; i++) {
      const r = await redisCli(['-p', String(n.spec.respPort), 'INCR', key]);
      if (/^\d+$/.test(r.stdout.trim())) break;
      if (i === 100) throw new Error(`member ${n.spec.id} does not serve ${key}: ${r.stdout}${r.stderr}`);
      await new Promise((res) => setTimeout(res, 20));
    }
  }
}

async function incrSection(
  cluster: Cluster,
  leader: number,
  leased: { cluster: Cluster; leader: number } | undefined,
): Promise<void> {
  const portOf = (id: number) => cluster.node(id).spec.respPort;
  const key = 'counter:__rand_int__'; // the key redis-benchmark's INCR test uses
  const cli = (...a: string[]) => redisCli(['-p', String(portOf(leader)), ...a]);
  await cli('SEQ.CREATE', key, 'STEP', '1000');
  const leasedPort = leased ? leased.cluster.node(leased.leader).spec.respPort : 0;
  if (leased) await redisCli(['-p', String(leasedPort), 'SEQ.CREATE', key, 'STEP', '1000']);
  const rows: string[][] = [
    [
      'INCR, -c 50',
      'pipeline',
      'req/s',
      'vs redis (no AOF)',
      'vs redis (AOF everysec)',
      'server CPU µs/req',
      'followers µs/req',
    ],
  ];
  const redisNo = await startRedis(false);
  const redisAof = await startRedis(true);
  const ceiling = await startPeer('node-incr-server.ts');
  // The same server in one process per core: what Node.js reaches here when the server may use every core.
  const ceilingAll = await startPeer('node-incr-server.ts', cpus().length);
  const leaderPid = cluster.node(leader).pid;
  const followerPids = cluster.nodes.filter((n) => n.spec.id !== leader).map((n) => n.pid);
  try {
    for (const p of PIPELINES) {
      if (WARMUP > 0) {
        // Unmeasured: the Node.js servers reach optimized code (JIT) first, as a long-running server has.
        for (const port of [redisNo.port, redisAof.port, ceiling.port, ceilingAll.port, portOf(leader)])
          await rate(port, p, undefined, WARMUP);
        if (leased) await rate(leasedPort, p, undefined, WARMUP);
      }
      const rNo = await measured([redisNo.proc.pid], () => rate(redisNo.port, p), N);
      const rAof = await measured([redisAof.proc.pid], () => rate(redisAof.port, p), N);
      const floor = await measured(ceiling.pids, () => rate(ceiling.port, p), N);
      const floorAll = await measured(ceilingAll.pids, () => rate(ceilingAll.port, p), N);
      const followersBefore = followerPids.map(cpuMs);
      const strict = await measured([leaderPid], () => rate(portOf(leader), p), N);
      const followersCpu = cpuPerReq(followersBefore, followerPids.map(cpuMs), N);
      rows.push(['redis-server appendonly no', String(p), fmt(rNo.rate), '1.00x', '', rNo.cpu]);
      rows.push(['redis-server appendonly everysec', String(p), fmt(rAof.rate), '', '1.00x', rAof.cpu]);
      rows.push([
        'Node.js ceiling (bench/peers/node-incr-server.ts)',
        String(p),
        fmt(floor.rate),
        `${(floor.rate / rNo.rate).toFixed(2)}x`,
        `${(floor.rate / rAof.rate).toFixed(2)}x`,
        floor.cpu,
      ]);
      rows.push([
        `Node.js ceiling, ${ceilingAll.pids.length} processes (node:cluster)`,
        String(p),
        fmt(floorAll.rate),
        `${(floorAll.rate / rNo.rate).toFixed(2)}x`,
        `${(floorAll.rate / rAof.rate).toFixed(2)}x`,
        floorAll.cpu,
      ]);
      rows.push([
        'Floe strict (leader)',
        String(p),
        fmt(strict.rate),
        `${(strict.rate / rNo.rate).toFixed(2)}x`,
        `${(strict.rate / rAof.rate).toFixed(2)}x`,
        strict.cpu,
        `${followersCpu} (sum)`,
      ]);
      if (leased) {
        // The same, on a cluster run with --leader-lease: no ReadIndex round per batch (decision 0009).
        const lPid = leased.cluster.node(leased.leader).pid;
        const lFollowers = leased.cluster.nodes.filter((n) => n.spec.id !== leased.leader).map((n) => n.pid);
        const lBefore = lFollowers.map(cpuMs);
        const l = await measured([lPid], () => rate(leasedPort, p), N);
        rows.push([
          'Floe strict, --leader-lease (leader)',
          String(p),
          fmt(l.rate),
          `${(l.rate / rNo.rate).toFixed(2)}x`,
          `${(l.rate / rAof.rate).toFixed(2)}x`,
          l.cpu,
          `${cpuPerReq(lBefore, lFollowers.map(cpuMs), N)} (sum)`,
        ]);
      }
      if (NO_NODE) continue;
      // node mode: the same key again, served by every member at once.
      await cli('SEQ.DELETE', key);
      await cli('SEQ.CREATE', key, 'STEP', '1000', 'MODE', 'node');
      await settled(cluster, key);
      const perNodeN = Math.ceil(N / 3);
      let perNode: number[] = [];
      const node = await measured(
        cluster.nodes.map((n) => n.pid),
        async () => {
          perNode = await Promise.all(
            cluster.nodes.map((n) => rate(n.spec.respPort, p, undefined, perNodeN)),
          );
          return perNode.reduce((a, b) => a + b, 0);
        },
        perNodeN * cluster.nodes.length,
      );
      await cli('SEQ.DELETE', key);
      await cli('SEQ.CREATE', key, 'STEP', '1000');
      rows.push([
        `Floe node mode (3 members: ${perNode.map(fmt).join(' + ')})`,
        String(p),
        fmt(node.rate),
        `${(node.rate / rNo.rate).toFixed(2)}x`,
        `${(node.rate / rAof.rate).toFixed(2)}x`,
        node.cpu,
      ]);
    }
  } finally {
    ceiling.proc.kill('SIGTERM'); // by PID
    ceilingAll.proc.kill('SIGTERM'); // by PID: its primary stops its workers
    for (const r of [redisNo, redisAof]) {
      r.proc.kill('SIGTERM'); // by PID: processes this script started
      rmSync(r.dir, { recursive: true, force: true });
    }
  }
  table(rows);
  console.log(
    'targets: strict >= 1.0x redis (no AOF) at -c 50; >= 0.5x with -P 16; node mode over 3 members >= 2x\n' +
      'the Node.js ceiling row is a server that only counts commands and writes replies: no Node.js server on this\n' +
      'machine can pass its ratio, and node mode runs three Node.js processes on the same cores as redis-benchmark\n',
  );
}

/** bench/peers/node-http-server.ts in `workers` processes under the Leaf section's autocannon load. */
async function httpCeiling(workers: number): Promise<autocannon.Result> {
  const peer = await startPeer('node-http-server.ts', workers);
  try {
    return await autocannon({
      url: `http://127.0.0.1:${peer.port}/api/segment/get/leaf-key`,
      connections: CLIENTS,
      duration: SECONDS,
    });
  } finally {
    peer.proc.kill('SIGTERM'); // by PID (with workers, its primary stops them)
  }
}

async function leafSection(cluster: Cluster, leader: number): Promise<void> {
  await redisCli([
    '-p',
    String(cluster.node(leader).spec.respPort),
    'SEQ.CREATE',
    'leaf-key',
    'STEP',
    '2000',
  ]);
  const floor = await httpCeiling(1);
  console.log(
    `Node.js ceiling (bench/peers/node-http-server.ts, node:http and a counter), same load: ${fmt(floor.requests.average)} req/s`,
  );
  // The same server in one process per core (node:cluster), under the same load generator.
  const floorAll = await httpCeiling(cpus().length);
  console.log(
    `Node.js ceiling in ${cpus().length} processes (node:cluster), same load: ${fmt(floorAll.requests.average)} req/s`,
  );
  const pid = cluster.node(leader).pid;
  const before = cpuMs(pid);
  const r = await autocannon({
    url: `http://${cluster.node(leader).http}/api/segment/get/leaf-key`,
    connections: CLIENTS,
    duration: SECONDS,
  });
  const cpu = cpuPerReq([before], [cpuMs(pid)], r.requests.total);
  console.log(
    `Leaf path GET /api/segment/get/{key}, autocannon ${CLIENTS} connections ${SECONDS} s against the leader: ` +
      `${fmt(r.requests.average)} req/s (p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, non-2xx ${r.non2xx}, errors ${r.errors}; leader CPU ${cpu} µs/req)`,
  );
  console.log(
    `Floe / Node.js ceiling: ${(r.requests.average / floor.requests.average).toFixed(2)}x\n` +
      `peer (quoted, not measured): Leaf ~50,000 QPS on 4 cores / 8 GB; ratio ${(r.requests.average / 50_000).toFixed(2)}x; target >= 50,000 req/s here\n`,
  );
}

async function snowflakeSection(cluster: Cluster, leader: number): Promise<void> {
  await redisCli([
    '-p',
    String(cluster.node(leader).spec.respPort),
    'SNOWFLAKE.CREATE',
    'bench-ids',
    'LAYOUT',
    'floe',
  ]);
  const rows: string[][] = [['SNOWFLAKE.NEXT bench-ids COUNT 1000, -c 50', 'req/s', 'IDs/s']];
  for (const n of cluster.nodes) {
    const rq = await rate(n.spec.respPort, 1, ['SNOWFLAKE.NEXT', 'bench-ids', 'COUNT', '1000'], 20_000);
    rows.push([`member ${n.spec.id}${n.spec.id === leader ? ' (leader)' : ''}`, fmt(rq), fmt(rq * 1000)]);
  }
  table(rows);
  console.log(
    'the floe layout allows 4,096,000 IDs/s per worker ID (12 sequence bits per ms) without borrowing\n',
  );
}

/** Heap in use once garbage collection has settled (several full collections, timers between). */
async function settledHeap(): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc (npm run bench:standalone does)');
  for (let i = 0; i < 5; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 50)); // let finalizers and deferred frees run
  }
  return process.memoryUsage().heapUsed;
}

async function memorySection(): Promise<void> {
  const before = await settledHeap();
  const sm = new SequenceStateMachine();
  const ctx = { index: 0, term: 1, leaderTimeMs: 0 };
  for (let i = 0; i < KEYS; i++) {
    const cmd = buildCreate(`orders:${i}`, {});
    if ('ok' in cmd) throw new Error(cmd.message);
    ctx.index++;
    sm.apply(encodeSequenceCommand(cmd), ctx);
  }
  const after = await settledHeap();
  const snap = sm.snapshot().length;
  console.log(
    `memory: ${fmt(KEYS)} sequence keys (created through the state machine) take ${((after - before) / 2 ** 20).toFixed(0)} MiB of heap, ` +
      `${((after - before) / KEYS).toFixed(0)} bytes per key; snapshot ${(snap / 2 ** 20).toFixed(0)} MiB (${(snap / KEYS).toFixed(0)} bytes per key)`,
  );
}

async function main(): Promise<void> {
  console.log(
    `bench:standalone on ${cpus().length} CPU(s) (${cpus()[0]?.model ?? '?'}), Node ${process.version}\n`,
  );
  const { cluster, leader } = await startCluster(3);
  // A second cluster for the INCR section only, every member run with --leader-lease (stopped after it).
  const leased = NO_LEASE ? undefined : await startCluster(3, ['--leader-lease']);
  try {
    try {
      await incrSection(cluster, leader, leased);
    } finally {
      if (leased) {
        await leased.cluster.stopAll();
        leased.cluster.cleanup();
      }
    }
    if (!ONLY_INCR) {
      await leafSection(cluster, leader);
      await snowflakeSection(cluster, leader);
    }
  } finally {
    // Profiling members (FLOE_TEST_NODE_ARGS=--cpu-prof): a SIGTERM lets them exit and write their profiles.
    if (/--cpu-prof|--prof/.test(process.env.FLOE_TEST_NODE_ARGS ?? ''))
      await Promise.all(cluster.nodes.map((n) => n.stopGracefully()));
    await cluster.stopAll();
    cluster.cleanup();
  }
  if (!ONLY_INCR) await memorySection();
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
