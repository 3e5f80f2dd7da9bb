// Runnable example for docs/storage.md, "The lock": `npx tsx src/storage/lock-example.ts [dir]`.
// A restarted container runs as PID 1 again and finds its earlier incarnation's LOCK naming PID 1:
// here, this process finds a LOCK naming its own PID that it does not hold, and starts.
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DurableStorage, StorageLockedError } from './index.js';

export async function runLockExample(dir: string, log: (line: string) => void = console.log): Promise<void> {
  const first = await DurableStorage.open(dir, { bootstrapConf: { voters: [1], learners: [] } });
  log(`LOCK while open: ${JSON.stringify(await fsp.readFile(path.join(dir, 'LOCK'), 'utf8'))}`);
  // A second open of the same directory in this process is refused.
  const err = await DurableStorage.open(dir).catch((e: unknown) => e);
  log(`second open: ${err instanceof StorageLockedError ? err.code : 'opened?!'}`);
  await first.close();

  // What a kill -9 of an earlier process with our PID leaves (an older build wrote the PID only).
  await fsp.writeFile(path.join(dir, 'LOCK'), `${process.pid}\n`);
  const again = await DurableStorage.open(dir, { onWarning: (m) => log(`warning: ${m}`) });
  log('reopened');
  await again.close();
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const dir = process.argv[2] ?? (await fsp.mkdtemp(path.join(os.tmpdir(), 'floe-lock-example-')));
  await runLockExample(dir);
  if (!process.argv[2]) await fsp.rm(dir, { recursive: true, force: true });
}
