// `npm run sim:full -- [options]`: the full-stack deterministic simulation over a range of seeds.
//
//   --seeds N          run N seeds, --start .. --start+N-1 (default 100)
//   --start S          first seed of the range (default 1)
//   --seed S           run exactly one seed and show its trace view (overrides --seeds/--start)
//   --profile P        fault profile (default swarm; see --help)
//   --nodes N          cluster size, 1..7 (default 3)
//   --clients N        SDK lease clients (default 10)
//   --kv-clients N     key-value/counter clients (default 3)
//   --seq-clients N    sequence clients (default: 2 in about a third of the seeds, 0 in the others)
//   --snowflake-clients N   server-side Snowflake clients (default: 2 or 3 in about a third of the seeds, else 0)
//   --resp-lease-clients N  RESP lease clients, WORKER.* over RESP (default: 1-3 in about a quarter of the swarm
//                      seeds, else 0)
//   --seconds S        simulated seconds of workload and faults (default 10)
//   --heal-seconds S   simulated seconds the healed cluster has to recover (default 15)
//   --storage durable|memory   DurableStorage on the MemoryFs twin (default), or MemoryNodeStorage
//   --eio-restart reboot|process   how a node that stopped on an fsync error is restarted (default reboot)
//   --peer-transport sim|production|drawn   Raft traffic through the simulator's NodeTransport, the production
//                      PeerTransport over simulated TCP, or either as the seed draws it (default drawn)
//   --hostile drawn|none|peer|resp|both   strangers on the peer ports and/or hostile RESP clients (default drawn:
//                      both in every seed of profile hostile, none elsewhere)
//   --defaults on|off|drawn   run with what users run: `floe serve`'s and the SDK's defaults (10 s leases, 2 s
//                      request timeouts, a snapshot every 10,000 entries, 64 MiB WAL segments, 20-30 s of faults),
//                      client hosts in PID namespaces of their own in half of them; default drawn (about 1 seed in 6)
//   --leader-lease on|off|drawn   every node runs `floe serve --leader-lease` (strict INCR served from the Raft
//                      leader lease, decision 0009); default drawn (half the seeds with sequence clients)
//   --lease-rolling on|off|drawn   in leader-lease seeds, 1 to nodes - 1 members run without the flag (a rolling
//                      enable); default drawn (half the leader-lease seeds)
//   --bug NAME         re-introduce a known bug (repeatable; test-only switches, see docs/simulator-full.md)
//   --workarounds none|A,B   harness workarounds for open findings (default: all of them, see docs)
//   --jobs J           run seeds in J child processes (default 1)
//   --tail N           trace lines shown before a failure (default 40)
//   --verbose          with --seed: print every trace line as it happens
//   --json             one JSON line per failing seed and one for the summary
//
// Exit status: 0 no failure; 1 a safety failure; 2 only liveness failures; 64 bad usage.

import { fork } from 'node:child_process';
import { parseArgs } from 'node:util';
import { MAX_SEED } from '../prng.js';
import { codeIdentity } from './code-identity.js';
import { PROFILE_NAMES, PROFILES } from './config.js';
import { type FullSimOptions, type FullSimResult, KNOWN_WORKAROUNDS, runFullSim } from './run.js';

class UsageError extends Error {}

interface Cli {
  seeds: number[];
  single: boolean;
  opts: Omit<FullSimOptions, 'seed'>;
  jobs: number;
  tail: number;
  verbose: boolean;
  json: boolean;
  /** The options that differ from the defaults, for the replay command. */
  replayArgs: string[];
}

const USAGE = `usage: npm run sim:full -- [--seeds N] [--start S] [--seed S] [--profile P] [--nodes N]
         [--clients N] [--kv-clients N] [--seq-clients N] [--snowflake-clients N]
         [--resp-lease-clients N] [--seconds S] [--heal-seconds S]
         [--storage durable|memory] [--eio-restart reboot|process] [--peer-transport sim|production|drawn] [--hostile drawn|none|peer|resp|both] [--defaults on|off|drawn] [--leader-lease on|off|drawn] [--lease-rolling on|off|drawn] [--bug NAME]...
         [--workarounds none|LIST] [--jobs J] [--tail N]
         [--verbose] [--json]
profiles:
${PROFILE_NAMES.map((n) => `  ${n.padEnd(9)} ${PROFILES[n]?.summary ?? ''}`).join('\n')}`;

function int(name: string, raw: string | undefined, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined;
  const v = Number(raw);
  if (!Number.isSafeInteger(v) || v < min || v > max) {
    throw new UsageError(`--${name} must be an integer in [${min}, ${max}], got "${raw}"`);
  }
  return v;
}

function parse(argv: string[]): Cli {
  const { values } = parseArgs({
    args: argv,
    options: {
      seeds: { type: 'string' },
      start: { type: 'string' },
      seed: { type: 'string' },
      profile: { type: 'string' },
      nodes: { type: 'string' },
      clients: { type: 'string' },
      'kv-clients': { type: 'string' },
      'seq-clients': { type: 'string' },
      'snowflake-clients': { type: 'string' },
      'resp-lease-clients': { type: 'string' },
      seconds: { type: 'string' },
      'heal-seconds': { type: 'string' },
      storage: { type: 'string' },
      'eio-restart': { type: 'string' },
      'peer-transport': { type: 'string' },
      hostile: { type: 'string' },
      defaults: { type: 'string' },
      'leader-lease': { type: 'string' },
      'lease-rolling': { type: 'string' },
      bug: { type: 'string', multiple: true },
      workarounds: { type: 'string' },
      jobs: { type: 'string' },
      tail: { type: 'string' },
      verbose: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean' },
      'worker-seeds': { type: 'string' },
    },
    strict: true,
  });
  if (values.help) throw new UsageError('');
  const profile = values.profile ?? 'swarm';
  if (!PROFILES[profile])
    throw new UsageError(`--profile must be one of ${PROFILE_NAMES.join(', ')}, got "${profile}"`);
  const storage = values.storage ?? 'durable';
  if (storage !== 'durable' && storage !== 'memory') {
    throw new UsageError(`--storage must be durable or memory, got "${storage}"`);
  }
  const eio = values['eio-restart'] ?? 'reboot';
  if (eio !== 'reboot' && eio !== 'process') {
    throw new UsageError(`--eio-restart must be reboot or process, got "${eio}"`);
  }
  const peerTransport = values['peer-transport'] ?? 'drawn';
  if (peerTransport !== 'sim' && peerTransport !== 'production' && peerTransport !== 'drawn') {
    throw new UsageError(`--peer-transport must be sim, production or drawn, got "${peerTransport}"`);
  }
  const hostile = values.hostile ?? 'drawn';
  if (!['drawn', 'none', 'peer', 'resp', 'both'].includes(hostile)) {
    throw new UsageError(`--hostile must be drawn, none, peer, resp or both, got "${hostile}"`);
  }
  const hostileOverrides =
    hostile === 'drawn'
      ? {}
      : {
          peerStrangers: hostile === 'peer' || hostile === 'both',
          respHostile: hostile === 'resp' || hostile === 'both',
        };
  const leaderLease = values['leader-lease'] ?? 'drawn';
  if (leaderLease !== 'on' && leaderLease !== 'off' && leaderLease !== 'drawn') {
    throw new UsageError(`--leader-lease must be on, off or drawn, got "${leaderLease}"`);
  }
  const leaseRolling = values['lease-rolling'] ?? 'drawn';
  if (leaseRolling !== 'on' && leaseRolling !== 'off' && leaseRolling !== 'drawn') {
    throw new UsageError(`--lease-rolling must be on, off or drawn, got "${leaseRolling}"`);
  }
  const defaults = values.defaults ?? 'drawn';
  if (defaults !== 'on' && defaults !== 'off' && defaults !== 'drawn') {
    throw new UsageError(`--defaults must be on, off or drawn, got "${defaults}"`);
  }
  const one = int('seed', values.seed, 0, MAX_SEED);
  const count = int('seeds', values.seeds, 1, 100_000_000) ?? 100;
  const start = int('start', values.start, 0, MAX_SEED) ?? 1;
  let seeds: number[];
  if (values['worker-seeds'] !== undefined) {
    seeds = decodeSeedShare(values['worker-seeds']);
  } else if (one !== undefined) {
    seeds = [one];
  } else {
    if (start + count - 1 > MAX_SEED) throw new UsageError(`--start + --seeds goes past ${MAX_SEED}`);
    seeds = Array.from({ length: count }, (_, i) => start + i);
  }
  const replayArgs: string[] = [];
  const keep = (flag: string, v: string | undefined, def?: string) => {
    if (v !== undefined && v !== def) replayArgs.push(`--${flag}`, v);
  };
  keep('profile', profile, 'swarm');
  keep('nodes', values.nodes);
  keep('clients', values.clients);
  keep('kv-clients', values['kv-clients']);
  keep('seq-clients', values['seq-clients']);
  keep('snowflake-clients', values['snowflake-clients']);
  keep('resp-lease-clients', values['resp-lease-clients']);
  keep('seconds', values.seconds);
  keep('heal-seconds', values['heal-seconds']);
  keep('storage', storage, 'durable');
  keep('eio-restart', eio, 'reboot');
  keep('peer-transport', peerTransport, 'drawn');
  keep('hostile', hostile, 'drawn');
  keep('defaults', defaults, 'drawn');
  keep('leader-lease', leaderLease, 'drawn');
  keep('lease-rolling', leaseRolling, 'drawn');
  for (const b of values.bug ?? []) replayArgs.push('--bug', b);
  keep('workarounds', values.workarounds);
  const workarounds =
    values.workarounds === undefined
      ? undefined
      : values.workarounds === 'none'
        ? []
        : values.workarounds.split(',');
  for (const x of workarounds ?? []) {
    if (!KNOWN_WORKAROUNDS.includes(x)) {
      throw new UsageError(
        `--workarounds takes none or a list of: ${KNOWN_WORKAROUNDS.join(', ')}; got "${x}"`,
      );
    }
  }
  return {
    seeds,
    single: one !== undefined,
    opts: {
      profile,
      nodes: int('nodes', values.nodes, 1, 7),
      leaseClients: int('clients', values.clients, 0, 200),
      kvClients: int('kv-clients', values['kv-clients'], 1, 50),
      seqClients: int('seq-clients', values['seq-clients'], 0, 50),
      snowflakeClients: int('snowflake-clients', values['snowflake-clients'], 0, 50),
      respLeaseClients: int('resp-lease-clients', values['resp-lease-clients'], 0, 50),
      seconds: int('seconds', values.seconds, 1, 3_600),
      healSeconds: int('heal-seconds', values['heal-seconds'], 1, 3_600),
      storage,
      eioRestart: eio,
      peerTransport,
      ...hostileOverrides,
      ...(defaults === 'drawn' ? {} : { defaults }),
      ...(leaderLease === 'drawn' ? {} : { leaderLease: leaderLease === 'on' }),
      ...(leaseRolling === 'drawn' ? {} : { leaseRolling: leaseRolling === 'on' }),
      bugs: values.bug ?? [],
      ...(workarounds === undefined ? {} : { workarounds }),
    },
    jobs: int('jobs', values.jobs, 1, 64) ?? 1,
    tail: int('tail', values.tail, 0, 10_000) ?? 40,
    verbose: values.verbose ?? false,
    json: values.json ?? false,
    replayArgs,
  };
}

/** The one-line command that replays a seed with the same options. */
export function replayCommand(seed: number, replayArgs: readonly string[]): string {
  return ['npm run sim:full -- --seed', String(seed), ...replayArgs].join(' ');
}

interface Summary {
  seeds: number;
  failures: Array<{ seed: number; kind: string; detail: string }>;
  elapsedMs: number;
  events: number;
  ids: number;
}

class Progress {
  private lastDraw = 0;
  private readonly tty = process.stderr.isTTY === true;
  private lastPct = -1;
  constructor(
    private readonly total: number,
    private readonly started: number,
  ) {}

  draw(done: number, failures: number, force = false): void {
    if (this.total < 2) return;
    const now = performance.now();
    const pct = Math.floor((done / this.total) * 100);
    if (this.tty) {
      if (!force && now - this.lastDraw < 200) return;
      this.lastDraw = now;
      const width = 30;
      const filled = Math.round((done / this.total) * width);
      const rate = done / Math.max(0.001, (now - this.started) / 1000);
      const eta = rate > 0 ? Math.round((this.total - done) / rate) : 0;
      process.stderr.write(
        `\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${this.total} seeds, ` +
          `${rate.toFixed(1)}/s, ${failures} failing, ETA ${eta}s  `,
      );
      if (done === this.total) process.stderr.write('\n');
    } else if (pct >= this.lastPct + 10 || done === this.total) {
      this.lastPct = pct;
      process.stderr.write(`${done}/${this.total} seeds, ${failures} failing\n`);
    }
  }
}

function report(r: FullSimResult, cli: Cli, withTail: boolean): void {
  const f = r.failure;
  if (!f) return;
  if (cli.json) {
    process.stdout.write(
      `${JSON.stringify({ seed: r.seed, profile: r.profile, kind: f.kind, detail: f.detail, atMs: f.atUs / 1000, replay: replayCommand(r.seed, cli.replayArgs) })}\n`,
    );
    return;
  }
  const lines = [`seed ${r.seed} FAILED at t=${(f.atUs / 1000).toFixed(3)}ms: ${f.kind}: ${f.detail}`];
  if (withTail && r.tail.length > 0) {
    const tail = r.tail.slice(-cli.tail);
    lines.push(`  last ${tail.length} events before the failure:`, ...tail.map((l) => `    ${l}`));
  }
  lines.push(`  replay: ${replayCommand(r.seed, cli.replayArgs)}`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** Set by SIGINT/SIGTERM in a sweep: stop after the seeds in progress and print the summary of what ran. */
let stopRequested = false;
const workers = new Set<ReturnType<typeof fork>>();

async function runLocal(cli: Cli, onResult: (r: FullSimResult) => void): Promise<void> {
  for (const seed of cli.seeds) {
    if (stopRequested) return;
    const verbose = cli.single && cli.verbose ? (l: string) => process.stdout.write(`${l}\n`) : undefined;
    onResult(await runFullSim({ ...cli.opts, seed, traceTail: Math.max(cli.tail, 1), verbose }));
  }
}

/**
 * A worker's seeds as `first:step:count` runs: a share of a long sweep listed one by one passes the
 * kernel's 128 KiB limit on one argument (E2BIG at about 20,000 seeds).
 */
export function encodeSeedShare(seeds: readonly number[]): string {
  const runs: string[] = [];
  for (let i = 0; i < seeds.length; ) {
    const first = seeds[i]!;
    const step = i + 1 < seeds.length ? seeds[i + 1]! - first : 1;
    let n = 1;
    while (i + n < seeds.length && seeds[i + n]! === first + n * step) n++;
    runs.push(`${first}:${step}:${n}`);
    i += n;
  }
  return runs.join(',');
}

export function decodeSeedShare(text: string): number[] {
  const out: number[] = [];
  for (const run of text.split(',')) {
    const [first, step, n] = run.split(':').map(Number) as [number, number, number];
    for (let k = 0; k < n; k++) out.push(first + k * step);
  }
  return out;
}

/** Splits the seeds over child processes (each runs this CLI on its share and reports over IPC). */
async function runJobs(cli: Cli, argv: string[], onResult: (r: FullSimResult) => void): Promise<void> {
  const shares: number[][] = Array.from({ length: cli.jobs }, () => []);
  for (const [i, s] of cli.seeds.entries()) shares[i % cli.jobs]!.push(s);
  const base = argv.filter(
    (a, i) =>
      !['--jobs', '--seeds', '--start', '--seed'].includes(a) &&
      !['--jobs', '--seeds', '--start', '--seed'].includes(argv[i - 1] ?? ''),
  );
  await Promise.all(
    shares
      .filter((s) => s.length > 0)
      .map(
        (share) =>
          new Promise<void>((resolve, reject) => {
            const child = fork(
              process.argv[1] as string,
              [...base, '--worker-seeds', encodeSeedShare(share)],
              {
                stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
              },
            );
            workers.add(child);
            child.on('message', (m) => {
              if (!stopRequested) onResult(m as FullSimResult);
            });
            child.on('error', reject);
            child.on('exit', (code) => {
              workers.delete(child);
              if (code === 0 || stopRequested) resolve();
              else reject(new Error(`a worker exited with status ${code}`));
            });
          }),
      ),
  );
}

export async function main(argv: string[]): Promise<number> {
  let cli: Cli;
  try {
    cli = parse(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      if (err.message) process.stderr.write(`sim:full: ${err.message}\n`);
      process.stderr.write(`${USAGE}\n`);
      return err.message ? 64 : 0;
    }
    throw err;
  }
  if (process.send && argv.includes('--worker-seeds')) {
    // A child of --jobs: run the share, send every result to the parent.
    for (const seed of cli.seeds) {
      const r = await runFullSim({ ...cli.opts, seed, traceTail: Math.max(cli.tail, 1) });
      await new Promise<void>((res) => process.send!(r, () => res()));
    }
    return 0;
  }
  const started = performance.now();
  const summary: Summary = { seeds: 0, failures: [], elapsedMs: 0, events: 0, ids: 0 };
  const progress = new Progress(cli.seeds.length, started);
  let shownTails = 0;
  // A long sweep stopped by hand still reports what it ran (a second signal ends it at once).
  const onSignal = () => {
    if (stopRequested) process.exit(130);
    stopRequested = true;
    for (const w of workers) w.kill('SIGTERM');
  };
  if (!cli.single) {
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  }
  const onResult = (r: FullSimResult) => {
    summary.seeds++;
    summary.events += r.stats.events;
    summary.ids += r.stats.oracle.ids;
    if (r.failure) {
      summary.failures.push({ seed: r.seed, kind: r.failure.kind, detail: r.failure.detail });
      if (progress && process.stderr.isTTY) process.stderr.write('\r\x1b[K');
      report(r, cli, cli.single || shownTails++ < 3);
    } else if (cli.single && !cli.json) {
      process.stdout.write(
        `seed ${r.seed} ok (${r.profile}${r.config.productionDefaults ? ', production defaults' : ''}): ${r.stats.events} events, ${r.stats.simMs} ms simulated, ` +
          `${r.stats.oracle.ids} IDs, ${r.stats.acknowledgedWrites} acknowledged writes, trace ${r.traceHash}\n`,
      );
    }
    progress.draw(summary.seeds, summary.failures.length);
  };
  if (cli.jobs > 1 && cli.seeds.length > 1) await runJobs(cli, argv, onResult);
  else await runLocal(cli, onResult);
  summary.elapsedMs = performance.now() - started;
  const rate = summary.seeds / (summary.elapsedMs / 1000);
  if (cli.json) {
    process.stdout.write(
      `${JSON.stringify({ summary: { seeds: summary.seeds, failures: summary.failures.length, seedsPerSecond: Number(rate.toFixed(2)), events: summary.events, ids: summary.ids, code: codeIdentity() } })}\n`,
    );
  } else if (!cli.single) {
    const kinds = new Map<string, number>();
    for (const f of summary.failures) kinds.set(f.kind, (kinds.get(f.kind) ?? 0) + 1);
    process.stdout.write(
      `${stopRequested ? 'stopped: ' : ''}${summary.seeds} seeds (${cli.opts.profile}), ${summary.failures.length} failing` +
        (kinds.size > 0 ? ` (${[...kinds].map(([k, n]) => `${k} ${n}`).join(', ')})` : '') +
        `, ${summary.ids} IDs checked, ${(summary.elapsedMs / 1000).toFixed(1)} s, ${rate.toFixed(2)} seeds/s, code ${codeIdentity()}\n`,
    );
  }
  if (summary.failures.some((f) => f.kind !== 'liveness')) return 1;
  return summary.failures.length > 0 ? 2 : 0;
}

if (process.argv[1] && /[/\\]sim[/\\]full[/\\]cli\.[jt]s$/.test(process.argv[1])) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`sim:full: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 70;
    },
  );
}
