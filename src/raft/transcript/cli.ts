// Runs Raft transcripts outside vitest:
//   npx tsx src/raft/transcript/cli.ts [--rewrite] [file.txt ...]
// With no files, every src/raft/testdata/*.txt. --rewrite (or FLOE_REWRITE=1) replaces each
// block's expected output with what the core prints now; review the result with `git diff`.
// Exit status: 0 all pass (or rewritten), 1 a block differs, 2 a transcript cannot run, 64 bad usage.

import { checkFile, rewriteRequested, transcriptFiles } from './files.js';

function main(argv: string[]): number {
  let rewrite = rewriteRequested();
  const files: string[] = [];
  for (const a of argv) {
    if (a === '--rewrite') rewrite = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: npx tsx src/raft/transcript/cli.ts [--rewrite] [file.txt ...]\n');
      return 0;
    } else if (a.startsWith('-')) {
      process.stderr.write(`unknown option ${a} (known: --rewrite, --help)\n`);
      return 64;
    } else files.push(a);
  }
  let failed = 0;
  for (const f of files.length > 0 ? files : transcriptFiles()) {
    try {
      const r = checkFile(f, rewrite);
      if (r.rewritten) process.stdout.write(`rewrote ${r.file}\n`);
      for (const m of r.mismatches) process.stdout.write(`${m}\n\n`);
      if (r.mismatches.length > 0) failed++;
      else if (!r.rewritten) process.stdout.write(`ok ${r.file}\n`);
    } catch (err) {
      process.stderr.write(`${(err as Error).message}\n`);
      return 2;
    }
  }
  return failed > 0 ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
