// The SDK lease cache's seams inside the simulation: its file system is the client machine's
// MemoryFs (so a power loss drops what the SDK did not fsync), and its view of processes is the
// run's virtual processes (PIDs are never reused in a run, so a PID's start time is its name).
import { resolve } from 'node:path';
import type { CacheFs, CacheHost } from '../../client/cache-fs.js';
import type { MemoryFs } from '../../storage/memory-fs.js';
import type { Prng } from '../prng.js';
import type { SimProcess } from './process.js';
import type { World } from './world.js';

/** `disk()` is the machine's current view (a new one after each power loss). */
export function memoryCacheFs(disk: () => MemoryFs): CacheFs {
  return {
    canonical: (p) => resolve(p), // MemoryFs has no symbolic links
    exists: (p) => disk().existsNow(p),
    readText: (p) => disk().readFileNow(p).toString('utf8'),
    writeFile: (p, text, fsync) => disk().writeFileNow(p, Buffer.from(text, 'utf8'), fsync),
    rename: (from, to) => disk().renameNow(from, to),
    link: (existing, newPath) => disk().linkNow(existing, newPath),
    remove(p) {
      try {
        disk().unlinkNow(p);
      } catch (err) {
        if ((err as { code?: string }).code !== 'ENOENT') throw err;
      }
    },
    mtimeMs: (p) => disk().mtimeNow(p),
    touch: (p) => disk().touchNow(p),
    syncDir: (dir) => disk().syncDirNow(dir),
  };
}

/**
 * `pidNs`: the process's PID namespace (default 'sim', one for the whole run, so every holder's PID can be checked);
 * a namespace of its own per process puts every other holder where its PID cannot be checked (another container).
 */
export function simCacheHost(world: World, proc: SimProcess, rng: Prng, pidNs = 'sim'): CacheHost {
  return {
    pid: proc.pid,
    hostname: proc.machine.name,
    pidNs,
    startTicks: (pid) => world.processByPid(pid)?.name ?? null,
    alive: (pid) => world.isPidAlive(pid),
    wallMs: () => Math.floor(proc.wallMs()),
    nonce: (bytes) => {
      let s = '';
      for (let i = 0; i < bytes; i++) s += rng.int(256).toString(16).padStart(2, '0');
      return s;
    },
    // A simulated process never exits cleanly: it is killed (as with kill -9, no hook runs).
    onExit: () => () => {},
    requestIds: new Set<string>(),
    unansweredAcquires: new Map(),
  };
}
