// Issue 9 item 2 with real processes: two live SDK processes with one nodeId and one cache path never get one lease.
// A real 3-node cluster (`npm run build` first) and client processes (test/cluster/incarnation-client.ts) that write
// every ID they generate to a file at once; the check is that no ID appears twice across all of them.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { Cluster, repoRoot, waitForLeader } from './harness.js';

interface Event {
  event: string;
  [k: string]: unknown;
}

/** One client process and the events it reported. */
class ClientProc {
  readonly events: Event[] = [];
  private waiters: Array<() => void> = [];
  readonly exited: Promise<unknown>;

  constructor(
    readonly proc: ChildProcess,
    readonly out: string,
  ) {
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      try {
        this.events.push(JSON.parse(line) as Event);
      } catch {
        this.events.push({ event: 'text', line });
      }
      for (const w of this.waiters.splice(0)) w();
    });
    this.exited = once(proc, 'exit');
    void this.exited.then(() => {
      for (const w of this.waiters.splice(0)) w();
    });
  }

  static start(dir: string, name: string, o: Record<string, unknown>): ClientProc {
    const out = join(dir, `ids-${name}.bin`);
    const proc = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(repoRoot, 'test/cluster/incarnation-client.ts'),
        JSON.stringify({ ...o, out }),
      ],
      { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    return new ClientProc(proc, out);
  }

  get pid(): number {
    return this.proc.pid as number;
  }

  /** The first reported event of one of `kinds` (the process's stdout is the event here). */
  async next(kinds: string[], timeoutMs = 60_000): Promise<Event> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const e = this.events.find((x) => kinds.includes(x.event));
      if (e) return e;
      if (this.proc.exitCode !== null || this.proc.signalCode !== null)
        throw new Error(`client exited without ${kinds.join('/')}: ${JSON.stringify(this.events)}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${kinds.join('/')}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 1000).unref();
      });
    }
  }

  async kill9(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGKILL');
    await this.exited;
  }

  ids(): BigInt64Array {
    if (!existsSync(this.out)) return new BigInt64Array(0);
    const b = readFileSync(this.out);
    return new BigInt64Array(b.buffer, b.byteOffset, Math.floor(b.length / 8));
  }
}

/** IDs that appear more than once across all the processes. */
function duplicates(procs: ClientProc[]): { total: number; duplicates: number } {
  const all = new BigInt64Array(procs.reduce((n, p) => n + p.ids().length, 0));
  let at = 0;
  for (const p of procs) {
    const ids = p.ids();
    all.set(ids, at);
    at += ids.length;
  }
  all.sort();
  let dup = 0;
  for (let i = 1; i < all.length; i++) if (all[i] === all[i - 1]) dup++;
  return { total: all.length, duplicates: dup };
}

let cluster: Cluster | undefined;
let procs: ClientProc[] = [];
let dir: string | undefined;
afterEach(async () => {
  await Promise.all(procs.map((p) => p.kill9()));
  procs = [];
  await cluster?.stopAll();
  cluster?.cleanup();
  cluster = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

async function start(): Promise<{ endpoints: string[]; dir: string }> {
  cluster = await Cluster.create({ size: 3 });
  cluster.startAll();
  await waitForLeader(cluster);
  dir = mkdtempSync(join(tmpdir(), 'floe-incarnation-'));
  return { endpoints: cluster.nodes.map((n) => n.http), dir };
}

const ttlMs = 3000;

describe('two live processes never get one lease (issue 9 item 2)', () => {
  it('scenario (a): a second process started while the first still runs, same nodeId and cache path, issues no ID; duplicates = 0', async () => {
    const { endpoints, dir } = await start();
    const cachePath = join(dir, 'svc.lease.json');
    const common = { endpoints, app: 'orders', nodeId: 'svc-1', ttlMs };
    const a = ClientProc.start(dir, 'a', { ...common, cachePath, runMs: 60_000 });
    procs.push(a);
    const leasedA = await a.next(['leased', 'error']);
    expect(leasedA.event).toBe('leased');
    await a.next(['generating']);

    // The replacement (PM2 reload, a supervisor starting it early): same nodeId, same cache file.
    const b = ClientProc.start(dir, 'b', { ...common, cachePath, runMs: 60_000, cacheLockWaitMs: 1000 });
    procs.push(b);
    const eb = await b.next(['leased', 'error']);
    expect(eb).toMatchObject({ event: 'error', code: 'ERR_CACHE_LOCKED' });
    expect(String(eb.message)).toContain(cachePath);
    expect(String(eb.message)).toContain(`pid ${a.pid}`);

    // Cluster workers sharing a config: another cache path, but the first one's requestId (read from its cache).
    const cached = JSON.parse(readFileSync(cachePath, 'utf8')) as { requestId: string };
    expect(cached.requestId).toBe(leasedA.requestId);
    const c = ClientProc.start(dir, 'c', {
      ...common,
      requestId: cached.requestId,
      cachePath: join(dir, 'other.lease.json'),
      runMs: 60_000,
      acquireTimeoutMs: 1500,
    });
    procs.push(c);
    expect(await c.next(['leased', 'error'])).toMatchObject({ event: 'error', serverCode: 'lease_held' });

    await a.kill9();
    const r = duplicates([a, b, c]);
    expect(r.total).toBeGreaterThan(0);
    expect(b.ids().length + c.ids().length).toBe(0);
    expect(r.duplicates).toBe(0);
  }, 180_000);

  it("scenario (b): two processes started at once from a crashed predecessor's cache: one runs, with a new token; duplicates = 0", async () => {
    const { endpoints, dir } = await start();
    const cachePath = join(dir, 'svc.lease.json');
    const common = { endpoints, app: 'orders', nodeId: 'svc-2', ttlMs, cachePath };
    const a = ClientProc.start(dir, 'a', { ...common, runMs: 60_000 });
    procs.push(a);
    const leasedA = await a.next(['leased', 'error']);
    expect(leasedA.event).toBe('leased');
    await a.next(['generating']);
    await a.kill9(); // crash: the cache and a lock naming a dead PID stay behind

    const b = ClientProc.start(dir, 'b', { ...common, runMs: 5000, cacheLockWaitMs: 2000 });
    const c = ClientProc.start(dir, 'c', { ...common, runMs: 5000, cacheLockWaitMs: 2000 });
    procs.push(b, c);
    const [eb, ec] = await Promise.all([b.next(['leased', 'error']), c.next(['leased', 'error'])]);
    const winners = [eb, ec].filter((e) => e.event === 'leased');
    const losers = [eb, ec].filter((e) => e.event === 'error');
    expect(winners).toHaveLength(1);
    expect(losers).toHaveLength(1);
    expect(losers[0]).toMatchObject({ code: 'ERR_CACHE_LOCKED' });
    const w = winners[0]!;
    expect(w.workerId).toBe(leasedA.workerId); // stable worker ID
    expect(Number(w.token)).toBeGreaterThan(Number(leasedA.token)); // never the crashed process's token
    await Promise.all([b.next(['done', 'lost', 'error']), c.next(['done', 'lost', 'error'])]);
    const r = duplicates([a, b, c]);
    expect(r.total).toBeGreaterThan(0);
    expect(r.duplicates).toBe(0);
  }, 180_000);
});
