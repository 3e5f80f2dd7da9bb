// One full-stack simulation run: build the world from a seed, run the workload under faults,
// heal, check liveness and the oracles, and report.

import type { InvariantViolation } from '../checker.js';
import { MAX_SEED, Prng } from '../prng.js';
import { Trace } from '../trace.js';
import { routeGlobalTimers } from './global-timers.js';
import { HttpRouter } from './http-router.js';
import { checkKvHistories, KvClient, KvHistory } from './kv-workload.js';
import { QUIET_NET, VirtualNetwork } from './network.js';
import { errText, NodeHost as Host, type NodeHost, type NodeSettings } from './node-host.js';
import { Machine, MachineClock, SimProcess } from './process.js';
import { RaftObserver } from './raft-observer.js';
import { immediates, Scheduler } from './scheduler.js';
import type { Failure, FailureKind, World } from './world.js';

export interface FullSimOptions {
  seed: number;
  nodes?: number;
  kvClients?: number;
  /** Simulated seconds of workload (and faults). */
  seconds?: number;
  /** Simulated seconds the healed cluster has to show progress. */
  healSeconds?: number;
  storage?: 'durable' | 'memory';
  /** Trace lines kept for the failure report. */
  traceTail?: number;
  /** Every trace line, as it happens. */
  verbose?: (line: string) => void;
  bugs?: Iterable<string>;
}

export interface FullSimStats {
  events: number;
  simMs: number;
  messages: number;
  httpRequests: number;
  kvOps: number;
  acknowledgedWrites: number;
  leaderTerms: number;
  unattributedTimers: number;
}

export interface FullSimResult {
  seed: number;
  ok: boolean;
  failure?: Failure;
  traceHash: string;
  traceLines: number;
  tail: string[];
  stats: FullSimStats;
  elapsedMs: number;
}

const WALL_EPOCH_MS = Date.UTC(2026, 5, 1);

class RunWorld implements World {
  readonly sched = new Scheduler();
  readonly bugs: ReadonlySet<string>;
  failure: Failure | undefined;
  private readonly root: Prng;
  private pid = 100;
  private readonly procs = new Map<number, SimProcess>();

  constructor(
    readonly seed: number,
    readonly traceLog: Trace,
    bugs: Iterable<string>,
  ) {
    this.root = new Prng(seed);
    this.bugs = new Set(bugs);
  }

  rng(label: string): Prng {
    return this.root.fork(label);
  }

  trace(line: string): void {
    this.traceLog.add(this.sched.nowUs, line);
  }

  nextPid(): number {
    return ++this.pid;
  }

  register(p: SimProcess): void {
    this.procs.set(p.pid, p);
  }

  isPidAlive(pid: number): boolean {
    return this.procs.get(pid)?.alive ?? false;
  }

  fail(kind: FailureKind, detail: string): void {
    this.trace(`FAILURE ${kind}: ${detail}`);
    this.failure ??= { kind, detail, atUs: this.sched.nowUs };
  }
}

export async function runFullSim(o: FullSimOptions): Promise<FullSimResult> {
  if (!Number.isSafeInteger(o.seed) || o.seed < 0 || o.seed > MAX_SEED) {
    throw new RangeError(`seed must be an integer in [0, ${MAX_SEED}], got ${o.seed}`);
  }
  const started = performance.now();
  const nodeCount = o.nodes ?? 3;
  const trace = new Trace(o.traceTail ?? 60, o.verbose);
  const w = new RunWorld(o.seed, trace, o.bugs ?? []);
  const sched = w.sched;
  const rng = w.rng('run');

  const onProcessError = (err: unknown) => w.fail('process-crash', `uncaught: ${errText(err)}`);
  immediates.install();
  immediates.onError = onProcessError;
  const timers = routeGlobalTimers(sched);
  process.on('unhandledRejection', onProcessError);

  const net = new VirtualNetwork(sched, w.rng('net'), { ...QUIET_NET }, (l) => w.trace(l));
  const observer = new RaftObserver(
    (l) => w.trace(l),
    (v: InvariantViolation) => w.fail('raft', v.message),
  );
  net.onSend = (m) => observer.sent(m);
  const router = new HttpRouter(w, () => net.conditions);

  const settings: NodeSettings = {
    tickMs: 50,
    electionTicks: 10,
    heartbeatTicks: 1,
    snapshotEvery: 200,
    trailingEntries: 50,
    proposalTimeoutMs: 3000,
    storage: o.storage ?? 'durable',
    syncUs: [300, 3000],
    leaseTtlMs: 2000,
  };
  const members = Array.from({ length: nodeCount }, (_, i) => ({
    id: i + 1,
    peerAddr: `n${i + 1}:7000`,
    httpAddr: `n${i + 1}:8080`,
  }));
  const hosts: NodeHost[] = [];
  let leaderTerms = 0;
  for (const m of members) {
    const h = new Host(
      w,
      m.id,
      m,
      members,
      settings,
      net,
      observer,
      {
        leaseEvent: () => {},
        stopped: (host, reason) => {
          if (!host.diskFaulted)
            w.fail('process-crash', `n${host.id} stopped without a disk fault: ${reason}`);
        },
      },
      1,
      WALL_EPOCH_MS,
    );
    hosts.push(h);
    router.addHost(h);
  }
  for (const h of hosts) h.boot();

  const history = new KvHistory();
  const endpoints = members.map((m) => `http://${m.httpAddr}`);
  const kvClients: KvClient[] = [];
  for (let i = 0; i < (o.kvClients ?? 3); i++) {
    const name = `kv${i + 1}`;
    const machine = new Machine(name, new MachineClock(sched, 1, rng.range(1_000, 1_000_000), WALL_EPOCH_MS));
    const proc = new SimProcess(sched, machine, `${name}#1`, w.nextPid());
    w.register(proc);
    const c = new KvClient(
      w,
      name,
      proc,
      router.fetchFor(proc, name, 1000),
      endpoints,
      history,
      w.rng(name),
      [20, 200],
    );
    kvClients.push(c);
    sched.after(0, proc, 'kv-start', () => c.start());
  }

  let resultFailure: Failure | undefined;
  try {
    const stop = () => w.failure !== undefined;
    await sched.runUntil((o.seconds ?? 10) * 1_000_000, stop);
    if (!w.failure) {
      // Healing: every node up, the network quiet; the clients stop and a final read must succeed.
      for (const c of kvClients) c.stop();
      net.conditions = { ...QUIET_NET };
      net.setBlocked([]);
      for (const h of hosts) if (!h.up && h.state !== 'booting') h.boot();
      const deadline = sched.nowUs + (o.healSeconds ?? 10) * 1_000_000;
      let healed = false;
      while (!w.failure && sched.nowUs < deadline && !healed) {
        const reader = kvClients[0] as KvClient;
        let done = false;
        sched.after(0, reader.proc, 'final-reads', () => {
          void reader.finalReads().then((ok) => {
            healed = ok;
            done = true;
          });
        });
        await sched.runUntil(deadline, () => done || w.failure !== undefined);
        if (!healed && !w.failure) await sched.runUntil(sched.nowUs + 200_000, stop);
      }
      if (!healed && !w.failure) {
        w.fail('liveness', `no linearizable read of every key within ${o.healSeconds ?? 10} s of healing`);
      }
      if (!w.failure) {
        const r = checkKvHistories(history, 10_000);
        if (r.failure) w.fail('linearizability', r.failure);
      }
    }
    resultFailure = w.failure;
  } catch (err) {
    resultFailure = { kind: 'harness', detail: errText(err), atUs: sched.nowUs };
    w.trace(`harness error: ${err instanceof Error ? err.stack : String(err)}`);
  } finally {
    process.off('unhandledRejection', onProcessError);
    timers.undo();
    immediates.onError = undefined;
    immediates.uninstall();
  }
  for (const h of hosts) leaderTerms = Math.max(leaderTerms, h.node?.status().term ?? 0);
  return {
    seed: o.seed,
    ok: resultFailure === undefined,
    ...(resultFailure ? { failure: resultFailure } : {}),
    traceHash: trace.hash(),
    traceLines: trace.lines,
    tail: trace.tail(),
    stats: {
      events: sched.events,
      simMs: Math.round(sched.nowUs / 1000),
      messages: net.stats.sent,
      httpRequests: router.stats.requests,
      kvOps: history.registers.length + history.counters.length,
      acknowledgedWrites: history.acknowledgedWrites,
      leaderTerms,
      unattributedTimers: timers.unattributed(),
    },
    elapsedMs: performance.now() - started,
  };
}
