// The CLI's contract: the summary line, the replay line of a failing seed, and the exit status
// (0 good, 1 safety violation, 2 liveness failure unless allowed, 64 bad usage).

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('./cli.ts', import.meta.url));

function sim(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', CLI, ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('npm run sim', () => {
  it('runs a seed range and prints one summary line', () => {
    const r = sim('--seeds', '3', '--start', '10', '--steps', '300');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(
      /^sim: seeds=3 nodes=3 steps=300 faults=chaos safety_violations=0 liveness_failures=0 virtual_time=[\d.]+s wall_time=[\d.]+s$/m,
    );
  });

  it('exits 1 on a safety violation and prints the seed, the invariant and the replay command', () => {
    const r = sim('--seed', '1', '--faults', 'crash', '--steps', '2000', '--bug', 'amnesia');
    expect(r.status).toBe(1);
    expect(r.stdout).toContain('seed 1: SAFETY VIOLATION persist-before-send');
    expect(r.stdout).toContain(
      'replay: npm run sim -- --seed 1 --steps 2000 --faults crash --bug amnesia --verbose',
    );
  });

  it('exits 2 on a liveness failure, 0 when liveness failures are allowed', () => {
    const args = [
      '--seed',
      '3',
      '--faults',
      'net',
      '--steps',
      '1000',
      '--no-conf-changes',
      '--bug',
      'unhealed-partition',
    ];
    const strict = sim(...args);
    expect(strict.status).toBe(2);
    expect(strict.stdout).toContain('LIVENESS FAILURE');
    expect(sim(...args, '--allow-liveness-failures').status).toBe(0);
  });

  it('exits 64 on bad usage, naming the allowed values', () => {
    const r = sim('--nodes', '4');
    expect(r.status).toBe(64);
    expect(r.stderr).toContain('--nodes must be 3 or 5, got 4');
  });
});
