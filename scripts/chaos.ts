/**
 * `npm run chaos -- --seconds N`: the client SDK's chaos proof on real processes (docs/chaos.md).
 *
 * A 3-node Floe cluster (from dist/: run `npm run build` first) with a fault proxy in front of every node's peer port,
 * and `--clients` SDK client processes (scripts/chaos-client.ts) that lease worker IDs from small pools (so worker IDs
 * change hands), renew, and generate IDs in bursts. Meanwhile the script injects, one every 1-2.5 s, these kinds in
 * turn (FAULT_CYCLE):
 *  - kill -9 of the leader, restarted 0.5-1.5 s later; SIGSTOP of the leader for 1.5-2.5 s;
 *  - a one-way partition of a random node (its proxy refuses what it would hear) for 1-3 s;
 *  - SIGSTOP of a client for 1.5-2.5 TTLs, then SIGCONT (its lease must be lost, and reused by another); every
 *    other one inside a burst of next() calls (stopInBurst);
 *  - kill -9 of a client inside a burst, restarted with the same nodeId; of a client with a lease cache, restarted
 *    on the same cache; and of a cached client restarted twice at once on its cache (two successors race for it);
 *  - a replacement started while the old process still runs (same nodeId, same cache path, every other one a
 *    client with a cache), the old one stopped 0.5-2 s later (PM2 reload, an early supervisor);
 *  - a twin: a second process with the same nodeId (its own cache, or none) for 2-5 s.
 * A quarter of the clients run with a clock 1.5 s behind, a quarter 1.5 s ahead, a quarter with a clock that jumps
 * backwards by 20-400 ms every 1.5 s. Client variants by index (k mod 5): a lease cache kept across restarts,
 * three `lease.snowflake()` calls used in turn, borrow mode, a coarse layout (1 s ticks, an app of its own; every
 * other slot, the rest plain), plain.
 * Every ID and a real-time bracket of it survive a kill -9 (chaos-client.ts); the driver records every client's
 * start, pauses and exit, and whether it killed it, in `events.jsonl`.
 * At the end every client releases and exits; src/check/chaos-history.ts checks everything recorded, and the script
 * prints ONE JSON line of counts and exits 1 on any violation, or when no worker ID changed hands.
 *
 * `--store etcd`: the same clients, client faults and checker against three `floe serve --store etcd` nodes on a real
 * 3-member etcd 3.4 (scripts/chaos-etcd.ts); the server faults are then kill -9 and SIGSTOP (some past its etcd
 * session) of the active Floe node, and kill -9 of an etcd follower and of the etcd leader (ETCD_FAULT_CYCLE).
 *
 * Options: --seconds 60 --clients 20 --ttl 3000 --rate 60000 (IDs/s per client between bursts; 0 = unbounded)
 *          --store raft|etcd (default raft)
 *          --pool-bits 4 --seed 1 --dir <keep records here> --verbose
 *          --bugs client-two-generators,... (test-only switches put back into every client's SDK: a teeth run)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
} from 'node:fs';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { chaosViolations, checkChaosHistory, MARK_BYTES, parseMarks } from '../src/check/chaos-history.js';
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
import type { ChaosClientOptions } from './chaos-client.js';
import { ETCD_FAULT_CYCLE, ETCD_SERVER_FAULTS, EtcdChaosServers } from './chaos-etcd.js';
import { readChaosRun, recordEvent } from './chaos-records.js';

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
const bugs = (strArg('bugs') ?? '').split(',').filter(Boolean);
const store = strArg('store') ?? 'raft';
if (store !== 'raft' && store !== 'etcd') {
  console.error(`--store must be raft or etcd, got ${store}`);
  process.exit(2);
}
const rand = () => {
  seed = (seed * 1664525 + 1013904223) >>> 0;
  return seed / 2 ** 32;
};
const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(rand() * xs.length)];
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
// One app per layout: the coarse clients lease from their own, smaller pool.
const APP = 'chaos';
const COARSE_APP = 'chaos-coarse';
const proxies: FaultProxy[] = [];
// --store raft: a 3-member Floe Raft cluster behind fault proxies. --store etcd: etcd and three Floe nodes over it.
let raftCluster: Cluster | undefined;
const etcdServers = store === 'etcd' ? await EtcdChaosServers.start(log) : undefined;
if (!etcdServers) {
  const cluster = await Cluster.create({ size: 3 });
  raftCluster = cluster;
  for (const n of cluster.nodes) {
    const p = await FaultProxy.start({ listen: '127.0.0.1:0', target: `127.0.0.1:${n.spec.peerPort}` });
    proxies.push(p);
    n.spec.advertisedPeerPort = p.port;
  }
  cluster.startAll();
}
const endpoints = etcdServers ? etcdServers.endpoints : (raftCluster as Cluster).nodes.map((n) => n.http);

/** A client process. `k` is its client slot: the nodeId `c<k>` and the variant stay with the slot. */
interface ClientProc {
  name: string;
  k: number;
  opts: ChaosClientOptions;
  proc: ChildProcess;
  paused: boolean;
  /** CLOCK_MONOTONIC of the SIGSTOP while paused; of the last SIGCONT after. */
  pausedAt: number;
  resumedAt: number;
  byDriver: 'kill' | 'term' | null;
  exited: boolean;
}
const clients: ClientProc[] = [];
const extras: ClientProc[] = [];
/** Every process started, for the final stop (a replaced one is in neither list above). */
const everyone: ClientProc[] = [];
const summaries: string[] = [];

/**
 * Client variants by slot: every run of 5+ clients has each. With the defaults, 18 clients lease from a pool of 16
 * worker IDs (so some always wait, and a lost lease is soon someone else's), 2 coarse ones from a pool of 2.
 */
function variantOf(k: number): Partial<ChaosClientOptions> {
  switch (k % 5) {
    case 0:
      return { cachePath: join(dir, `cache-c${k}.json`) };
    case 1:
      return { generators: 3 };
    case 2:
      return { borrow: true };
    case 3:
      // Every other one: the rest lease from the main pool, which must stay short of workers.
      return k % 10 === 3 ? { layout: 'coarse', app: COARSE_APP, borrow: k % 20 === 13 } : {};
    default:
      return {};
  }
}
const hasCache = (k: number) => variantOf(k).cachePath !== undefined;

let processSeq = 0;
function startClient(k: number, extra: Partial<ChaosClientOptions> = {}): ClientProc {
  const kinds = ['normal', 'behind', 'ahead', 'jumpy'] as const;
  const opts: ChaosClientOptions = {
    name: `c${k}-p${processSeq++}`,
    nodeName: `c${k}`,
    endpoints,
    app: APP,
    dir,
    ttlMs,
    clock: kinds[k % 4] as ChaosClientOptions['clock'],
    rate,
    seed: Math.floor(rand() * 2 ** 31),
    ...(bugs.length > 0 ? { bugs } : {}),
    ...variantOf(k),
    ...extra,
  };
  const proc = spawn(
    process.execPath,
    ['--import', 'tsx', join(repoRoot, 'scripts/chaos-client.ts'), JSON.stringify(opts)],
    { stdio: ['ignore', 'pipe', 'pipe'], cwd: repoRoot },
  );
  const c: ClientProc = {
    name: opts.name,
    k,
    opts,
    proc,
    paused: false,
    pausedAt: 0,
    resumedAt: 0,
    byDriver: null,
    exited: false,
  };
  everyone.push(c);
  recordEvent(dir, { type: 'start', process: c.name, mono: hrtimeMonotonic() });
  // Read after the process died (the exit event): no ID of it can be issued later.
  proc.on('exit', (code, signal) => {
    c.exited = true;
    recordEvent(dir, {
      type: 'exit',
      process: c.name,
      mono: hrtimeMonotonic(),
      code,
      signal,
      byDriver: c.byDriver,
    });
  });
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
  return c;
}

const alive = (c: ClientProc) => !c.exited && c.proc.exitCode === null && c.proc.signalCode === null;

/**
 * SIGSTOP, and the pause's start read once the kernel shows the process stopped: it did nothing after that time
 * (until the SIGCONT, whose time is read before it is sent). False if it could not be seen stopped.
 */
async function pause(c: ClientProc): Promise<boolean> {
  c.proc.kill('SIGSTOP');
  c.paused = true;
  if (c.proc.pid === undefined || !(await stoppedNow(c.proc.pid))) {
    resume(c);
    return false;
  }
  c.pausedAt = hrtimeMonotonic();
  return true;
}

function resume(c: ClientProc): void {
  if (!c.paused) return;
  c.resumedAt = hrtimeMonotonic();
  c.proc.kill('SIGCONT');
  c.paused = false;
  if (c.pausedAt > 0)
    recordEvent(dir, { type: 'pause', process: c.name, stop: c.pausedAt, cont: c.resumedAt });
  c.pausedAt = 0;
}

/**
 * Killable now: running, not paused, and not resumed within the last second. A kill -9 loses the burst in flight,
 * which the checker then extends to the kill; a process just resumed from a pause may still be inside a burst that
 * began before it (its lease long lost): the extension would then report an overlap nobody can judge.
 */
const killable = (c: ClientProc) => alive(c) && !c.paused && hrtimeMonotonic() - c.resumedAt > 1000;

/** The kind of the last complete mark in a client's marks file (undefined: none yet). */
function lastMark(fd: number): 'begin' | 'gap' | 'end' | undefined {
  const size = fstatSync(fd).size;
  if (size < MARK_BYTES) return undefined;
  const last = Buffer.alloc(MARK_BYTES);
  readSync(fd, last, 0, MARK_BYTES, size - (size % MARK_BYTES) - MARK_BYTES);
  return parseMarks(last)[0]?.kind;
}

/** True when the client wrote a mark within the last 200 ms: it holds a lease and is issuing IDs. */
function issuing(c: ClientProc): boolean {
  try {
    return Date.now() - statSync(join(dir, `marks-${c.name}.bin`)).mtimeMs < 200;
  } catch {
    return false;
  }
}

/** The process's state letter from /proc (R, S, T, ...), undefined when it is gone. */
function processState(pid: number): string | undefined {
  try {
    return /^\d+ \(.*\) (\S) /.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
}

/** Waits (briefly) until the kernel shows the process stopped, so that it does nothing more until a SIGCONT. */
async function stoppedNow(pid: number): Promise<boolean> {
  for (let i = 0; i < 200; i++) {
    const state = processState(pid);
    if (state === 'T') return true;
    if (state === undefined) return false;
    await sleep(0.2);
  }
  return false;
}

/**
 * Stops the client inside a burst of next() calls: SIGUSR2 asks it to SIGSTOP itself within its next burst (at a
 * random ID, before or after reading that ID's return time: chaos-client.ts), which a signal at a random moment would
 * almost never hit (bursts are about 1 % of a client's time). True once the kernel shows it stopped with that burst
 * open; false (the process running, its request lapsed) if it began no burst within the wait.
 */
async function stopInBurst(c: ClientProc): Promise<boolean> {
  const pid = c.proc.pid;
  // Only to a client that writes marks: it has its SIGUSR2 handler (by default SIGUSR2 would end the process).
  if (pid === undefined || !alive(c) || !issuing(c)) return false;
  c.proc.kill('SIGUSR2');
  const path = join(dir, `marks-${c.name}.bin`);
  const until = performance.now() + 3000; // the client drops a request older than 500 ms; a burst lasts < 1.1 s
  while (performance.now() < until && alive(c)) {
    if (processState(pid) === 'T') {
      const fd = openSync(path, 'r');
      try {
        if (lastMark(fd) === 'begin') return true;
      } finally {
        closeSync(fd);
      }
      log(`${c.name}: stopped, but not inside a burst`);
      c.proc.kill('SIGCONT');
      return false;
    }
    await sleep(1);
  }
  log(`${c.name}: began no burst within 3 s`);
  return false;
}

/** kill -9, waits for the exit (whose time the exit handler records). */
async function kill9(c: ClientProc): Promise<void> {
  if (!alive(c)) return;
  const exited = once(c.proc, 'exit');
  c.byDriver = 'kill';
  c.proc.kill('SIGKILL');
  await exited;
}

/** SIGTERM (release, exit), SIGKILL after 15 s. */
async function stopGracefully(c: ClientProc): Promise<void> {
  if (!alive(c)) return;
  resume(c);
  c.proc.kill('SIGCONT'); // also a client that stopped itself after the driver stopped waiting
  const exited = once(c.proc, 'exit');
  c.byDriver = 'term';
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

async function leaderId(cluster: Cluster): Promise<number | undefined> {
  for (const n of cluster.nodes) {
    if (!n.running) continue;
    const v = await http<ClusterView>(n.http, 'GET', '/v1/cluster', undefined, 500);
    if (v.status === 200 && v.body.role === 'leader') return v.body.id;
  }
  return undefined;
}

/** Every kind once per round; client pauses twice. A short run (the CI test) sees each kind. */
const FAULT_CYCLE = [
  'pause-client',
  'kill9-leader',
  'kill9-cached-client',
  'replace-client',
  'partition-node',
  'pause-client',
  'twin-client',
  'kill9-client',
  'pause-leader',
  'kill9-cached-client-two-successors',
] as const;

let exitCode = 0;
try {
  // Right after an election a follower may not know the leader's HTTP address yet (it arrives
  // through the log): send the pool setup to the leader itself, retrying briefly.
  for (const [app, bits] of [
    [APP, poolBits],
    [COARSE_APP, 1],
  ] as const) {
    if (etcdServers) {
      await etcdServers.setupPool(app, bits);
      continue;
    }
    const cluster = raftCluster as Cluster;
    let pool: Awaited<ReturnType<typeof http>> = { status: 0, body: undefined };
    const setupDeadline = performance.now() + 30_000;
    while (pool.status !== 200 && performance.now() < setupDeadline) {
      const leader = await waitForLeader(cluster, 30_000);
      pool = await http(cluster.node(leader).http, 'PUT', `/v1/apps/${app}/pool`, { bits }, 10_000);
      if (pool.status !== 200) await sleep(100);
    }
    if (pool.status !== 200)
      throw new Error(`pool setup failed: ${pool.status} ${JSON.stringify(pool.body)}`);
  }
  for (let k = 0; k < clientCount; k++) clients.push(startClient(k));

  const end = performance.now() + seconds * 1000;
  let replaceCount = 0;
  let pauseCount = 0;
  const faultCycle: readonly string[] = etcdServers ? ETCD_FAULT_CYCLE : FAULT_CYCLE;
  let cycle = Math.floor(rand() * faultCycle.length);
  const pending: Promise<unknown>[] = [];
  /** Restarts slot k now (the old process is gone or going). */
  const restart = (k: number) => {
    clients[k] = startClient(k);
  };
  // Let the clients start (tsx) before the first fault.
  await sleep(Math.min(3000, seconds * 100));
  while (performance.now() < end - 1500) {
    await sleep(1000 + rand() * 1500);
    const kind = faultCycle[cycle++ % faultCycle.length];
    if (etcdServers && kind !== undefined && ETCD_SERVER_FAULTS.has(kind)) {
      const what = await etcdServers.inject(kind, rand, pending);
      if (what !== undefined) count(what);
    } else if (kind === 'kill9-leader' || kind === 'pause-leader') {
      const cluster = raftCluster as Cluster;
      const leader = await leaderId(cluster);
      if (leader === undefined) continue;
      const node = cluster.node(leader);
      if (kind === 'kill9-leader') {
        await node.kill9();
        pending.push(sleep(500 + rand() * 1000).then(() => node.start()));
      } else {
        node.signal('SIGSTOP');
        pending.push(sleep(1500 + rand() * 1000).then(() => node.signal('SIGCONT')));
      }
      count(kind);
    } else if (kind === 'partition-node') {
      const p = pick(proxies) as FaultProxy;
      p.partition();
      count(kind);
      pending.push(sleep(1000 + rand() * 2000).then(() => p.heal()));
    } else if (kind === 'pause-client') {
      // Every other pause lands inside a burst: the ID being issued then returns after the pause, and the next
      // next() must throw (the checker allows that one ID, the documented window, and no more).
      const tryBurst = pauseCount++ % 2 === 0;
      const candidates = clients.filter((x) => alive(x) && !x.paused);
      const c = pick(tryBurst && candidates.some(issuing) ? candidates.filter(issuing) : candidates);
      if (!c) continue;
      const inBurst = tryBurst && (await stopInBurst(c));
      if (!(await pause(c))) continue;
      count(inBurst ? 'pause-client-in-burst' : kind);
      pending.push(sleep(ttlMs * (1.5 + rand())).then(() => alive(c) && resume(c)));
    } else if (
      kind === 'kill9-client' ||
      kind === 'kill9-cached-client' ||
      kind === 'kill9-cached-client-two-successors'
    ) {
      // Restarted with the same nodeId (and on the same lease cache). Two successors at once race for the dead
      // process's cache: its lock lets one in; the other waits (and gets the lease once the first lets go).
      const cached = kind !== 'kill9-client';
      const candidates = clients.filter((x) => killable(x) && hasCache(x.k) === cached);
      const c = pick(candidates.some(issuing) ? candidates.filter(issuing) : candidates);
      if (!c) continue;
      // Killed inside a burst when that can be arranged quickly: its IDs in flight die with it, and the checker
      // must end its lease at the kill.
      const inBurst = await stopInBurst(c);
      await kill9(c);
      restart(c.k);
      if (kind === 'kill9-cached-client-two-successors') {
        const second = startClient(c.k);
        extras.push(second);
        pending.push(sleep(2000 + rand() * 3000).then(() => stopGracefully(second)));
      }
      count(inBurst ? `${kind}-in-burst` : kind);
    } else if (kind === 'replace-client') {
      // The replacement starts while the old process runs: same nodeId, same cache path (its lock must keep the
      // two apart; without a cache the cluster answers the new incarnation lease_held). Every other one is a
      // client with a cache.
      const cached = replaceCount++ % 2 === 0;
      const old = pick(clients.filter((x) => alive(x) && hasCache(x.k) === cached));
      if (!old) continue;
      resume(old);
      restart(old.k);
      count(cached ? 'replace-client-same-cache' : 'replace-client');
      pending.push(sleep(500 + rand() * 1500).then(() => stopGracefully(old)));
    } else if (kind === 'twin-client') {
      // A second process with the same nodeId, with a cache of its own (even slots) or none, for a few seconds.
      const k = Math.floor(rand() * clients.length);
      const twin = startClient(k, {
        cachePath: k % 2 === 0 ? join(dir, `cache-twin-${processSeq}.json`) : undefined,
      });
      extras.push(twin);
      count(kind);
      pending.push(sleep(2000 + rand() * 3000).then(() => stopGracefully(twin)));
    }
  }
  log('faults over; healing');
  await Promise.all(pending);
  if (etcdServers) await etcdServers.heal();
  for (const n of raftCluster?.nodes ?? []) if (!n.running) n.start();
  for (const n of raftCluster?.nodes ?? []) if (n.paused) n.signal('SIGCONT');
  for (const p of proxies) p.heal();
  await sleep(Math.max(0, end - performance.now()));

  // Graceful end: every client releases its lease and exits.
  log('stopping clients');
  await Promise.all(everyone.map(stopGracefully));
} catch (e) {
  console.error(e);
  exitCode = 2;
} finally {
  log('stopping the cluster');
  for (const c of everyone) await kill9(c);
  await raftCluster?.stopAll();
  await etcdServers?.stop();
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
const r = checkChaosHistory(readChaosRun(dir));
// Worker IDs must really have changed hands, or the interval checks proved nothing.
const violations = chaosViolations(r) + (r.reusedWorkerIds > 0 ? 0 : 1);
if (r.reusedWorkerIds === 0) console.error('no worker ID changed hands: the run checked no hand-over');
if (verbose) {
  for (const s of summaries) process.stderr.write(`${s}\n`);
  for (const e of r.examples) process.stderr.write(`example: ${e}\n`);
}
const { examples, ...counts } = r;
console.log(
  JSON.stringify({
    ...counts,
    violations,
    faultsInjected,
    faults: faultCounts,
    clients: clientCount,
    ...(etcdServers ? { store: 'etcd' } : {}),
    ...(bugs.length > 0 ? { bugs } : {}),
    clientStats,
    seconds: Math.round((performance.now() - t0) / 100) / 10,
    ...(violations > 0 ? { examples: examples.slice(0, 8) } : {}),
  }),
);
if (keepDir === undefined && violations === 0 && exitCode === 0)
  rmSync(dir, { recursive: true, force: true });
if (violations > 0 || exitCode !== 0) {
  if (keepDir === undefined) console.error(`records kept in ${dir}`);
  raftCluster?.cleanup();
  etcdServers?.cleanup();
  process.exit(violations > 0 ? 1 : exitCode);
}
raftCluster?.cleanup();
etcdServers?.cleanup();
process.exit(0);
