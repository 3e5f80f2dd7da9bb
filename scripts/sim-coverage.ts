/**
 * `npm run sim:coverage`: which production code the full-stack simulator runs (docs/simulator-coverage.md).
 *
 * A safety claim counts only for code inside the proof. This script compiles src/ with source maps into
 * tmp/cov-js, runs `--seeds` seeds of each profile under c8 (V8's own coverage), and prints line coverage per
 * production folder (src/sim, src/testing and tests left out), then the files of the folders that hold the safety
 * core, least covered first, with their unrun lines. Files the simulator never loads count as 0% (`c8 --all`).
 *
 * Options: --seeds 20 (per profile) --start 1 --profiles swarm,hostile,stalls,restarts,disk,coarse,clients
 *          --files 12 (files listed per folder) --ranges (print every unrun line range)
 * The full report (HTML, lcov) is left in tmp/sim-coverage/.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({
  options: {
    seeds: { type: 'string', default: '20' },
    start: { type: 'string', default: '1' },
    profiles: { type: 'string', default: 'swarm,hostile,stalls,restarts,disk,coarse,clients' },
    files: { type: 'string', default: '12' },
    ranges: { type: 'boolean', default: false },
  },
});

const root = resolve(import.meta.dirname, '..');
const out = 'tmp/cov-js';
const reportDir = 'tmp/sim-coverage';
/** The folders where a duplicate ID, a lost write or a second holder would come from. */
const SAFETY_CORE = [
  'src/node',
  'src/storage',
  'src/transport',
  'src/lease',
  'src/client',
  'src/raft',
  'src/sequences',
  'src/state',
  'src/server',
  'src/id',
];

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status ?? r.signal}`);
}

const c8 = resolve(root, 'node_modules/.bin/c8');
const c8Filter = [
  '--all',
  `--src=${out}`,
  `--include=${out}/**`,
  `--exclude=${out}/sim/**`,
  `--exclude=${out}/testing/**`,
  `--temp-directory=${reportDir}/raw`,
  `--report-dir=${reportDir}`,
];

rmSync(reportDir, { recursive: true, force: true });
const tsc = resolve(root, 'node_modules/.bin/tsc');
run(tsc, [
  '-p',
  'tsconfig.build.json',
  '--incremental',
  '--declaration',
  'false',
  '--sourceMap',
  '--outDir',
  out,
  '--tsBuildInfoFile',
  `${out}/.tsbuildinfo`,
]);
const profiles = opt.profiles.split(',').filter((p) => p !== '');
for (const [i, profile] of profiles.entries()) {
  console.log(`\n== ${profile}: ${opt.seeds} seeds from ${opt.start}`);
  run(c8, [
    ...c8Filter,
    `--clean=${i === 0}`,
    '--reporter=text-summary',
    'node',
    `${out}/sim/full/cli.js`,
    '--start',
    opt.start,
    '--seeds',
    opt.seeds,
    '--profile',
    profile,
    '--jobs',
    '1',
  ]);
}
run(c8, ['report', ...c8Filter, '--reporter=json-summary', '--reporter=json', '--reporter=html']);

interface Counts {
  covered: number;
  total: number;
}
const summary = JSON.parse(readFileSync(resolve(root, reportDir, 'coverage-summary.json'), 'utf8')) as Record<
  string,
  { lines: Counts }
>;
const detail = JSON.parse(readFileSync(resolve(root, reportDir, 'coverage-final.json'), 'utf8')) as Record<
  string,
  { statementMap: Record<string, { start: { line: number } }>; s: Record<string, number> }
>;

const pct = (c: Counts): string => (c.total === 0 ? '  -  ' : `${((100 * c.covered) / c.total).toFixed(1)}%`);
const folders = new Map<string, Counts>();
const files: { file: string; folder: string; lines: Counts }[] = [];
for (const [abs, v] of Object.entries(summary)) {
  if (abs === 'total') continue;
  const file = relative(root, abs);
  const folder = file.split('/').slice(0, 2).join('/');
  const f = folders.get(folder) ?? { covered: 0, total: 0 };
  f.covered += v.lines.covered;
  f.total += v.lines.total;
  folders.set(folder, f);
  files.push({ file, folder, lines: v.lines });
}

/** Unrun lines of a file as ranges ("12-18, 40"). */
function unrunRanges(file: string): string {
  const d = detail[resolve(root, file)];
  if (!d) return '';
  const lines = new Set<number>();
  for (const [id, count] of Object.entries(d.s)) {
    const at = d.statementMap[id];
    if (count === 0 && at) lines.add(at.start.line);
  }
  const sorted = [...lines].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === (sorted[j] as number) + 1) j++;
    parts.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(', ');
}

const total = summary.total?.lines ?? { covered: 0, total: 0 };
console.log(
  `\nproduction lines the simulator ran: ${total.covered}/${total.total} (${pct(total)}), profiles ${profiles.join(',')}, ${opt.seeds} seeds each`,
);
console.log('\nfolder                lines run      of');
for (const [folder, c] of [...folders].sort((a, b) => a[0].localeCompare(b[0]))) {
  const core = SAFETY_CORE.includes(folder) ? ' (safety core)' : '';
  console.log(
    `${folder.padEnd(20)} ${pct(c).padStart(7)} ${String(c.covered).padStart(7)}/${c.total}${core}`,
  );
}
const perFolder = Number(opt.files);
for (const folder of SAFETY_CORE) {
  const list = files
    .filter((f) => f.folder === folder && f.lines.total > 0 && f.lines.covered < f.lines.total)
    .sort((a, b) => a.lines.covered / a.lines.total - b.lines.covered / b.lines.total)
    .slice(0, perFolder);
  if (list.length === 0) continue;
  console.log(`\n${folder}: least run files`);
  for (const f of list) {
    const ranges = opt.ranges ? `  unrun: ${unrunRanges(f.file)}` : '';
    console.log(
      `  ${pct(f.lines).padStart(6)} ${String(f.lines.total - f.lines.covered).padStart(5)} unrun  ${f.file}${ranges}`,
    );
  }
}
console.log(`\nfull report: ${reportDir}/index.html`);
