/**
 * `npx tsx bench/resp.ts`: the RESP server's request rate next to a real redis-server's, measured by the same
 * `redis-benchmark -t ping -n 200000 -c 50` (PING_INLINE and PING_MBULK), without and with `-P 16` pipelining.
 * Floe runs in this process (one JavaScript thread) with the in-memory fake backend (PING never reaches the
 * backend); redis-server is started here on a free port and stopped by its PID at the end. Bounded to about
 * 20 s on a quiet machine. Options: `--n <requests>` (default 200000), `--clients <c>` (default 50).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { cpus } from 'node:os';
import { FakeCluster } from '../src/server/resp/fake-backend.js';
import { startRespServer } from '../src/server/resp/server.js';
import { arg } from './args.js';

const REDIS_SERVER = process.env.REDIS_SERVER ?? 'redis-server';
const REDIS_BENCHMARK = process.env.REDIS_BENCHMARK ?? 'redis-benchmark';

const N = arg('n', 200_000);
const CLIENTS = arg('clients', 50);

/** A port the OS says is free right now (redis-server needs an explicit port). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

function runProcess(cmd: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
    });
    p.stderr.on('data', (d) => {
      out += d;
    });
    const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('error', reject);
    p.on('close', (code) => {
      clearTimeout(t);
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}: ${out}`));
    });
  });
}

/** requests/s per test name, parsed from `redis-benchmark -q` lines like `PING_INLINE: 98765.43 requests per second, ...`. */
async function benchmark(port: number, pipeline: number): Promise<Map<string, number>> {
  const args = [
    '-h',
    '127.0.0.1',
    '-p',
    String(port),
    '-t',
    'ping',
    '-n',
    String(N),
    '-c',
    String(CLIENTS),
    '-q',
  ];
  if (pipeline > 1) args.push('-P', String(pipeline));
  const out = await runProcess(REDIS_BENCHMARK, args, 120_000);
  const rates = new Map<string, number>();
  for (const m of out.matchAll(/(PING_\w+): ([0-9.]+) requests per second/g)) rates.set(m[1]!, Number(m[2]));
  if (rates.size === 0) throw new Error(`could not parse redis-benchmark output:\n${out}`);
  return rates;
}

async function waitForRedis(port: number, proc: ChildProcess): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode}`);
    try {
      await runProcess('redis-cli', ['-p', String(port), 'PING'], 2000);
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 50)); // waiting for a process to start: no event to wait on
    }
  }
  throw new Error('redis-server did not start');
}

async function main(): Promise<void> {
  const cluster = new FakeCluster();
  const floe = await startRespServer({ backend: cluster.backend(1), limits: { maxClients: 1000 } });
  cluster.setMember(1, `127.0.0.1:${floe.address.port}`);
  cluster.setLeader(1);

  const redisPort = await freePort();
  const redis = spawn(
    REDIS_SERVER,
    [
      '--port',
      String(redisPort),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'no',
    ],
    { stdio: 'ignore' },
  );
  const started = Date.now();
  try {
    await waitForRedis(redisPort, redis);
    console.log(
      `redis-benchmark -t ping -n ${N} -c ${CLIENTS} on ${cpus().length} CPU(s) (${cpus()[0]?.model ?? '?'}), Node ${process.version}`,
    );
    console.log(
      'Floe: this process, one JS thread, fake backend. redis-server: pid %d, port %d.\n',
      redis.pid,
      redisPort,
    );
    const rows: string[][] = [['test', 'pipeline', 'floe req/s', 'redis req/s', 'floe/redis']];
    for (const pipeline of [1, 16]) {
      const f = await benchmark(floe.address.port, pipeline);
      const r = await benchmark(redisPort, pipeline);
      for (const [test, fr] of f) {
        const rr = r.get(test) ?? Number.NaN;
        rows.push([test, String(pipeline), fr.toFixed(0), rr.toFixed(0), `${((fr / rr) * 100).toFixed(0)}%`]);
      }
    }
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
    for (const r of rows) console.log(r.map((c, i) => c.padStart(widths[i]!)).join('  '));
    const s = floe.stats();
    console.log(
      `\nfloe served ${s.totalCommands} commands over ${s.totalConnections} connections; ${((Date.now() - started) / 1000).toFixed(1)} s total`,
    );
  } finally {
    redis.kill('SIGTERM'); // by PID: the process this script started
    await floe.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
