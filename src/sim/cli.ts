// `npm run sim -- [options]`: runs the deterministic simulator over a range of seeds.
//
//   --seeds N        run N seeds, --start .. --start+N-1 (default 200)
//   --start S        first seed of the range (default 1)
//   --seed S         run exactly one seed (overrides --seeds/--start)
//   --nodes 3|5      initial voters (default 3)
//   --steps K        events in the fault phase of each run (default 3000)
//   --faults NAME    fault profile: none, net, partition, crash, pause, chaos, storm, lease, lease-edge
//                    (default chaos)
//   --verbose        print every event of the run(s)
//   --allow-liveness-failures   exit 0 when the only failures are liveness failures
//   --bug NAME       deliberately break something (self-test of the checkers): amnesia, unhealed-partition
//   --clock-drift X  override the profile's clock-rate spread (ticks at base × (1 ± X)), X in [0, 0.9]
//   --clock-rates spread|extremes   clock rates drawn uniformly in ± drift, or only at its two bounds
//   --election-ticks E   override the drawn election timeout, E in [3, 100]
//   --lease-margin M     override the core's lease margin (default derived from its drift bound)
//   --no-conf-changes  no membership changes in the workload
//   --prevote on|off, --check-quorum on|off   force these core options (default: drawn per seed)
//   --workaround NAME  step around a known core bug to look for the next one (repeatable):
//                    restart-applied, atomic-snapshot
//   --json           print one JSON line per failing seed and for the summary
//
// Exit status: 0 all good; 1 a safety violation; 2 a liveness failure (unless allowed); 64 bad usage.

import { parseArgs } from 'node:util';
import { MAX_SEED } from './prng.js';
import { PROFILE_NAMES, PROFILES } from './profiles.js';
import { formatFailure, formatSummary, type SweepSummary } from './report.js';
import {
  BUG_NAMES,
  type BugName,
  type ClockRates,
  runSimulation,
  SIM_DEFAULTS,
  type SimResult,
  WORKAROUND_NAMES,
  type WorkaroundName,
} from './simulation.js';

const DEFAULT_SEEDS = 200;

const USAGE = `usage: npm run sim -- [--seeds N] [--start S] [--seed S] [--nodes 3|5] [--steps K]
                      [--faults ${PROFILE_NAMES.join('|')}] [--verbose] [--allow-liveness-failures]
                      [--clock-drift X] [--clock-rates spread|extremes] [--election-ticks E] [--lease-margin M]
                      [--no-conf-changes] [--prevote on|off] [--check-quorum on|off] [--bug ${BUG_NAMES.join('|')}] [--workaround ${WORKAROUND_NAMES.join('|')}]... [--json]
profiles:
${PROFILE_NAMES.map((n) => `  ${n.padEnd(10)} ${PROFILES[n]?.summary ?? ''}`).join('\n')}`;

class UsageError extends Error {}

function intOption(name: string, raw: string | undefined, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined;
  const v = Number(raw);
  if (!Number.isSafeInteger(v) || v < min || v > max) {
    throw new UsageError(`--${name} must be an integer in [${min}, ${max}], got "${raw}"`);
  }
  return v;
}

function onOff(name: string, raw: string | undefined): boolean | undefined {
  if (raw === undefined) return undefined;
  if (raw === 'on') return true;
  if (raw === 'off') return false;
  throw new UsageError(`--${name} must be on or off, got "${raw}"`);
}

interface CliConfig {
  seeds: number[];
  nodes: 3 | 5;
  steps: number;
  faults: string;
  verbose: boolean;
  allowLiveness: boolean;
  bug: BugName | undefined;
  workarounds: WorkaroundName[];
  clockDrift: number | undefined;
  clockRates: ClockRates | undefined;
  electionTicks: number | undefined;
  leaseMarginTicks: number | undefined;
  confChanges: boolean;
  preVote: boolean | undefined;
  checkQuorum: boolean | undefined;
  json: boolean;
}

function parse(argv: string[]): CliConfig {
  const { values } = parseArgs({
    args: argv,
    options: {
      seeds: { type: 'string' },
      start: { type: 'string' },
      seed: { type: 'string' },
      nodes: { type: 'string' },
      steps: { type: 'string' },
      faults: { type: 'string' },
      verbose: { type: 'boolean', default: false },
      'allow-liveness-failures': { type: 'boolean', default: false },
      bug: { type: 'string' },
      workaround: { type: 'string', multiple: true },
      'clock-drift': { type: 'string' },
      'clock-rates': { type: 'string' },
      'election-ticks': { type: 'string' },
      'lease-margin': { type: 'string' },
      'no-conf-changes': { type: 'boolean', default: false },
      prevote: { type: 'string' },
      'check-quorum': { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const one = intOption('seed', values.seed, 0, MAX_SEED);
  const count = intOption('seeds', values.seeds, 1, 10_000_000) ?? DEFAULT_SEEDS;
  const start = intOption('start', values.start, 0, MAX_SEED) ?? 1;
  if (one === undefined && start + count - 1 > MAX_SEED)
    throw new UsageError(`--start + --seeds exceeds ${MAX_SEED}`);
  const nodes = intOption('nodes', values.nodes, 3, 5) ?? SIM_DEFAULTS.nodes;
  if (nodes !== 3 && nodes !== 5) throw new UsageError(`--nodes must be 3 or 5, got ${nodes}`);
  const steps = intOption('steps', values.steps, 0, 100_000_000) ?? SIM_DEFAULTS.steps;
  const faults = values.faults ?? SIM_DEFAULTS.faults;
  if (!PROFILE_NAMES.includes(faults)) {
    throw new UsageError(`--faults must be one of ${PROFILE_NAMES.join(', ')}, got "${faults}"`);
  }
  const bug = values.bug;
  if (bug !== undefined && !(BUG_NAMES as readonly string[]).includes(bug)) {
    throw new UsageError(`--bug must be one of ${BUG_NAMES.join(', ')}, got "${bug}"`);
  }
  const workarounds = values.workaround ?? [];
  for (const w of workarounds) {
    if (!(WORKAROUND_NAMES as readonly string[]).includes(w)) {
      throw new UsageError(`--workaround must be one of ${WORKAROUND_NAMES.join(', ')}, got "${w}"`);
    }
  }
  let clockDrift: number | undefined;
  if (values['clock-drift'] !== undefined) {
    clockDrift = Number(values['clock-drift']);
    if (!(clockDrift >= 0 && clockDrift <= 0.9)) {
      throw new UsageError(`--clock-drift must be a number in [0, 0.9], got "${values['clock-drift']}"`);
    }
  }
  const rates = values['clock-rates'];
  if (rates !== undefined && rates !== 'spread' && rates !== 'extremes') {
    throw new UsageError(`--clock-rates must be spread or extremes, got "${rates}"`);
  }
  const electionTicks = intOption('election-ticks', values['election-ticks'], 3, 100);
  const leaseMarginTicks = intOption('lease-margin', values['lease-margin'], 0, 99);
  if (leaseMarginTicks !== undefined && electionTicks !== undefined && leaseMarginTicks >= electionTicks) {
    throw new UsageError(
      `--lease-margin must be below --election-ticks (${electionTicks}), got ${leaseMarginTicks}`,
    );
  }
  const preVote = onOff('prevote', values.prevote);
  const checkQuorum = onOff('check-quorum', values['check-quorum']);
  const seeds: number[] = [];
  if (one !== undefined) seeds.push(one);
  else for (let i = 0; i < count; i++) seeds.push(start + i);
  return {
    seeds,
    nodes,
    steps,
    faults,
    verbose: values.verbose,
    allowLiveness: values['allow-liveness-failures'],
    bug: bug as BugName | undefined,
    workarounds: workarounds as WorkaroundName[],
    clockDrift,
    clockRates: rates,
    electionTicks,
    leaseMarginTicks,
    confChanges: !values['no-conf-changes'],
    preVote,
    checkQuorum,
    json: values.json,
  };
}

function main(): number {
  let cfg: CliConfig;
  try {
    cfg = parse(process.argv.slice(2));
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    console.error(USAGE);
    return 64;
  }
  const wallStart = process.hrtime.bigint();
  const summary: SweepSummary = {
    seedsRun: 0,
    safetyViolations: 0,
    livenessFailures: 0,
    errors: 0,
    virtualUs: 0,
    wallMs: 0,
    firstFailures: [],
  };
  const sink = cfg.verbose ? (line: string) => console.log(line) : undefined;
  const progressEvery = Math.max(1, Math.floor(cfg.seeds.length / 20));
  for (const [i, seed] of cfg.seeds.entries()) {
    let result: SimResult;
    try {
      result = runSimulation({
        seed,
        nodes: cfg.nodes,
        steps: cfg.steps,
        faults: cfg.faults,
        ...(cfg.bug ? { bug: cfg.bug } : {}),
        workarounds: cfg.workarounds,
        confChanges: cfg.confChanges,
        ...(cfg.preVote !== undefined ? { preVote: cfg.preVote } : {}),
        ...(cfg.checkQuorum !== undefined ? { checkQuorum: cfg.checkQuorum } : {}),
        ...(cfg.clockDrift !== undefined ? { clockDrift: cfg.clockDrift } : {}),
        ...(cfg.clockRates !== undefined ? { clockRates: cfg.clockRates } : {}),
        ...(cfg.electionTicks !== undefined ? { electionTicks: cfg.electionTicks } : {}),
        ...(cfg.leaseMarginTicks !== undefined ? { leaseMarginTicks: cfg.leaseMarginTicks } : {}),
        ...(sink ? { sink } : {}),
      });
    } catch (err) {
      // A bug in the simulator itself (not in the core): report it like a failure, keep going.
      summary.seedsRun++;
      summary.errors++;
      const text = err instanceof Error ? (err.stack ?? err.message) : String(err);
      console.log(`seed ${seed}: SIMULATOR ERROR ${text}`);
      continue;
    }
    summary.seedsRun++;
    summary.virtualUs += result.virtualUs;
    const failed = result.safety !== undefined || !result.liveness.ok;
    if (result.safety) summary.safetyViolations++;
    else if (!result.liveness.ok) summary.livenessFailures++;
    if (failed) {
      if (summary.firstFailures.length < 20) summary.firstFailures.push(seed);
      if (cfg.json)
        console.log(
          JSON.stringify({ seed, safety: result.safety, liveness: result.liveness, replay: result.replay }),
        );
      else console.log(formatFailure(result, !cfg.verbose));
    }
    if (
      !cfg.verbose &&
      cfg.seeds.length > 1 &&
      ((i + 1) % progressEvery === 0 || i + 1 === cfg.seeds.length)
    ) {
      const wall = Number(process.hrtime.bigint() - wallStart) / 1e6;
      console.error(
        `  ${i + 1}/${cfg.seeds.length} seeds, ${summary.safetyViolations} safety, ${summary.livenessFailures} liveness, ${(wall / 1000).toFixed(1)}s`,
      );
    }
  }
  summary.wallMs = Number(process.hrtime.bigint() - wallStart) / 1e6;
  console.log(
    cfg.json
      ? JSON.stringify({ summary, nodes: cfg.nodes, steps: cfg.steps, faults: cfg.faults })
      : formatSummary(summary, { nodes: cfg.nodes, steps: cfg.steps, faults: cfg.faults }),
  );
  if (summary.safetyViolations > 0 || summary.errors > 0) return 1;
  if (summary.livenessFailures > 0 && !cfg.allowLiveness) return 2;
  return 0;
}

process.exitCode = main();
