// The core must stay a pure state machine: no clock, no randomness of its own, no timers, no I/O.

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
const FORBIDDEN: [string, RegExp][] = [
  ['Date', /\bDate\b/],
  ['Math.random', /Math\.random/],
  ['setTimeout', /\bsetTimeout\b/],
  ['setInterval', /\bsetInterval\b/],
  ['setImmediate', /\bsetImmediate\b/],
  ['process.', /\bprocess\./],
  ['performance', /\bperformance\b/],
  ["'node:' import", /from\s+['"]node:|require\(\s*['"]node:|import\(\s*['"]node:/],
];

/** Drops comments so that prose like "no Date inside" does not count. */
function code(src: string): string {
  return src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
}

describe('purity of src/raft', () => {
  const files = readdirSync(here).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));

  it('has source files to check', () => {
    expect(files).toContain('raft.ts');
    expect(files).toContain('raw-node.ts');
  });

  it.each(files)('%s uses no clock, randomness, timers, process or node: imports', (file) => {
    const src = code(readFileSync(join(here, file), 'utf8'));
    const found = FORBIDDEN.filter(([, re]) => re.test(src)).map(([name]) => name);
    expect(found).toEqual([]);
  });

  it('the checker itself catches a forbidden use', () => {
    const bad = code(
      "import { x } from 'node:fs';\nconst t = Date.now(); // fine in a comment: Math.random\n",
    );
    const found = FORBIDDEN.filter(([, re]) => re.test(bad)).map(([name]) => name);
    expect(found).toEqual(['Date', "'node:' import"]);
  });
});
