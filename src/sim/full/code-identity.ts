// The identity of the code a sweep runs: a hash over every module beside this one (not tests, not
// declarations) and the dependency lock. Two sweeps with the same identity ran the same production
// code and the same simulator, whatever commit they came from, so their seed counts add up
// (docs/simulator-full.md, "Sweeps on record").
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const MODULE = /\.(js|ts)$/;
const NOT_CODE = /\.(test|spec)\.[jt]s$|\.d\.ts$/;

function modules(dir: string, out: string[]): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) modules(path, out);
    else if (MODULE.test(entry.name) && !NOT_CODE.test(entry.name)) out.push(path);
  }
  return out;
}

/** Hash of the code tree `root` (this build's top folder) and the nearest package-lock.json above it. */
export function codeIdentity(root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')): string {
  const hash = createHash('sha256');
  for (const path of modules(root, []).sort()) {
    hash.update(relative(root, path).split(sep).join('/'));
    hash.update('\0');
    hash.update(readFileSync(path));
    hash.update('\0');
  }
  for (let dir = root; ; dir = dirname(dir)) {
    const lock = join(dir, 'package-lock.json');
    if (existsSync(lock)) {
      hash.update(readFileSync(lock));
      break;
    }
    if (dirname(dir) === dir) break;
  }
  return hash.digest('hex').slice(0, 12);
}
