import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { processStartTicks, readBootId, readPidNamespace } from '../net/process-identity.js';
import { DurableStorage } from './durable-storage.js';
import { StorageFailedError, StorageLockedError } from './errors.js';
import { runLockExample } from './lock-example.js';
import {
  HeldLocks,
  isAlive,
  LOCK_FILE_NAME,
  LockFile,
  type LockHeartbeat,
  type LockOwner,
  parseRecord,
} from './lock-file.js';
import { MemoryFs } from './memory-fs.js';
import { ents, removeTempDirs, tempDir } from './test-helpers.js';

const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      await once(c, 'exit');
    }
  }
  await removeTempDirs();
});

/** A child process that stays alive until killed; resolves once it runs. */
async function liveChild(): Promise<ChildProcess> {
  const c = spawn(process.execPath, ['-e', 'console.log("up"); setInterval(() => {}, 1000)'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(c);
  await once(c.stdout!, 'data');
  return c;
}

const lockText = async (dir: string) => fsp.readFile(path.join(dir, LOCK_FILE_NAME), 'utf8');
const writeLock = (dir: string, text: string) => fsp.writeFile(path.join(dir, LOCK_FILE_NAME), text);
const refusal = (p: Promise<unknown>) => p.then(() => undefined).catch((e: unknown) => e);

/**
 * A process as the seams see it, on a machine of boot `bootId`: `running` maps the PIDs that exist to their start
 * times. Each owner made by one `machineProcess` call is a process of its own (its own registry of held locks).
 */
function machineProcess(o: { pid: number; bootId: string; running: Record<number, string> }): LockOwner {
  return {
    pid: o.pid,
    bootId: o.bootId,
    isAlive: (p) => o.running[p] !== undefined,
    startTicks: (p) => o.running[p] ?? null,
    held: new HeldLocks(),
  };
}

/**
 * One host as the heartbeat seams see it: a wall clock, and the heartbeat timers of the processes on it. `sleep` (a
 * process waiting for a lock) moves the clock on and runs every timer that is not frozen (`docker pause`).
 */
function host(bootId = 'B') {
  const h = {
    bootId,
    now: 1_800_000_000_000,
    timers: new Map<string, () => Promise<void>>(),
    frozen: new Set<string>(),
    sleeps: 0,
    async advance(ms: number) {
      h.now += ms;
      for (const [who, beat] of h.timers) if (!h.frozen.has(who)) await beat();
    },
    /** A container on this host: PID 1 in its own PID namespace `ns`, started at `start` (its /proc/1). */
    container(ns: string, start: string): LockOwner {
      let nonces = 0;
      const heartbeat: LockHeartbeat = {
        everyMs: 2_000,
        staleMs: 15_000,
        waitMs: 17_000,
        wallMs: () => h.now,
        every(_ms, beat) {
          h.timers.set(ns, beat);
          return () => h.timers.delete(ns);
        },
        async sleep(ms) {
          h.sleeps++;
          await h.advance(ms);
        },
        nonce: () => `${ns.replace(/\D/g, '')}n${++nonces}`,
      };
      return {
        pid: 1,
        bootId,
        pidNs: ns,
        isAlive: (p) => p === 1,
        startTicks: (p) => (p === 1 ? start : null),
        held: new HeldLocks(),
        heartbeat,
      };
    },
  };
  return h;
}

const NS_A = 'pid:[4026532001]';
const NS_B = 'pid:[4026532002]';
const setMtime = (dir: string, ms: number) =>
  fsp.utimes(path.join(dir, LOCK_FILE_NAME), new Date(ms), new Date(ms));

describe('LockFile', () => {
  it('writes our PID, boot ID and start time, refuses a second open in this process, and releases', async () => {
    const dir = await tempDir();
    const lock = await LockFile.acquire(dir);
    const text = await lockText(dir);
    // The PID is the first line: all that a build before the boot ID and start time reads.
    expect(Number.parseInt(text, 10)).toBe(process.pid);
    expect(parseRecord(text)).toEqual({
      pid: process.pid,
      ...(readBootId() !== undefined ? { bootId: readBootId() } : {}),
      ...(processStartTicks(process.pid) !== null ? { startTicks: processStartTicks(process.pid) } : {}),
      ...(readPidNamespace() !== undefined ? { pidNs: readPidNamespace() } : {}),
      nonce: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    const err = await refusal(LockFile.acquire(dir));
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as StorageLockedError).pid).toBe(process.pid);
    expect((err as Error).message).toMatch(/already open/);
    await lock.release();
    expect(await fsp.readdir(dir)).toEqual([]);
    const again = await LockFile.acquire(dir);
    await again.release();
  });

  it('refuses a lock held by another live process, naming its PID', async () => {
    const dir = await tempDir();
    const child = await liveChild();
    await writeLock(dir, `${child.pid}\n`);
    const err = await refusal(LockFile.acquire(dir));
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as Error).message).toContain(`locked by live process ${child.pid}`);
    // The live lock is left exactly as it was.
    expect(await lockText(dir)).toBe(`${child.pid}\n`);
  });

  it('refuses a lock recorded by a live process of this boot with its own start time', async () => {
    const dir = await tempDir();
    const child = await liveChild();
    const start = processStartTicks(child.pid!);
    const boot = readBootId();
    const text = `${child.pid}\n${boot ? `boot ${boot}\n` : ''}${start ? `start ${start}\n` : ''}`;
    await writeLock(dir, text);
    const err = await refusal(LockFile.acquire(dir));
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as StorageLockedError).pid).toBe(child.pid);
    expect(await lockText(dir)).toBe(text);
  });

  it('takes over a stale lock left by a dead process', async () => {
    const dir = await tempDir();
    const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    await once(child, 'exit');
    const deadPid = child.pid!;
    expect(isAlive(deadPid)).toBe(false);
    await writeLock(dir, `${deadPid}\n`);
    const lock = await LockFile.acquire(dir);
    expect(lock.tookOverFrom).toBe(deadPid);
    expect(lock.staleBecause).toBeUndefined();
    expect(parseRecord(await lockText(dir)).pid).toBe(process.pid);
    expect((await fsp.readdir(dir)).sort()).toEqual([LOCK_FILE_NAME]);
    await lock.release();
  });

  it('treats an unreadable lock file as stale', async () => {
    const dir = await tempDir();
    await writeLock(dir, 'garbage');
    const lock = await LockFile.acquire(dir);
    expect(lock.tookOverFrom).toBe(0);
    expect(lock.staleBecause).toBeUndefined(); // warned as "dead process 0", as before
    await lock.release();
  });

  it('a container restarted as PID 1 finds its own PID in LOCK and starts', async () => {
    // The container was killed (OOM, kill -9) holding the lock; the same machine restarts it, and
    // `floe serve` is PID 1 again, started later.
    const dir = await tempDir();
    await writeLock(dir, '1\nboot B\nstart 1000\n');
    const restarted = machineProcess({ pid: 1, bootId: 'B', running: { 1: '5000' } });
    const lock = await LockFile.acquire(dir, undefined, restarted);
    expect(lock.tookOverFrom).toBe(1);
    expect(await lockText(dir)).toBe('1\nboot B\nstart 5000\n');
    await lock.release();

    // The same with a LOCK an older build wrote (its PID only), and after a power loss (another boot).
    for (const [text, bootId] of [
      ['1\n', 'B'],
      ['1\nboot A\nstart 1000\n', 'B'],
    ] as const) {
      await writeLock(dir, text);
      const again = await LockFile.acquire(
        dir,
        undefined,
        machineProcess({ pid: 1, bootId, running: { 1: '7' } }),
      );
      expect(again.tookOverFrom).toBe(1);
      await again.release();
    }
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it('a LOCK from an earlier boot is taken over, even when its PID runs again now', async () => {
    const dir = await tempDir();
    await writeLock(dir, '4242\nboot A\nstart 900\n');
    // After the reboot, PID 4242 is another process, which by chance has the same start time.
    const next = machineProcess({ pid: 77, bootId: 'B', running: { 77: '10', 4242: '900' } });
    const lock = await LockFile.acquire(dir, undefined, next);
    expect(lock.tookOverFrom).toBe(4242);
    expect(lock.staleBecause).toMatch(/before this machine last booted/);
    await lock.release();
    // The same record on the boot it was taken in names a live holder: refused.
    await writeLock(dir, '4242\nboot B\nstart 900\n');
    const err = await refusal(LockFile.acquire(dir, undefined, next));
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as StorageLockedError).pid).toBe(4242);
  });

  it('a LOCK whose PID now belongs to a process started later is taken over', async () => {
    const dir = await tempDir();
    await writeLock(dir, '4242\nboot B\nstart 900\n');
    const me = machineProcess({ pid: 77, bootId: 'B', running: { 77: '10', 4242: '1500' } });
    const lock = await LockFile.acquire(dir, undefined, me);
    expect(lock.tookOverFrom).toBe(4242);
    expect(lock.staleBecause).toMatch(/belongs to a process started later/);
    await lock.release();

    // With the real process table: a live child whose recorded start time is not its own.
    const child = await liveChild();
    if (processStartTicks(child.pid!) === null) return; // no /proc here: the PID-only rules apply
    await writeLock(dir, `${child.pid}\nstart 1\n`);
    const real = await LockFile.acquire(dir);
    expect(real.tookOverFrom).toBe(child.pid);
    await real.release();
  });

  it('a LOCK without a boot ID or start time keeps the PID-only rules', async () => {
    const dir = await tempDir();
    const me = machineProcess({ pid: 77, bootId: 'B', running: { 77: '10', 4242: '1500' } });
    await writeLock(dir, '4242\n');
    expect(await refusal(LockFile.acquire(dir, undefined, me))).toBeInstanceOf(StorageLockedError);
    await writeLock(dir, '4243\n');
    const lock = await LockFile.acquire(dir, undefined, me);
    expect(lock.tookOverFrom).toBe(4243);
    await lock.release();
  });

  it('a second open of the same data directory in one process is refused', async () => {
    const dir = await tempDir();
    const me = machineProcess({ pid: 1, bootId: 'B', running: { 1: '5000' } });
    const first = await LockFile.acquire(dir, undefined, me);
    const err = await refusal(LockFile.acquire(dir, undefined, me));
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as StorageLockedError).pid).toBe(1);
    // Through another spelling of the same directory (a symbolic link) too.
    const link = path.join(await tempDir(), 'data');
    await fsp.symlink(dir, link);
    expect(await refusal(LockFile.acquire(path.join(link, '.'), undefined, me))).toBeInstanceOf(
      StorageLockedError,
    );
    await first.release();

    // Two opens at once: one wins, the other is refused, and nothing is left behind.
    const both = await Promise.allSettled([
      LockFile.acquire(dir, undefined, me),
      LockFile.acquire(link, undefined, me),
    ]);
    expect(both.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    for (const r of both) {
      if (r.status === 'fulfilled') await r.value.release();
      else expect(r.reason).toBeInstanceOf(StorageLockedError);
    }
    expect(await fsp.readdir(dir)).toEqual([]);
    // Released: this process may take it again.
    await (await LockFile.acquire(dir, undefined, me)).release();
  });

  it('an owner without the optional members (a simulated process) writes its PID only, as before', async () => {
    const fs = new MemoryFs();
    await fs.mkdir('/n1');
    const owner: LockOwner = { pid: 3, isAlive: (p) => p === 3 };
    const lock = await LockFile.acquire('/n1', fs, owner);
    expect((await fs.readFile('/n1/LOCK')).toString()).toBe('3\n');
    // Its own PID is alive by its own rule: a second open is refused.
    expect(await refusal(LockFile.acquire('/n1', fs, owner))).toBeInstanceOf(StorageLockedError);
    const next = await LockFile.acquire('/n1', fs, { pid: 4, isAlive: (p) => p === 4 });
    expect(next.tookOverFrom).toBe(3);
    await next.release();
    await lock.release(); // the file names 4 no more, nor 3: nothing to remove
  });
});

describe('LockFile across PID namespaces (containers sharing a data volume)', () => {
  it("a second container on a shared volume (same PID 1, another PID namespace) is refused while the first one's heartbeat is fresh", async () => {
    const dir = await tempDir();
    const h = host();
    const first = await LockFile.acquire(dir, undefined, h.container(NS_A, '5000'));
    const text = await lockText(dir);
    expect(text).toBe(`1\nboot B\nstart 5000\npidns ${NS_A}\nnonce 4026532001n1\n`);
    // The second container is PID 1 too, does not hold the lock, and its own /proc/1 has another start time: the
    // PID rules would call the first one dead. It waits (the first keeps beating) for 17 s, then is refused.
    const err = await refusal(LockFile.acquire(dir, undefined, h.container(NS_B, '6000')));
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as StorageLockedError).pid).toBe(1);
    expect((err as Error).message).toMatch(
      /locked by live process 1 in another PID namespace \(pid:\[4026532001\]; this process: pid:\[4026532002\]\), whose heartbeat is 0\.0 s old \(taken over once older than 15\.0 s; waited 17\.0 s\)/,
    );
    expect(h.sleeps).toBeGreaterThan(1);
    // The first one's lock is untouched and still its own.
    expect(await lockText(dir)).toBe(text);
    await first.beat();
    expect(first.lost).toBeUndefined();
    await first.release();
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it('a restarted container (another PID namespace, stale heartbeat) takes over', async () => {
    const dir = await tempDir();
    const h = host();
    // The container was killed holding the lock 3 s ago; restarted, it is PID 1 in a new PID namespace.
    await writeLock(dir, `1\nboot B\nstart 5000\npidns ${NS_A}\nnonce aa\n`);
    await setMtime(dir, h.now - 3_000);
    const restarted = await LockFile.acquire(dir, undefined, h.container(NS_B, '7000'));
    expect(restarted.tookOverFrom).toBe(1);
    expect(restarted.staleBecause).toBe(
      `it was taken in another PID namespace (${NS_A}) and its heartbeat is 15.0 s old, stale after 15.0 s`,
    );
    expect(parseRecord(await lockText(dir))).toMatchObject({ pid: 1, pidNs: NS_B, startTicks: '7000' });
    await restarted.release();

    // Stale already (the supervisor retried later): taken over at once, without waiting.
    await writeLock(dir, `1\nboot B\nstart 5000\npidns ${NS_A}\nnonce bb\n`);
    await setMtime(dir, h.now - 60_000);
    const sleeps = h.sleeps;
    const later = await LockFile.acquire(dir, undefined, h.container('pid:[4026532003]', '9000'));
    expect(later.tookOverFrom).toBe(1);
    expect(h.sleeps).toBe(sleeps);
    await later.release();

    // Recorded on another boot: dead at once, however fresh its mtime.
    await writeLock(dir, `1\nboot A\nstart 5000\npidns ${NS_A}\nnonce cc\n`);
    const afterReboot = await LockFile.acquire(dir, undefined, h.container(NS_B, '40'));
    expect(afterReboot.staleBecause).toMatch(/before this machine last booted/);
    expect(h.sleeps).toBe(sleeps);
    await afterReboot.release();
  });

  it('the PID rules apply within one PID namespace, or when either namespace is unknown', async () => {
    const dir = await tempDir();
    const h = host();
    // Recorded in our own namespace, PID 1 = us, not held by us: an earlier process of this namespace left it.
    await writeLock(dir, `1\nboot B\nstart 5000\npidns ${NS_B}\nnonce aa\n`);
    const same = await LockFile.acquire(dir, undefined, h.container(NS_B, '6000'));
    expect(same.staleBecause).toMatch(/its PID is this process's/);
    await same.release();
    // Without a namespace (an older build wrote it): today's PID rules, with no wait (a documented limit).
    await writeLock(dir, '1\nboot B\nstart 5000\n');
    const old = await LockFile.acquire(dir, undefined, h.container(NS_B, '6000'));
    expect(old.staleBecause).toMatch(/its PID is this process's/);
    await old.release();
    expect(h.sleeps).toBe(0);
    // A live process of our namespace recorded with its namespace: refused at once, as before.
    await writeLock(dir, `4242\nboot B\npidns ${NS_B}\n`);
    const me = { ...h.container(NS_B, '6000'), isAlive: (p: number) => p === 1 || p === 4242 };
    const err = await refusal(LockFile.acquire(dir, undefined, me));
    expect((err as Error).message).toContain('locked by live process 4242: ');
    expect(h.sleeps).toBe(0);
  });

  it('a holder whose lock was taken over fail-stops at its next heartbeat', async () => {
    const dir = await tempDir();
    const h = host();
    const aWarnings: string[] = [];
    const a = await DurableStorage.open(dir, {
      bootstrapConf: { voters: [1], learners: [] },
      lockOwner: h.container(NS_A, '5000'),
      onWarning: (m) => aWarnings.push(m),
    });
    await a.save({ entries: ents(1, 3, 1) }, { sync: true });
    await h.advance(2_000); // a heartbeat: still ours
    expect(aWarnings).toEqual([]);
    // The first container is frozen (docker pause) past the stale bound; a second one takes the directory over.
    h.frozen.add(NS_A);
    await h.advance(16_000);
    const b = await DurableStorage.open(dir, { lockOwner: h.container(NS_B, '6000') });
    expect(b.storage.lastIndex()).toBe(3);
    // Thawed: its next heartbeat finds LOCK naming the other container, and its storage fail-stops.
    h.frozen.delete(NS_A);
    await h.advance(2_000);
    expect(aWarnings).toEqual([
      `the lock ${path.join(dir, LOCK_FILE_NAME)} now names process 1 in PID namespace ${NS_B}: another process took it over; this storage refuses all further writes (fail-stop)`,
    ]);
    const err = await refusal(a.save({ entries: ents(4, 4, 1) }, { sync: true }));
    expect(err).toBeInstanceOf(StorageFailedError);
    expect((err as Error).message).toContain('another process took it over');
    await a.close(); // leaves the other container's LOCK alone
    expect(parseRecord(await lockText(dir))).toMatchObject({ pidNs: NS_B });
    await b.save({ entries: ents(4, 4, 1) }, { sync: true });
    await b.close();
    expect(h.timers.size).toBe(0); // every heartbeat stopped at release
  });
});

describe('DurableStorage.open and the LOCK', () => {
  it('starts on a real directory whose LOCK names this process’s PID from an earlier incarnation', async () => {
    const dir = await tempDir();
    const s = await DurableStorage.open(dir, { bootstrapConf: { voters: [1], learners: [] } });
    await s.close();
    // A kill -9 of an earlier process that had our PID (a container's PID 1) left its LOCK behind:
    // as an older build wrote it, and as this build writes it (same boot, another start time).
    const boot = readBootId();
    for (const text of [`${process.pid}\n`, `${process.pid}\n${boot ? `boot ${boot}\n` : ''}start 1\n`]) {
      await writeLock(dir, text);
      const warnings: string[] = [];
      const again = await DurableStorage.open(dir, { onWarning: (m) => warnings.push(m) });
      expect(warnings).toContainEqual(
        expect.stringMatching(
          new RegExp(`took over a stale lock left by dead process ${process.pid} \\(.+\\)`),
        ),
      );
      // While it is open, a second open in this process is refused.
      const err = await refusal(DurableStorage.open(dir));
      expect(err).toBeInstanceOf(StorageLockedError);
      expect((err as Error).message).toMatch(/already open/);
      await again.close();
    }
    expect((await fsp.readdir(dir)).sort()).toEqual(['snap', 'wal']);
  });

  it('the runnable example (src/storage/lock-example.ts) reopens after a LOCK naming its own PID', async () => {
    const lines: string[] = [];
    await runLockExample(await tempDir(), (l) => lines.push(l));
    expect(lines[0]).toMatch(new RegExp(`^LOCK while open: "${process.pid}\\\\n`));
    expect(lines.slice(1)).toEqual([
      'second open: ERR_STORAGE_LOCKED',
      `warning: took over a stale lock left by dead process ${process.pid} (its PID is this process's, which does not hold it: an earlier process with this PID left it)`,
      'reopened',
    ]);
  });
});
