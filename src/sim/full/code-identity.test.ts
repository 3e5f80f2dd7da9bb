import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codeIdentity, moduleClosure } from './code-identity.js';

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'floe-code-id-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const ENTRY = 'sim/full/cli.js';
const base = {
  'package-lock.json': '{}',
  [ENTRY]: "import { run } from './run.js';\nexport * from '../../raft/index.js';\n",
  'sim/full/run.js': "import {\n  a,\n  b,\n} from '../../node/runtime.js';\nimport { x } from 'msgpackr';\n",
  'node/runtime.js': "import './side-effect.js';\nconst s = 'from \"./not-an-import.js\"';\n",
  'node/side-effect.js': '',
  'raft/index.js': '',
  'cli/main.js': 'never imported by the simulator',
};

describe('codeIdentity', () => {
  it('covers exactly the modules the entry reaches through relative imports', () => {
    const root = tree(base);
    expect(moduleClosure(join(root, ENTRY)).map((p) => p.slice(root.length + 1))).toEqual([
      'node/runtime.js',
      'node/side-effect.js',
      'raft/index.js',
      'sim/full/cli.js',
      'sim/full/run.js',
    ]);
  });

  it('is the same for the same code, wherever it lies', () => {
    expect(codeIdentity(join(tree(base), ENTRY))).toBe(codeIdentity(join(tree(base), ENTRY)));
  });

  it('changes when a module it reaches changes, or the dependency lock does', () => {
    const id = codeIdentity(join(tree(base), ENTRY));
    expect(codeIdentity(join(tree({ ...base, 'node/side-effect.js': ';' }), ENTRY))).not.toBe(id);
    expect(codeIdentity(join(tree({ ...base, 'package-lock.json': '{"v":2}' }), ENTRY))).not.toBe(id);
  });

  it('does not change with a module the simulator never loads', () => {
    const id = codeIdentity(join(tree(base), ENTRY));
    expect(codeIdentity(join(tree({ ...base, 'cli/main.js': 'changed', 'README.md': 'z' }), ENTRY))).toBe(id);
  });

  it('refuses a relative import it cannot find (a stale or partial build)', () => {
    expect(() =>
      codeIdentity(join(tree({ ...base, 'node/side-effect.js': "import './gone.js';" }), ENTRY)),
    ).toThrow(/imports a missing \.\/gone\.js/);
  });

  it('reaches the real simulator build or sources', () => {
    expect(codeIdentity()).toMatch(/^[0-9a-f]{12}$/);
  });
});
