// How runs are reported: one block per failing seed (seed, first violated invariant with its
// node/term/index, the replay command, the last events) and one summary line per sweep.

import type { SimResult } from './simulation.js';
import { formatTime } from './trace.js';

export interface SweepSummary {
  seedsRun: number;
  safetyViolations: number;
  livenessFailures: number;
  /** Runs where the simulator itself threw (a simulator bug, not a core bug). */
  errors: number;
  virtualUs: number;
  wallMs: number;
  /** Up to 20 failing seeds, in order. */
  firstFailures: number[];
}

export function formatFailure(r: SimResult, withTail: boolean): string {
  const lines: string[] = [];
  if (r.safety) {
    const s = r.safety;
    lines.push(`seed ${r.seed}: SAFETY VIOLATION ${s.invariant}`);
    lines.push(
      `  node=${s.node ?? '-'} term=${s.term ?? '-'} index=${s.index ?? '-'} at ${formatTime(s.atUs)} (event ${s.event})`,
    );
    lines.push(`  ${s.message}`);
  } else {
    lines.push(`seed ${r.seed}: LIVENESS FAILURE (safe but not live after faults healed)`);
    lines.push(`  ${r.liveness.reason ?? ''}`);
  }
  lines.push(`  replay: ${r.replay}`);
  if (withTail && r.traceTail.length > 0) {
    lines.push('  last events:');
    for (const l of r.traceTail.slice(-15)) lines.push(`    ${l}`);
  }
  return lines.join('\n');
}

export function formatSummary(s: SweepSummary, o: { nodes: number; steps: number; faults: string }): string {
  const failures = s.firstFailures.length > 0 ? ` failing seeds: ${s.firstFailures.join(',')}` : '';
  return (
    `sim: seeds=${s.seedsRun} nodes=${o.nodes} steps=${o.steps} faults=${o.faults} ` +
    `safety_violations=${s.safetyViolations} liveness_failures=${s.livenessFailures}` +
    (s.errors > 0 ? ` simulator_errors=${s.errors}` : '') +
    ` virtual_time=${(s.virtualUs / 1e6).toFixed(1)}s wall_time=${(s.wallMs / 1000).toFixed(1)}s${failures}`
  );
}
