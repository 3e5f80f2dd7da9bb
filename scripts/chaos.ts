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
 *  - kill -9 of a random client, restarted with the same nodeId.
 * A quarter of the clients run with a clock 1.5 s behind, a quarter 1.5 s ahead, a quarter with a clock that jumps
 * backwards by 20-400 ms every 1.5 s.
 * At the end every client releases and exits; scripts/chaos-check.ts checks everything recorded, and the script prints
 * ONE JSON line of counts and exits 1 on any violation.
 *
 * Options: --seconds 60 --clients 20 --ttl 3000 --rate 60000 (IDs/s per client between bursts; 0 = unbounded)
 *          --pool-bits 4 --seed 1 --dir <keep records here> --verbose
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { FaultProxy } from '../src/testing/fault-proxy.js';
import {
  Cluster,
  type ClusterView,
  floeBin,
  http,
  repoRoot,
  waitForLeader,
} from '../test/cluster/harness.js';
import { checkChaosRun } from './chaos-check.js';
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

function startClient(k: number, generation: number): ClientProc {
  const kinds = ['normal', 'behind', 'ahead', 'jumpy'] as const;
  const opts: ChaosClientOptions = {
    name: `c${k}-g${generation}`,
    nodeName: `c${k}`,
    endpoints,
    app,
    dir,
    ttlMs,
    clock: kinds[k % 4] as ChaosClientOptions['clock'],
    rate,
    seed: Math.floor(rand() * 2 ** 31),
  };
  // The nodeId stays c<k> across restarts (the file name carries the generation).
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
  proc.stdout?.on('data', (d: Buffer) => summaries.push(d.toString().trim()));
  proc.stderr?.on('data', (d: Buffer) => log(`client c${k}: ${d.toString().trim().slice(0, 500)}`));
  return { name: `c${k}`, opts, proc, generation };
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
    'partition-node',
    'pause-client',
    'pause-leader',
    'kill9-client',
  ];
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
        const exited = once(c.proc, 'exit');
        c.proc.kill('SIGKILL');
        await exited;
        count('kill9-client');
        clients[k] = startClient(k, c.generation + 1);
      }
    }
  }
  log('faults over; healing');
  await Promise.all(pending);
  for (const n of cluster.nodes) if (!n.running) n.start();
  for (const p of proxies) p.heal();
  await sleep(Math.max(0, end - performance.now()));

  // Graceful end: every client releases its lease, flushes and exits.
  log('stopping clients');
  await Promise.all(
    clients.map(async (c) => {
      if (c.proc.exitCode !== null || c.proc.signalCode !== null) return;
      c.proc.kill('SIGCONT');
      const exited = once(c.proc, 'exit');
      c.proc.kill('SIGTERM');
      const timer = setTimeout(() => c.proc.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    }),
  );
} catch (e) {
  console.error(e);
  exitCode = 2;
} finally {
  log('stopping the cluster');
  for (const c of clients) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
  await cluster.stopAll();
  log('closing proxies');
  // FaultProxy.close() can wait for a 'close' event that already fired: do not let it hold the run.
  await Promise.race([Promise.all(proxies.map((p) => p.close())), sleep(2000)]);
}

log('checking');
const r = checkChaosRun(dir);
const violations =
  r.duplicates + r.overlappingHolders + r.tokenRegressions + r.highWaterViolations + r.timestampReuse;
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
    faultsInjected,
    faults: faultCounts,
    leases: r.leases,
    lostLeases: r.lostLeases,
    reusedWorkerIds: r.reusedWorkerIds,
    clients: clientCount,
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
