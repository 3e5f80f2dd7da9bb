/**
 * `npm run chaos -- --seconds N`: the client SDK's chaos proof on real processes.
 *
 * A 3-node Floe cluster (from dist/: run `npm run build` first) with a fault proxy in front of every node's peer port,
 * and `--clients` SDK client processes (scripts/chaos-client.ts) that lease worker IDs from a small pool (so worker IDs
 * change hands), renew, and generate IDs in bursts. Meanwhile the script injects, one every 1-2.5 s, these kinds in
 * turn (client pauses twice per round):
 *  - kill -9 of the leader, restarted 0.5-1.5 s later;
 *  - SIGSTOP of the leader for 1.5-2.5 s (3-5 election timeouts), then SIGCONT;
 *  - a one-way partition of a random node (its proxy refuses what it would hear) for 1-3 s;
 *  - SIGSTOP of a random client for 1.5-2.5 TTLs, then SIGCONT (its lease must be lost, and reused by another);
 *  - kill -9 of a random client, restarted with the same nodeId (and the same lease cache, if it has one);
 *  - a replacement started while the old process still runs (same nodeId, same cache path), the old one stopped
 *    0.5-2 s later (PM2 reload, an early supervisor);
 *  - a twin: a second process with the same nodeId (its own cache, or none) for 2-5 s.
 * A quarter of the clients run with a clock 1.5 s behind, a quarter 1.5 s ahead, a quarter with a clock that jumps
 * backwards by 20-400 ms every 1.5 s. Client variants by index (k mod 5): a lease cache kept across restarts,
 * three `lease.snowflake()` generators used in turn, borrow mode, a coarse layout (100 ms ticks), plain.
 * Every ID and its last-use time survive a kill -9 (see chaos-client.ts); the driver records every kill's time in
 * `kills.jsonl`. docs/chaos.md explains the records and the checks.
 * At the end every client releases and exits; scripts/chaos-check.ts checks everything recorded, and the script prints
 * ONE JSON line of counts and exits 1 on any violation.
 *
 * Options: --seconds 60 --clients 20 --ttl 3000 --rate 60000 (IDs/s per client between bursts; 0 = unbounded)
 *          --pool-bits 4 --seed 1 --dir <keep records here> --verbose
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { hrtimeMonotonic } from '../src/client/index.js';
import { FaultProxy } from '../src/testing/fault-proxy.js';
import {
  Cluster,
  type ClusterView,
  floeBin,
  http,
  repoRoot,
  waitForLeader,
} from '../test/cluster/harness.js';
import { checkChaosRun, violationsOf } from './chaos-check.js';
import type { ChaosClientOptions } from './chaos-client.js';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return def;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v < 0) {
    console.error(`--${name} must be a number >= 0, got ${process.argv[i + 1]}`);
    process.exit(2);
  }
  return v;
}
function strArg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}

const seconds = arg('seconds', 60);
const clientCount = Math.max(1, Math.floor(arg('clients', 20)));
const ttlMs = arg('ttl', 3000);
const rate = arg('rate', 60_000);
const poolBits = arg('pool-bits', 4);
let seed = arg('seed', 1) >>> 0 || 1;
const verbose = process.argv.includes('--verbose');
const keepDir = strArg('dir');
const rand = () => {
  seed = (seed * 1664525 + 1013904223) >>> 0;
  return seed / 2 ** 32;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (s: string) => {
  if (verbose) process.stderr.write(`[chaos ${((performance.now() - t0) / 1000).toFixed(1)}s] ${s}\n`);
};
const t0 = performance.now();

if (!existsSync(floeBin)) {
  console.error(`${floeBin} is missing: run \`npm run build\` first`);
  process.exit(2);
}

const dir = keepDir ?? mkdtempSync(join(tmpdir(), 'floe-chaos-'));
mkdirSync(dir, { recursive: true });
const app = 'chaos';
const proxies: FaultProxy[] = [];
const cluster = await Cluster.create({ size: 3 });
for (const n of cluster.nodes) {
  const p = await FaultProxy.start({ listen: '127.0.0.1:0', target: `127.0.0.1:${n.spec.peerPort}` });
  proxies.push(p);
  n.spec.advertisedPeerPort = p.port;
}
cluster.startAll();
const endpoints = cluster.nodes.map((n) => n.http);

interface ClientProc {
  name: string;
  opts: ChaosClientOptions;
  proc: ChildProcess;
  generation: number;
}
const clients: ClientProc[] = [];
const summaries: string[] = [];

/** Client variants by index: every run of 5+ clients has each. */
function variantOf(k: number): Partial<ChaosClientOptions> {
  switch (k % 5) {
    case 0:
      return { cachePath: join(dir, `cache-c${k}.json`) };
    case 1:
      return { generators: 3 };
    case 2:
      return { borrow: true };
    case 3:
      return { layout: 'coarse' };
    default:
      return {};
  }
}

let processSeq = 0;
function startClient(
  k: number,
  generation: number,
  extra: Partial<ChaosClientOptions> = {},
  label?: string,
): ClientProc {
  const kinds = ['normal', 'behind', 'ahead', 'jumpy'] as const;
  const opts: ChaosClientOptions = {
    name: label ?? `c${k}-g${generation}-p${processSeq++}`,
    nodeName: `c${k}`,
    endpoints,
    app,
    dir,
    ttlMs,
    clock: kinds[k % 4] as ChaosClientOptions['clock'],
    rate,
    seed: Math.floor(rand() * 2 ** 31),
    ...variantOf(k),
    ...extra,
  };
  // The nodeId stays c<k> across restarts (the file names carry the process).
  const proc = spawn(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'scripts/chaos-client.ts'), JSON.stringify(opts)],
    { stdio: ['ignore', 'pipe', 'pipe'], cwd: repoRoot },
  );
  // Clients yield the CPU to the nodes: 2 shared cores run 3 nodes and every client.
  try {
    if (proc.pid) setPriority(proc.pid, 10);
  } catch {
    // not permitted: run at the same priority
  }
  // One summary line per process at its graceful exit; chunks may split it, so keep the whole output.
  const out: string[] = [];
  proc.stdout?.on('data', (d: Buffer) => out.push(d.toString()));
  proc.stdout?.on('end', () => summaries.push(out.join('').trim()));
  proc.stderr?.on('data', (d: Buffer) => log(`client ${opts.name}: ${d.toString().trim().slice(0, 500)}`));
  return { name: opts.name, opts, proc, generation };
}

/** kill -9, waits for the exit, and records when (CLOCK_MONOTONIC, after the exit: an upper bound of its last use). */
async function kill9(c: ClientProc): Promise<void> {
  if (c.proc.exitCode !== null || c.proc.signalCode !== null) return;
  const exited = once(c.proc, 'exit');
  c.proc.kill('SIGKILL');
  await exited;
  appendFileSync(
    join(dir, 'kills.jsonl'),
    `${JSON.stringify({ client: c.name, mono: hrtimeMonotonic() })}\n`,
  );
}

/** SIGTERM (release, flush, exit), SIGKILL after 15 s. */
async function stopGracefully(c: ClientProc): Promise<void> {
  if (c.proc.exitCode !== null || c.proc.signalCode !== null) return;
  c.proc.kill('SIGCONT');
  const exited = once(c.proc, 'exit');
  c.proc.kill('SIGTERM');
  const timer = setTimeout(() => void kill9(c), 15_000);
  await exited;
  clearTimeout(timer);
}

let faultsInjected = 0;
const faultCounts: Record<string, number> = {};
const count = (what: string) => {
  faultsInjected++;
  faultCounts[what] = (faultCounts[what] ?? 0) + 1;
  log(what);
};

async function leaderId(): Promise<number | undefined> {
  for (const n of cluster.nodes) {
    if (!n.running) continue;
    const v = await http<ClusterView>(n.http, 'GET', '/v1/cluster', undefined, 500);
    if (v.status === 200 && v.body.role === 'leader') return v.body.id;
  }
  return undefined;
}

let exitCode = 0;
try {
  // Right after an election a follower may not know the leader's HTTP address yet (it arrives
  // through the log): send the pool setup to the leader itself, retrying briefly.
  let pool: Awaited<ReturnType<typeof http>> = { status: 0, body: undefined };
  const setupDeadline = performance.now() + 30_000;
  while (pool.status !== 200 && performance.now() < setupDeadline) {
    const leader = await waitForLeader(cluster, 30_000);
    pool = await http(cluster.node(leader).http, 'PUT', `/v1/apps/${app}/pool`, { bits: poolBits }, 10_000);
    if (pool.status !== 200) await sleep(100);
  }
  if (pool.status !== 200) throw new Error(`pool setup failed: ${pool.status} ${JSON.stringify(pool.body)}`);
  for (let k = 0; k < clientCount; k++) clients.push(startClient(k, 0));

  const end = performance.now() + seconds * 1000;
  const FAULT_CYCLE = [
    'pause-client',
    'kill9-leader',
    'replace-client',
    'partition-node',
    'pause-client',
    'twin-client',
    'pause-leader',
    'kill9-client',
  ];
  const extras: ClientProc[] = [];
  let replaceCount = 0;
  let cycle = Math.floor(rand() * FAULT_CYCLE.length);
  const pending: Promise<unknown>[] = [];
  // Let the clients start (tsx) before the first fault.
  await sleep(Math.min(3000, seconds * 100));
  while (performance.now() < end - 1500) {
    await sleep(1000 + rand() * 1500);
    // Every kind of fault in turn (client pauses twice per round): a short run still sees each kind.
    const kind = FAULT_CYCLE[cycle++ % FAULT_CYCLE.length];
    const leader = await leaderId();
    if (kind === 'kill9-leader' && leader !== undefined) {
      const node = cluster.node(leader);
      await node.kill9();
      count('kill9-leader');
      pending.push(sleep(500 + rand() * 1000).then(() => node.start()));
    } else if (kind === 'pause-leader' && leader !== undefined) {
      const node = cluster.node(leader);
      node.signal('SIGSTOP');
      count('pause-leader');
      pending.push(sleep(1500 + rand() * 1000).then(() => node.signal('SIGCONT')));
    } else if (kind === 'partition-node') {
      const i = Math.floor(rand() * proxies.length);
      const p = proxies[i] as FaultProxy;
      p.partition();
      count('partition-node');
      pending.push(sleep(1000 + rand() * 2000).then(() => p.heal()));
    } else if (kind === 'pause-client') {
      const c = clients[Math.floor(rand() * clients.length)] as ClientProc;
      if (c.proc.pid && c.proc.exitCode === null) {
        c.proc.kill('SIGSTOP');
        count('pause-client');
        pending.push(sleep(ttlMs * (1.5 + rand())).then(() => c.proc.kill('SIGCONT')));
      }
    } else if (kind === 'kill9-client') {
      const k = Math.floor(rand() * clients.length);
      const c = clients[k] as ClientProc;
      if (c.proc.exitCode === null) {
        c.proc.kill('SIGCONT');
        await kill9(c);
        count(c.opts.cachePath ? 'kill9-client-with-cache' : 'kill9-client');
        clients[k] = startClient(k, c.generation + 1);
      }
    } else if (kind === 'replace-client') {
      // The replacement starts while the old process runs: same nodeId, same cache path (its lock must keep the
      // two apart; without a cache the cluster answers the new incarnation lease_held). Every other one is a
      // client with a cache.
      const withCache = clients.map((_, i) => i).filter((i) => variantOf(i).cachePath !== undefined);
      const k =
        replaceCount++ % 2 === 0 && withCache.length > 0
          ? (withCache[Math.floor(rand() * withCache.length)] as number)
          : Math.floor(rand() * clients.length);
      const old = clients[k] as ClientProc;
      if (old.proc.exitCode === null) {
        old.proc.kill('SIGCONT');
        clients[k] = startClient(k, old.generation + 1);
        count(old.opts.cachePath ? 'replace-client-same-cache' : 'replace-client');
        pending.push(sleep(500 + rand() * 1500).then(() => stopGracefully(old)));
      }
    } else if (kind === 'twin-client') {
      // A second process with the same nodeId, its own cache (or none), for a few seconds.
      const k = Math.floor(rand() * clients.length);
      const twin = startClient(k, 0, {
        cachePath: undefined,
        ...(k % 2 === 0 ? { cachePath: join(dir, `cache-twin-${processSeq}.json`) } : {}),
      });
      extras.push(twin);
      count('twin-client');
      pending.push(sleep(2000 + rand() * 3000).then(() => stopGracefully(twin)));
    }
  }
  log('faults over; healing');
  await Promise.all(pending);
  for (const n of cluster.nodes) if (!n.running) n.start();
  for (const p of proxies) p.heal();
  await sleep(Math.max(0, end - performance.now()));

  // Graceful end: every client releases its lease, flushes and exits.
  log('stopping clients');
  await Promise.all([...clients, ...extras].map(stopGracefully));
} catch (e) {
  console.error(e);
  exitCode = 2;
} finally {
  log('stopping the cluster');
  for (const c of clients) await kill9(c);
  await cluster.stopAll();
  log('closing proxies');
  // FaultProxy.close() can wait for a 'close' event that already fired: do not let it hold the run.
  await Promise.race([Promise.all(proxies.map((p) => p.close())), sleep(2000)]);
}

// What the clients saw, summed over every process (each prints one JSON line at a graceful exit).
const clientStats: Record<string, number> = {};
for (const line of summaries.join('\n').split('\n')) {
  try {
    const o = JSON.parse(line) as Record<string, unknown>;
    for (const [k, v] of Object.entries(o))
      if (typeof v === 'number') clientStats[k] = (clientStats[k] ?? 0) + v;
  } catch {
    // not a summary line
  }
}
log('checking');
const r = checkChaosRun(dir, hrtimeMonotonic());
// Worker IDs must really have changed hands, or the interval checks proved nothing.
const violations = violationsOf(r) + (r.reusedWorkerIds > 0 ? 0 : 1);
if (r.reusedWorkerIds === 0) console.error('no worker ID changed hands: the run checked no hand-over');
if (verbose) {
  for (const s of summaries) process.stderr.write(`${s}\n`);
  for (const e of r.examples) process.stderr.write(`violation: ${e}\n`);
}
console.log(
  JSON.stringify({
    ids: r.ids,
    duplicates: r.duplicates,
    overlappingHolders: r.overlappingHolders,
    tokenRegressions: r.tokenRegressions,
    highWaterViolations: r.highWaterViolations,
    timestampReuse: r.timestampReuse,
    recordErrors: r.recordErrors,
    faultsInjected,
    faults: faultCounts,
    leases: r.leases,
    lostLeases: r.lostLeases,
    killedLeases: r.killedLeases,
    reusedWorkerIds: r.reusedWorkerIds,
    clients: clientCount,
    clientStats,
    seconds: Math.round((performance.now() - t0) / 100) / 10,
    ...(violations > 0 ? { examples: r.examples.slice(0, 5) } : {}),
  }),
);
if (keepDir === undefined && violations === 0 && exitCode === 0)
  rmSync(dir, { recursive: true, force: true });
if (violations > 0 || exitCode !== 0) {
  if (keepDir === undefined) console.error(`records kept in ${dir}`);
  cluster.cleanup();
  process.exit(violations > 0 ? 1 : exitCode);
}
cluster.cleanup();
process.exit(0);
