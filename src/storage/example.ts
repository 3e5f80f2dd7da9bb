// Runnable example for docs/storage.md: `npx tsx src/storage/example.ts [dir]`.
// Saves what a few Raft Ready batches would carry, takes a snapshot, reopens, and prints the state.
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Entry } from '../raft/types.js';
import { DurableStorage } from './index.js';

export async function runExample(dir: string, log: (line: string) => void = console.log): Promise<void> {
  const conf = { voters: [1, 2, 3], learners: [] };
  const s = await DurableStorage.open(dir, { bootstrapConf: conf, trailingEntries: 1 });
  const entry = (index: number, text: string): Entry => ({
    type: 'normal',
    index,
    term: 1,
    data: new TextEncoder().encode(text),
  });

  // Ready #1: a vote and three entries must be durable before any message is sent.
  await s.save(
    { hardState: { term: 1, vote: 1, commit: 0 }, entries: [entry(1, 'a'), entry(2, 'b'), entry(3, 'c')] },
    { sync: true },
  );
  // Ready #2: only the commit index moved; no fdatasync needed.
  await s.save({ hardState: { term: 1, vote: 1, commit: 3 }, entries: [] }, { sync: false });
  // The application snapshots its state at index 3; the log is compacted behind it (1 entry kept).
  await s.createSnapshot(3, conf, new TextEncoder().encode('state machine as of 3'));
  log(
    `live: first ${s.storage.firstIndex()}, last ${s.storage.lastIndex()}, snapshot at ${s.storage.snapshot().metadata.index}`,
  );
  log(`stats: ${JSON.stringify(s.stats())}`);
  await s.close();

  for (const sub of ['wal', 'snap']) log(`${sub}/: ${(await fsp.readdir(path.join(dir, sub))).join(', ')}`);

  // No bootstrapConf needed now: the one recorded in the WAL is used.
  const again = await DurableStorage.open(dir, { trailingEntries: 1 });
  const st = again.storage;
  log(
    `reopened: hard state ${JSON.stringify(st.initialState().hardState)}, first ${st.firstIndex()}, last ${st.lastIndex()}`,
  );
  log(`snapshot: ${new TextDecoder().decode(st.snapshot().data)} (term ${st.snapshot().metadata.term})`);
  await again.close();
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const dir = process.argv[2] ?? (await fsp.mkdtemp(path.join(os.tmpdir(), 'floe-storage-example-')));
  await runExample(dir);
  if (!process.argv[2]) await fsp.rm(dir, { recursive: true, force: true });
}
