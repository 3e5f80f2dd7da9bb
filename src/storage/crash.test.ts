// Crash test: a real child process appends in a loop and is killed with SIGKILL after it has
// acknowledged a random number of saves. Every acknowledged entry must survive, and the log must
// reopen cleanly (a torn tail may be cut, nothing else may be wrong). Repeated over several rounds
// on the same directory, so recovery after a crash is itself crashed into.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { DurableStorage } from './durable-storage.js';
import { ent, removeTempDirs, tempDir } from './test-helpers.js';

afterEach(removeTempDirs);

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'crash-child.ts');
const ROUNDS = Number(process.env.FLOE_CRASH_ROUNDS ?? 4);

/** Runs the child until it has printed `killAfter` acks, SIGKILLs it, returns every ack it printed. */
async function runAndKill(
  dir: string,
  term: number,
  killAfter: number,
): Promise<{ acks: number[]; signal: string | null }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, dir, String(term)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const acks: number[] = [];
  const exited = once(child, 'exit');
  const lines = createInterface({ input: child.stdout! });
  const closed = once(lines, 'close');
  lines.on('line', (line) => {
    if (!line.startsWith('ack ')) return;
    acks.push(Number(line.slice(4)));
    if (acks.length === killAfter) child.kill('SIGKILL');
  });
  const [code, signal] = (await exited) as [number | null, string | null];
  await closed; // every ack the child managed to print has been read
  if (signal !== 'SIGKILL') throw new Error(`child exited by itself (code ${code}): ${stderr}`);
  return { acks, signal };
}

describe('crash recovery (SIGKILL)', () => {
  it('keeps every acknowledged save and reopens cleanly after kill -9, round after round', async () => {
    const dir = await tempDir();
    const allAcked = new Map<number, number>(); // index -> term that acknowledged it
    for (let round = 1; round <= ROUNDS; round++) {
      const killAfter = 20 + Math.floor(Math.random() * 400);
      const { acks } = await runAndKill(dir, round, killAfter);
      expect(acks.length).toBeGreaterThanOrEqual(killAfter);
      for (const i of acks) allAcked.set(i, round);

      const s = await DurableStorage.open(dir, { segmentBytes: 4096, trailingEntries: 50 });
      try {
        expect(s.warnings.join('\n')).toMatch(/took over a stale lock left by dead process/);
        for (const w of s.warnings)
          expect(w).toMatch(/stale lock|torn record|temporary|removed snapshot file/);
        const st = s.storage;
        const first = st.firstIndex();
        const snapIndex = st.snapshot().metadata.index;
        const maxAck = Math.max(...allAcked.keys());
        console.log(
          `round ${round}: killed after ${acks.length} acks (target ${killAfter}); reopened with ` +
            `first ${first}, last ${st.lastIndex()}, snapshot ${snapIndex}, ${s.segmentNames().length} segments; ` +
            `warnings: ${s.warnings.length}; tail cut: ${s.recovery.tailCut}`,
        );
        expect(st.lastIndex()).toBeGreaterThanOrEqual(maxAck);
        for (const [i, term] of allAcked) {
          if (i < first) {
            expect(i).toBeLessThanOrEqual(snapIndex); // compacted: covered by the snapshot
            continue;
          }
          const [e] = st.entries(i, i + 1);
          // The entry written in a later round can only replace an unacknowledged one, so this is exact.
          expect(e, `entry ${i}`).toEqual(ent(i, term, 64));
        }
      } finally {
        await s.close();
      }
    }
  });
});
