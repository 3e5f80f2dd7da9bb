// The chaos run's records survive a kill -9 and the checker judges them (real processes, no cluster):
// scripts/chaos-recorder-child.ts records bursts of a plain Snowflake generator exactly as a chaos client does; the
// test kills it mid-run, as the chaos driver does, and reads the records back. The checker's own cases are in
// src/check/chaos-history.test.ts.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readChaosRun, recordEvent } from '../../scripts/chaos-records.js';
import { chaosViolations, checkChaosHistory } from '../../src/check/chaos-history.js';
import { hrtimeMonotonic } from '../../src/client/index.js';
import { repoRoot } from './harness.js';

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

/** Starts a recording child; resolves once it is issuing IDs. */
async function startChild(
  dir: string,
  name: string,
  o: { workerId: number; token: number; floorMs: number; ttlMs?: number },
) {
  const proc = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(repoRoot, 'scripts/chaos-recorder-child.ts'),
      JSON.stringify({ dir, name, ...o }),
    ],
    { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  recordEvent(dir, { type: 'start', process: name, mono: hrtimeMonotonic() });
  const exit = new Promise<void>((resolve) =>
    proc.on('exit', (code, signal) => {
      recordEvent(dir, {
        type: 'exit',
        process: name,
        mono: hrtimeMonotonic(),
        code,
        signal,
        byDriver: 'kill',
      });
      resolve();
    }),
  );
  await once(proc.stdout, 'data');
  return {
    proc,
    /** kill -9 once it has run a while longer; resolves after the exit is recorded. */
    async kill(afterMs: number) {
      await new Promise((r) => setTimeout(r, afterMs));
      proc.kill('SIGKILL');
      await exit;
    },
  };
}

const stopped = (pid: number) => /^\d+ \(.*\) T /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));

describe('chaos records under kill -9 (real processes)', () => {
  it('processes killed mid-burst, one after another on one worker ID: every ID on disk is checked, 0 violations', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-chaos-rec-'));
    dirs.push(dir);
    for (let i = 0; i < 3; i++) {
      // Each successor starts above everything its predecessor could have issued (it is dead, and the clock moved).
      const child = await startChild(dir, `p${i}`, { workerId: 7, token: i + 1, floorMs: Date.now() });
      await child.kill(150 + 100 * i);
    }
    const r = checkChaosHistory(readChaosRun(dir));
    expect(r.examples).toEqual([]);
    expect(chaosViolations(r)).toBe(0);
    expect(r.killedLeases).toBe(3);
    expect(r.reusedWorkerIds).toBe(1);
    expect(r.handOvers).toBe(2);
    // Unbounded bursts: a kill lands inside one almost always; its lease then ends at the kill.
    expect(r.endedAtKill).toBeGreaterThanOrEqual(1);
    expect(r.ids).toBeGreaterThan(10_000);
  }, 60_000);

  it('a generator that goes on after a pause inside a burst longer than its TTL is found', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-chaos-rec-'));
    dirs.push(dir);
    const child = await startChild(dir, 'p0', { workerId: 7, token: 1, floorMs: Date.now(), ttlMs: 1000 });
    const pid = child.proc.pid as number;
    child.proc.kill('SIGUSR2'); // it stops itself inside its next burst, as a chaos client does for the driver
    while (!stopped(pid)) await new Promise((r) => setTimeout(r, 1));
    const stop = hrtimeMonotonic();
    await new Promise((r) => setTimeout(r, 1200));
    const cont = hrtimeMonotonic();
    child.proc.kill('SIGCONT');
    recordEvent(dir, { type: 'pause', process: 'p0', stop, cont });
    await child.kill(100);
    const r = checkChaosHistory(readChaosRun(dir));
    expect(r.pausesInBurst).toBe(1);
    expect(r.issuedAfterPause).toBe(1); // no lease stopped it: it issued on after its TTL
    expect(r.recordErrors).toBe(0);
  }, 60_000);

  it('a successor started before its predecessor is killed (one worker ID, two live processes) is found', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-chaos-rec-'));
    dirs.push(dir);
    const first = await startChild(dir, 'p0', { workerId: 7, token: 1, floorMs: Date.now() });
    const second = await startChild(dir, 'p1', { workerId: 7, token: 2, floorMs: Date.now() });
    await Promise.all([first.kill(200), second.kill(250)]);
    const r = checkChaosHistory(readChaosRun(dir));
    expect(r.overlappingHolders).toBe(1);
    // Both issue the current millisecond from sequence 0 up: the same IDs, and the same timestamps.
    expect(r.duplicates).toBeGreaterThan(0);
    expect(r.timestampReuse).toBe(1);
    expect(r.recordErrors).toBe(0);
  }, 60_000);
});
