// Runs scripts/chaos.ts as a process (needs `npm run build`) and returns its one-line JSON summary, after checking
// that every violation count in it is 0: shared by the chaos tests of both stores.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { expect } from 'vitest';
import { repoRoot } from './harness.js';

export type ChaosSummary = Record<string, number> & {
  store?: string;
  faults: Record<string, number>;
  clientStats: Record<string, number>;
  examples?: string[];
};

/** The violation counts of the summary (src/check/chaos-history.ts); `extra` adds a mode's own. */
const VIOLATIONS = [
  'duplicates',
  'overlappingHolders',
  'tokenRegressions',
  'highWaterViolations',
  'timestampReuse',
  'nonIncreasing',
  'generatorContract',
  'clientFailures',
  'recordErrors',
  'violations',
];

export async function runChaos(args: string[], label: string, extra: string[] = []): Promise<ChaosSummary> {
  const proc = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'scripts/chaos.ts'), ...args], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  proc.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const [code] = (await once(proc, 'exit')) as [number | null];
  const line = out.trim().split('\n').at(-1) ?? '';
  let r: ChaosSummary;
  try {
    r = JSON.parse(line) as ChaosSummary;
  } catch {
    throw new Error(`no JSON summary (exit ${code}):\n${out}\n${err.slice(-2000)}`);
  }
  console.log(`${label}: ${line}`);
  expect(r.examples ?? []).toEqual([]);
  for (const k of [...VIOLATIONS, ...extra]) expect(r[k], k).toBe(0);
  expect(code).toBe(0);
  return r;
}
