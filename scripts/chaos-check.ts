/**
 * Re-checks a kept chaos run: `npx tsx scripts/chaos-check.ts <dir>` (records from `npm run chaos -- --dir <dir>`).
 * Prints the counts as one JSON line (examples on stderr) and exits 1 on any violation. The checker itself is
 * src/check/chaos-history.ts; the records, scripts/chaos-records.ts.
 */
import { chaosViolations, checkChaosHistory } from '../src/check/chaos-history.js';
import { readChaosRun } from './chaos-records.js';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: tsx scripts/chaos-check.ts <run directory>');
  process.exit(2);
}
// Read after the run: anything still open then ended before now.
const { examples, ...counts } = checkChaosHistory(readChaosRun(dir));
for (const e of examples) console.error(e);
console.log(JSON.stringify(counts));
process.exit(chaosViolations({ ...counts, examples }) > 0 ? 1 : 0);
