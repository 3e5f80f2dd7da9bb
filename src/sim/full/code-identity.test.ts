import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codeIdentity } from './code-identity.js';

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'floe-code-id-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe('codeIdentity', () => {
  const base = { 'raft/core.js': 'a', 'sim/full/cli.js': 'b', 'package-lock.json': '{}' };

  it('is the same for the same code, wherever it lies', () => {
    expect(codeIdentity(tree(base))).toBe(codeIdentity(tree(base)));
  });

  it('changes when a module changes, is added, or is renamed', () => {
    const id = codeIdentity(tree(base));
    expect(codeIdentity(tree({ ...base, 'raft/core.js': 'a2' }))).not.toBe(id);
    expect(codeIdentity(tree({ ...base, 'raft/log.js': '' }))).not.toBe(id);
    const { 'raft/core.js': core, ...rest } = base;
    expect(codeIdentity(tree({ ...rest, 'raft/core2.js': core }))).not.toBe(id);
  });

  it('changes when the dependency lock changes', () => {
    expect(codeIdentity(tree({ ...base, 'package-lock.json': '{"v":2}' }))).not.toBe(
      codeIdentity(tree(base)),
    );
  });

  it('ignores tests, declarations and other files', () => {
    const id = codeIdentity(tree(base));
    expect(
      codeIdentity(tree({ ...base, 'raft/core.test.js': 'x', 'raft/core.d.ts': 'y', 'README.md': 'z' })),
    ).toBe(id);
  });
});
