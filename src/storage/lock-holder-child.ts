// Child process for lock-file.test.ts: opens a DurableStorage and holds it (and so its LOCK) until
// killed. Prints `open <pid>` once open, or `refused <code> <message>` and exits 1.
// Usage: node --import tsx lock-holder-child.ts <dir>
import { DurableStorage } from './durable-storage.js';
import { StorageError } from './errors.js';

const [dir] = process.argv.slice(2);
if (!dir) throw new Error('usage: lock-holder-child.ts <dir>');
try {
  await DurableStorage.open(dir, { bootstrapConf: { voters: [1], learners: [] } });
  process.stdout.write(`open ${process.pid}\n`);
  process.stdin.resume(); // stays open (and alive) until killed or its stdin closes
  process.stdin.on('end', () => process.exit(0));
} catch (err) {
  process.stdout.write(
    `refused ${err instanceof StorageError ? err.code : 'other'} ${(err as Error).message}\n`,
  );
  process.exit(1);
}
