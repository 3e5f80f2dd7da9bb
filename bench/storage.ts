/**
 * `npx tsx bench/storage.ts`: durable appends through DurableStorage on this machine's disk.
 * Bounded to about 15 s.
 *
 * Every save is one 64-byte entry with `sync: true` (it resolves after fdatasync). Writers loop:
 * save, await, save again. With 1 writer every save pays a whole fdatasync; with 32 writers the
 * saves issued while an fdatasync is running share the next one (group commit).
 * Reported: entries made durable per second, fdatasyncs, saves per fdatasync, p50/p99 save latency.
 * A raw fdatasync loop on the same filesystem is measured first, as the ceiling for 1 writer.
 */
import { promises as fsp } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Entry } from '../src/raft/types.js';
import { DurableStorage } from '../src/storage/index.js';

const SECONDS_PER_SCENARIO = 4;
const ENTRY_BYTES = 64;

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function rawFdatasync(dir: string, seconds: number): Promise<number> {
  const fh = await fsp.open(path.join(dir, 'raw'), 'w');
  const buf = Buffer.alloc(ENTRY_BYTES + 20, 1);
  let n = 0;
  let pos = 0;
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    await fh.write(buf, 0, buf.length, pos);
    pos += buf.length;
    await fh.datasync();
    n++;
  }
  await fh.close();
  return n / seconds;
}

async function scenario(dir: string, writers: number, seconds: number) {
  const s = await DurableStorage.open(dir, { bootstrapConf: { voters: [1], learners: [] } });
  const data = new Uint8Array(ENTRY_BYTES).fill(7);
  let next = 1;
  const latencies: number[] = [];
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: writers }, async () => {
      while (performance.now() < end) {
        const e: Entry = { type: 'normal', index: next++, term: 1, data };
        const t0 = performance.now();
        await s.save({ entries: [e] }, { sync: true });
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  const st = s.stats();
  await s.close();
  latencies.sort((a, b) => a - b);
  return {
    writers,
    entriesPerSec: Math.round(latencies.length / elapsed),
    saves: latencies.length,
    fsyncs: st.syncs,
    savesPerFsync: (st.appends / st.syncs).toFixed(1),
    maxSavesPerFsync: st.maxAppendsPerSync,
    p50ms: percentile(latencies, 50).toFixed(2),
    p99ms: percentile(latencies, 99).toFixed(2),
  };
}

async function main(): Promise<void> {
  const root = await fsp.mkdtemp(path.join(tmpdir(), 'floe-bench-storage-'));
  try {
    console.log(
      `node ${process.version}, ${cpus().length} CPU(s): ${cpus()[0]?.model ?? '?'}; data in ${root}`,
    );
    const raw = await rawFdatasync(root, 2);
    console.log(`raw write+fdatasync loop: ${Math.round(raw)} per second (ceiling for 1 writer)`);
    const rows = [];
    for (const writers of [1, 32]) {
      const dir = path.join(root, `w${writers}`);
      rows.push(await scenario(dir, writers, SECONDS_PER_SCENARIO));
    }
    console.table(rows);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
}

await main();
