// Every src/raft/testdata/*.txt transcript must print exactly its expected output.
// FLOE_REWRITE=1 npx vitest run --project unit src/raft/transcript  regenerates them (then review
// the change with git diff); see docs/raft-transcripts.md.

import { basename } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkFile, rewriteRequested, transcriptFiles } from './files.js';

describe('Raft transcripts (src/raft/testdata)', () => {
  const files = transcriptFiles();

  it('has transcripts to run', () => {
    expect(files.length).toBeGreaterThan(0);
  });

  it.each(files.map((f) => [basename(f), f]))('%s', (_name, path) => {
    const r = checkFile(path, rewriteRequested());
    if (r.mismatches.length > 0) {
      throw new Error(
        `${r.mismatches.length} block(s) print something else ("-" expected, "+" actual):\n\n${r.mismatches.join(
          '\n\n',
        )}\n\nIf the new output is right: FLOE_REWRITE=1 npx vitest run --project unit src/raft/transcript, then review git diff.`,
      );
    }
  });
});
