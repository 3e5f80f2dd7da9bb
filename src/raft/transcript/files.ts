// Finding, checking and rewriting the transcript files in src/raft/testdata (file I/O lives here,
// never in the core or the Env).

import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runTranscript } from './run.js';

export const TESTDATA_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'testdata');

/** True when the environment asks for expected outputs to be regenerated. */
export function rewriteRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env.FLOE_REWRITE;
  return v !== undefined && v !== '' && v !== '0' && v !== 'false';
}

export function transcriptFiles(dir = TESTDATA_DIR): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.txt'))
    .sort()
    .map((f) => join(dir, f));
}

export interface FileOutcome {
  file: string;
  /** Readable diffs of the blocks that differ (empty: the file passes, or was rewritten). */
  mismatches: string[];
  rewritten: boolean;
}

/** Runs one file; with `rewrite`, writes the actual outputs back when they differ. */
export function checkFile(path: string, rewrite: boolean): FileOutcome {
  const rel = relative(process.cwd(), path);
  // Paths inside the repository are shown relative to it, others as given.
  const shown = rel === '' ? basename(path) : rel.startsWith('..') || isAbsolute(rel) ? path : rel;
  const content = readFileSync(path, 'utf8');
  const r = runTranscript(shown, content);
  if (rewrite) {
    const changed = r.rewritten !== content;
    if (changed) writeFileSync(path, r.rewritten);
    return { file: shown, mismatches: [], rewritten: changed };
  }
  return { file: shown, mismatches: r.mismatches, rewritten: false };
}
