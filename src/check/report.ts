// Human-readable verdicts: what a developer reads when a chaos run fails.

import type { CheckResult, PartitionResult } from './linearizability.js';

export interface FormatOptions {
  /** How many operations of the longest linearizable prefix to show (its tail). Default 10. */
  prefixTail?: number;
  /** How many candidate operations to list per illegal partition. Default 10. */
  maxCandidates?: number;
}

const keyName = (key: string) => (key === '' ? '(single object)' : JSON.stringify(key));

export function formatCheckResult(
  result: CheckResult<unknown, unknown>,
  options: FormatOptions = {},
): string {
  const prefixTail = options.prefixTail ?? 10;
  const maxCandidates = options.maxCandidates ?? 10;
  const lines: string[] = [];
  const unknownParts = result.partitions.filter((p) => p.result === 'unknown');
  const headline = {
    ok: 'LINEARIZABLE',
    illegal: 'NOT LINEARIZABLE',
    unknown: 'UNKNOWN (check did not finish)',
  }[result.result];
  lines.push(
    `${headline}: model ${result.model}, ${result.operations} operations, ` +
      `${result.partitions.length} partitions (${result.partitionsChecked} checked), ` +
      `${result.elapsedMs.toFixed(0)} ms`,
  );
  for (const p of result.illegal) lines.push(...formatIllegal(p, prefixTail, maxCandidates));
  for (const p of unknownParts) {
    lines.push(
      `  key ${keyName(p.key)}: unknown (${p.reason}) after ${p.elapsedMs.toFixed(0)} ms, ${p.operations} ops`,
    );
  }
  return lines.join('\n');
}

function formatIllegal(
  p: PartitionResult<unknown, unknown>,
  prefixTail: number,
  maxCandidates: number,
): string[] {
  const f = p.failure;
  const lines = [
    `  key ${keyName(p.key)}: not linearizable (${p.operations} ops, ${p.unknownOutcomes} unknown outcomes)`,
  ];
  if (!f) return lines;
  const prefix = f.longestPrefix;
  lines.push(
    `    longest linearizable prefix: ${prefix.length} ops` +
      (prefix.length > prefixTail ? `, last ${prefixTail}:` : ':'),
  );
  if (prefix.length > prefixTail) lines.push('      ...');
  for (const d of prefix.slice(-prefixTail)) lines.push(`      ${d.text}`);
  lines.push(`    state after prefix: ${f.stateAfterPrefix}`);
  lines.push(
    `    ${f.notLinearized} op(s) with a known outcome could not follow it; the candidates to come next were:`,
  );
  for (const c of f.candidates.slice(0, maxCandidates)) {
    // The first to return bounds the window: it had to be linearized before anything invoked later.
    const first = c.op === f.mustPrecede?.op ? ' (returned first)' : '';
    lines.push(`      ${c.text}${first}  <- ${c.reason}`);
  }
  if (f.candidates.length > maxCandidates)
    lines.push(`      ... ${f.candidates.length - maxCandidates} more`);
  return lines;
}
