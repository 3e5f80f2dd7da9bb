// Child process for crash.test.ts: appends to a DurableStorage as fast as it can with several
// concurrent writers and prints `ack <index>` once each save has resolved (is durable). The test
// kills it with SIGKILL at some point, then checks every printed index survived.
// Usage: node --import tsx crash-child.ts <dir> <term>
import { DurableStorage } from './durable-storage.js';
import { ent } from './test-helpers.js';

const [dir, termArg] = process.argv.slice(2);
if (!dir || !termArg) throw new Error('usage: crash-child.ts <dir> <term>');
const term = Number(termArg);
const WRITERS = 8;

const s = await DurableStorage.open(dir, {
  bootstrapConf: { voters: [1], learners: [] },
  segmentBytes: 4096,
  trailingEntries: 50,
});
for (const w of s.warnings) process.stderr.write(`child warning: ${w}\n`);
let next = s.storage.lastIndex() + 1;
let durable = s.storage.lastIndex(); // every index <= this is durable (saves resolve in order)
let snapshotting = false;
process.stdout.write(`ready ${next}\n`);

async function writer(): Promise<never> {
  for (;;) {
    const i = next++;
    await s.save(
      { entries: [ent(i, term, 64)], hardState: { term, vote: 1, commit: durable } },
      { sync: true },
    );
    durable = Math.max(durable, i);
    process.stdout.write(`ack ${i}\n`);
    const snapAt = s.hardState().commit;
    if (!snapshotting && snapAt - s.storage.snapshot().metadata.index >= 100) {
      snapshotting = true;
      s.createSnapshot(
        snapAt,
        { voters: [1], learners: [] },
        new TextEncoder().encode(`state@${snapAt}`),
      ).finally(() => {
        snapshotting = false;
      });
    }
  }
}

await Promise.all(Array.from({ length: WRITERS }, writer));
