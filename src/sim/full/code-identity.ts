// The identity of the code a sweep runs: a hash over every module the simulator's entry reaches
// through relative imports (production code and simulator alike; type-only imports are gone from a
// build) and the dependency lock. Two sweeps with the same identity ran the same code, whatever
// commit they came from, so their seed counts add up (docs/simulator-full.md, "Sweeps on record");
// a change to a module the simulator never loads (the CLI, the etcd store, a benchmark) keeps it.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

// Import and export statements start a line (a comment or string that mentions one does not).
const RELATIVE_IMPORT =
  /^\s*(?:import|export)\s[^'"`;]*?\bfrom\s*['"](\.{1,2}\/[^'"]+)['"]|^\s*import\s*['"](\.{1,2}\/[^'"]+)['"]/gm;

/** The modules `entry` reaches through relative imports, itself included. */
export function moduleClosure(entry: string): string[] {
  const seen = new Set<string>();
  const todo = [resolve(entry)];
  while (todo.length > 0) {
    const path = todo.pop()!;
    if (seen.has(path)) continue;
    seen.add(path);
    const text = readFileSync(path, 'utf8');
    for (const m of text.matchAll(RELATIVE_IMPORT)) {
      let target = resolve(dirname(path), m[1] ?? m[2]!);
      // Under tsx a source names its sibling's build name (.js) for a .ts file.
      if (!existsSync(target) && target.endsWith('.js')) target = `${target.slice(0, -3)}.ts`;
      if (!existsSync(target))
        throw new Error(`code identity: ${relative(process.cwd(), path)} imports a missing ${m[1] ?? m[2]}`);
      todo.push(target);
    }
  }
  return [...seen].sort();
}

const HERE = fileURLToPath(import.meta.url);
const DEFAULT_ENTRY = join(dirname(HERE), `cli${HERE.slice(HERE.lastIndexOf('.'))}`);

/** Hash of what `entry` (the simulator's CLI by default) runs, and of the nearest package-lock.json. */
export function codeIdentity(entry = DEFAULT_ENTRY): string {
  const files = moduleClosure(entry);
  const root = dirname(dirname(dirname(resolve(entry))));
  const hash = createHash('sha256');
  for (const path of files) {
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
