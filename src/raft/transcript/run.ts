// Runs a transcript: every block's command against one fresh Env, in order, comparing what it
// prints with the expected output. Returns the file as it should read (for rewriting) and a
// readable diff of every block that differs.

import { type Block, parseTranscript, renderTranscript } from './datadriven.js';
import { CommandError, Env } from './env.js';

export interface TranscriptResult {
  /** The file with every expected output replaced by the actual one. */
  rewritten: string;
  /** Blocks whose output differs, as readable diffs (empty when the transcript passes). */
  mismatches: string[];
}

export class TranscriptError extends Error {
  constructor(file: string, block: Block, cause: unknown) {
    const why =
      cause instanceof Error
        ? `${cause.name === 'Error' ? '' : `${cause.name}: `}${cause.message}`
        : String(cause);
    super(`${file}:${block.line}: ${block.source.trim()}: ${why}`);
    this.name = 'TranscriptError';
    if (!(cause instanceof CommandError) && cause instanceof Error && cause.stack) {
      this.stack = `${this.message}\n${cause.stack}`;
    }
  }
}

export function runTranscript(file: string, content: string): TranscriptResult {
  const parts = parseTranscript(file, content);
  const env = new Env();
  const outputs: string[][] = [];
  const mismatches: string[] = [];
  for (const p of parts) {
    if (p.kind !== 'block') continue;
    const b = p.block;
    let actual: string[];
    try {
      actual = env.run(b);
    } catch (err) {
      throw new TranscriptError(file, b, err);
    }
    outputs.push(actual);
    if (actual.join('\n') !== b.expected.join('\n')) {
      mismatches.push(`${file}:${b.line}: ${b.source.trim()}\n${lineDiff(b.expected, actual, b.line + 2)}`);
    }
  }
  return { rewritten: renderTranscript(parts, outputs), mismatches };
}

/**
 * A unified-style diff of a block's expected and actual output: "-" expected only, "+" actual only,
 * with up to `context` unchanged lines around each change; each hunk names the file line where it
 * starts (`firstLine` is the file line of the first output line).
 */
export function lineDiff(
  expected: readonly string[],
  actual: readonly string[],
  firstLine = 1,
  context = 3,
): string {
  const n = expected.length;
  const m = actual.length;
  // Longest common subsequence lengths of the suffixes, filled from the end.
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  const at = (i: number, j: number): number => (lcs[i] as number[])[j] as number;
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      (lcs[i] as number[])[j] =
        expected[i] === actual[j] ? at(i + 1, j + 1) + 1 : Math.max(at(i + 1, j), at(i, j + 1));
    }
  }
  const ops: { op: ' ' | '-' | '+'; text: string; line: number }[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && expected[i] === actual[j]) {
      ops.push({ op: ' ', text: expected[i] as string, line: firstLine + i });
      i++;
      j++;
    } else if (i < n && (j === m || at(i + 1, j) >= at(i, j + 1))) {
      ops.push({ op: '-', text: expected[i] as string, line: firstLine + i });
      i++;
    } else {
      ops.push({ op: '+', text: actual[j] as string, line: firstLine + i });
      j++;
    }
  }
  const out: string[] = [];
  let shownUpTo = -1;
  for (let k = 0; k < ops.length; k++) {
    if ((ops[k] as (typeof ops)[number]).op === ' ') continue;
    const from = Math.max(k - context, shownUpTo + 1);
    let to = k;
    // Extend the hunk over every change that follows within 2 × context unchanged lines.
    for (let q = k; q < ops.length && q <= to + 2 * context; q++)
      if ((ops[q] as (typeof ops)[number]).op !== ' ') to = q;
    const end = Math.min(ops.length - 1, to + context);
    if (from > shownUpTo + 1 || out.length === 0)
      out.push(`  @@ line ${(ops[from] as (typeof ops)[number]).line}`);
    for (let q = from; q <= end; q++) {
      const o = ops[q] as (typeof ops)[number];
      out.push(` ${o.op} ${o.text}`);
    }
    shownUpTo = end;
    k = end;
  }
  return out.join('\n');
}
