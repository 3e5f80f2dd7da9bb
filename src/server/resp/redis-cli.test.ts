/**
 * The real `redis-cli` against the server (plain, `-c` following MOVED from a follower to the leader, `-3`,
 * auth), and a differential check: the same bytes sent to Floe and to a real redis-server must produce the same
 * bytes back for the error paths and generic commands both implement.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyHashSlot } from './crc16.js';
import { FakeCluster } from './fake-backend.js';
import { startRespServer } from './server.js';
import { startTwoNodes, type TwoNodes } from './test-support.js';

const run = promisify(execFile);
const REDIS_CLI = '/usr/bin/redis-cli';
const REDIS_SERVER = '/usr/bin/redis-server';

async function cli(...args: string[]): Promise<string> {
  const { stdout } = await run(REDIS_CLI, args, { timeout: 10_000 });
  return stdout;
}

describe.skipIf(!existsSync(REDIS_CLI))('redis-cli', () => {
  let nodes: TwoNodes;
  let lp: string;
  let fp: string;
  beforeAll(async () => {
    nodes = await startTwoNodes();
    lp = String(nodes.leader.address.port);
    fp = String(nodes.follower.address.port);
  });
  afterAll(() => nodes.close());

  it('PING, ECHO, errors as redis-cli prints them', async () => {
    expect(await cli('-p', lp, 'PING')).toBe('PONG\n');
    expect(await cli('-p', lp, 'ECHO', 'hello world')).toBe('hello world\n');
    expect(await cli('-p', lp, '--no-raw', 'FOO', 'a', 'b')).toBe(
      "(error) ERR unknown command 'FOO', with args beginning with: 'a' 'b' \n",
    );
  });

  it('without -c a follower prints MOVED; with -c redis-cli follows it to the leader', async () => {
    expect(await cli('-p', fp, 'WORKER.ACQUIRE', 'orders', 'cli-1')).toBe(
      `MOVED ${keyHashSlot('orders')} 127.0.0.1:${lp}\n\n`,
    );
    expect(nodes.cluster.calls).toEqual([]);
    const out = (await cli('-c', '-p', fp, 'WORKER.ACQUIRE', 'orders', 'cli-1')).split('\n');
    expect(out.slice(0, 4)).toEqual(['worker_id', '0', 'datacenter_id', '0']);
    expect(out).toContain('cli-1');
    expect(nodes.cluster.calls).toEqual(['acquire orders cli-1']);
  });

  it('-3 speaks RESP3: HELLO reply and maps', async () => {
    const hello = await cli('-3', '-p', fp, 'HELLO');
    expect(hello).toContain('proto 3');
    expect(hello).toContain('role replica');
    const lease = await cli('-3', '-c', '-p', fp, 'WORKER.LIST', 'orders');
    expect(lease).toContain('node_id cli-1');
  });

  it('--user/--pass authenticates; without them NOAUTH', async () => {
    const cluster = new FakeCluster();
    cluster.addUser('alice', 'pw');
    const s = await startRespServer({ backend: cluster.backend(1) });
    cluster.setMember(1, `127.0.0.1:${s.address.port}`);
    cluster.setLeader(1);
    try {
      const p = String(s.address.port);
      expect(await cli('-p', p, 'PING')).toBe('NOAUTH Authentication required.\n\n');
      expect(await cli('-p', p, '--user', 'alice', '--pass', 'pw', '--no-auth-warning', 'PING')).toBe(
        'PONG\n',
      );
    } finally {
      await s.close();
    }
  });
});

/** Send `input`, then an `ECHO __end__` marker; collect everything until the marker or the server's close. */
function exchange(
  target: { port?: number; path?: string },
  input: Buffer,
): Promise<{ bytes: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const end = '$7\r\n__end__\r\n';
    const s = target.path ? connect(target.path) : connect(target.port!, '127.0.0.1');
    let got = '';
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      s.destroy();
      resolve({ bytes: closed ? got : got.slice(0, -end.length), closed });
    };
    s.on('connect', () =>
      s.write(Buffer.concat([input, Buffer.from('*2\r\n$4\r\nECHO\r\n$7\r\n__end__\r\n')])),
    );
    s.on('data', (d) => {
      got += d.toString('latin1');
      if (got.endsWith(end)) finish(false);
    });
    s.on('close', () => finish(true));
    s.on('error', (e) => (done ? undefined : reject(e)));
  });
}

async function waitForSocket(path: string, proc: ChildProcess): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(path);
      s.on('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 25)); // polling a process start-up: no event to wait on
  }
  throw new Error('redis-server did not start');
}

describe.skipIf(!existsSync(REDIS_SERVER))('same bytes in, same bytes out as redis-server 7.0', () => {
  let dir: string;
  let redis: ChildProcess;
  let redisCluster: ChildProcess;
  let nodes: TwoNodes;
  const redisSock = () => join(dir, 'redis.sock');
  const clusterSock = () => join(dir, 'cluster.sock');

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'floe-resp-'));
    const common = ['--port', '0', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', dir];
    redis = spawn(REDIS_SERVER, [...common, '--unixsocket', redisSock()], { stdio: 'ignore' });
    redisCluster = spawn(
      REDIS_SERVER,
      [
        ...common,
        '--unixsocket',
        clusterSock(),
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, 'nodes.conf'),
      ],
      { stdio: 'ignore' },
    );
    nodes = await startTwoNodes();
    await Promise.all([waitForSocket(redisSock(), redis), waitForSocket(clusterSock(), redisCluster)]);
  });
  afterAll(async () => {
    // Stopped by PID (the handles this test spawned), never by name.
    redis?.kill('SIGTERM');
    redisCluster?.kill('SIGTERM');
    await nodes?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const cases: [string, string][] = [
    ['unknown command with long args', `FOO ${'a'.repeat(95)} ${'b'.repeat(80)} c\r\n`],
    ['unknown command, multibulk', '*3\r\n$3\r\nfoO\r\n$1\r\nx\r\n$0\r\n\r\n'],
    ['wrong arity', 'PING a b\r\nECHO\r\n'],
    ['SELECT not an integer', 'SELECT x\r\nSELECT 0\r\n'],
    [
      'client subcommands',
      'CLIENT SETNAME "a b"\r\nCLIENT NOPE\r\nCLIENT SETNAME\r\nCLIENT GETNAME\r\nCLIENT SETNAME n1\r\nCLIENT GETNAME\r\n',
    ],
    ['HELLO errors', 'HELLO 4\r\nHELLO x\r\nHELLO 3 SETNAME\r\nHELLO 2 FOO\r\n'],
    ['AUTH without a configured password', 'AUTH x\r\nAUTH a b c\r\n'],
    ['inline quoting', 'ECHO "a\\x41\\n\\t"\r\nECHO \'it\\\'s\'\r\nECHO a"b c"\r\n\r\n   \r\nPING\n'],
    ['empty multibulk requests are skipped', '*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n'],
    [
      'pub/sub context (RESP2)',
      'SUBSCRIBE a b\r\nPING\r\nPING hi\r\nSELECT 0\r\nUNSUBSCRIBE b\r\nUNSUBSCRIBE\r\nUNSUBSCRIBE\r\nPING\r\n',
    ],
    ['pub/sub in RESP3 (push replies)', 'HELLO 3\r\nSUBSCRIBE a\r\nPING\r\nECHO x\r\nUNSUBSCRIBE a\r\n'],
    ['RESET', 'CLIENT SETNAME n\r\nRESET\r\nCLIENT GETNAME\r\n'],
    ['QUIT', 'PING\r\nQUIT\r\nPING\r\n'],
    ['protocol error: multibulk count', 'PING\r\n*abc\r\n'],
    ['protocol error: bulk length', '*1\r\n$-3\r\n'],
    ['protocol error: huge bulk length', '*1\r\n$1073741824\r\n'],
    ['protocol error: expected $', '*1\r\n:4\r\n'],
    ['protocol error: unbalanced quotes', 'ECHO "abc\r\n'],
    ['protocol error: closing quote followed by a letter', 'ECHO "a"b\r\n'],
  ];

  it.each(cases)('%s', async (_name, input) => {
    const bytes = Buffer.from(input, 'latin1');
    const theirs = await exchange({ path: redisSock() }, bytes);
    const ours = await exchange({ port: nodes.leader.address.port }, bytes);
    // HELLO 3's map names the server; compare everything after it.
    const strip = (s: string) => s.replace(/^%7\r\n[\s\S]*?\$7\r\nmodules\r\n\*0\r\n/, '%HELLO\r\n');
    expect(theirs.bytes.length).toBeGreaterThan(0);
    expect(strip(ours.bytes)).toBe(strip(theirs.bytes));
    expect(ours.closed).toBe(theirs.closed);
    if (process.env.SHOW_RESP_DIFF) console.log(JSON.stringify(theirs));
  });

  it('CLUSTER KEYSLOT agrees with Redis for 500 keys (with and without hash tags)', async () => {
    const keys: string[] = ['', 'foo', '123456789', '{}', '{a}{b}', 'a{}b{c}', '{{x}}', '}{'];
    for (let i = 0; keys.length < 500; i++) {
      const r = (i * 2654435761) >>> 0;
      const base = r.toString(36);
      keys.push(
        i % 3 === 0 ? `${base}{${(r >>> 7).toString(36)}}x` : i % 3 === 1 ? `user:${base}` : `é${base}`,
      );
    }
    const wire = keys
      .map((k) => `*3\r\n$7\r\nCLUSTER\r\n$7\r\nKEYSLOT\r\n$${Buffer.byteLength(k)}\r\n${k}\r\n`)
      .join('');
    const theirs = await exchange({ path: clusterSock() }, Buffer.from(wire, 'utf8'));
    const slots = theirs.bytes
      .split('\r\n')
      .filter((l) => l.startsWith(':'))
      .map((l) => Number(l.slice(1)));
    expect(slots).toHaveLength(keys.length);
    expect(keys.map((k) => keyHashSlot(k))).toEqual(slots);
  });
});
