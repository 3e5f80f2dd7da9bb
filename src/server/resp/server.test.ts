import { afterEach, describe, expect, it } from 'vitest';
import { FakeCluster } from './fake-backend.js';
import { type RespServer, startRespServer } from './server.js';
import {
  encodeCommand,
  nextEvent,
  RawClient,
  RespErr,
  startTwoNodes,
  type TwoNodes,
} from './test-support.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

async function oneNode(
  limits: Parameters<typeof startRespServer>[0]['limits'] = {},
  cluster = new FakeCluster(),
): Promise<{ server: RespServer; cluster: FakeCluster; port: number }> {
  const server = await startRespServer({ backend: cluster.backend(1), limits });
  cluster.setMember(1, `127.0.0.1:${server.address.port}`);
  cluster.setLeader(1);
  cleanups.push(() => server.close());
  return { server, cluster, port: server.address.port };
}

async function client(port: number): Promise<RawClient> {
  const c = await RawClient.connect(port);
  cleanups.push(() => c.close());
  return c;
}

describe('pipelining', () => {
  it('answers a pipeline of async commands in request order (random backend delays)', async () => {
    const cluster = new FakeCluster({ delayMs: () => Math.floor(Math.random() * 3) });
    const { port } = await oneNode({}, cluster);
    const c = await client(port);
    const wire: Buffer[] = [];
    const expected: unknown[] = [];
    for (let i = 0; i < 300; i++) {
      if (i % 3 === 0) {
        wire.push(encodeCommand('ECHO', `e${i}`));
        expected.push(`e${i}`);
      } else if (i % 3 === 1) {
        wire.push(encodeCommand('WORKER.ACQUIRE', 'app', `inst-${i}`));
        expected.push(`inst-${i}`);
      } else {
        wire.push(Buffer.from(`PING p${i}\r\n`)); // inline, mixed into the same write
        expected.push(`p${i}`);
      }
    }
    c.write(Buffer.concat(wire));
    const replies = await c.readN(300);
    const got = replies.map((r) => (Array.isArray(r) ? r[r.indexOf('node_id') + 1] : r));
    expect(got).toEqual(expected);
  });

  it('runs pipelined commands one after another: a LIST sees the ACQUIRE sent just before it', async () => {
    const cluster = new FakeCluster({ delayMs: () => 5 });
    const { port } = await oneNode({}, cluster);
    const c = await client(port);
    c.write(
      Buffer.concat([encodeCommand('WORKER.ACQUIRE', 'orders', 'a'), encodeCommand('WORKER.LIST', 'orders')]),
    );
    const [lease, list] = await c.readN(2);
    expect(Array.isArray(lease)).toBe(true);
    expect(list).toHaveLength(1);
    expect(cluster.calls).toEqual(['acquire orders a', 'list orders']);
  });
});

describe('protocol errors: reply, close that connection, keep serving others', () => {
  let nodes: TwoNodes;
  const cases: [string, string | Buffer, string][] = [
    ['garbage multibulk count', '*abc\r\n', 'ERR Protocol error: invalid multibulk length'],
    ['negative multibulk count', '*-7\r\n', 'ERR Protocol error: invalid multibulk length'],
    ['huge multibulk count', '*2147483648\r\n', 'ERR Protocol error: invalid multibulk length'],
    ['negative bulk length', '*1\r\n$-3\r\n', 'ERR Protocol error: invalid bulk length'],
    ['huge bulk length', '*1\r\n$1073741824\r\n', 'ERR Protocol error: invalid bulk length'],
    ['missing $', '*1\r\n:4\r\n', "ERR Protocol error: expected '$', got ':'"],
    [
      'missing CRLF after data',
      '*1\r\n$4\r\nPINGPING\r\n',
      'ERR Protocol error: expected CRLF after bulk string data',
    ],
    ['endless count line', `*${'9'.repeat(100)}`, 'ERR Protocol error: too big mbulk count string'],
    ['unbalanced quotes', 'ECHO "abc\r\n', 'ERR Protocol error: unbalanced quotes in request'],
    ['endless inline line', Buffer.alloc(70 * 1024, 0x41), 'ERR Protocol error: too big inline request'],
  ];

  it.each(cases)('%s', async (_name, input, message) => {
    nodes = await startTwoNodes();
    cleanups.push(() => nodes.close());
    const port = nodes.leader.address.port;
    const bystander = await client(port);
    expect(await bystander.call('PING')).toBe('PONG');
    const bad = await client(port);
    // A valid command in the same write as the garbage is still answered first.
    bad.write(Buffer.concat([encodeCommand('ECHO', 'before'), Buffer.from(input)]));
    expect(await bad.read()).toBe('before');
    const err = await bad.read();
    expect(err).toBeInstanceOf(RespErr);
    expect((err as RespErr).message).toBe(message);
    await bad.closed; // the server closed it
    expect(await bystander.call('ECHO', 'still here')).toBe('still here');
    expect(nodes.leader.stats().protocolErrors).toBe(1);
  });
});

describe('command errors keep the connection open', () => {
  it('uses Redis wording for unknown commands, arity, integers, subcommands', async () => {
    const { port } = await oneNode();
    const c = await client(port);
    const msg = async (...args: string[]) => ((await c.call(...args)) as RespErr).message;
    expect(await msg('FOO', 'a', 'b')).toBe("ERR unknown command 'FOO', with args beginning with: 'a' 'b' ");
    expect(await msg('worker.acquire', 'x')).toBe(
      "ERR wrong number of arguments for 'worker.acquire' command",
    );
    expect(await msg('CLIENT', 'SETNAME')).toBe("ERR wrong number of arguments for 'client|setname' command");
    expect(await msg('CLIENT', 'NOPE')).toBe("ERR unknown subcommand 'NOPE'. Try CLIENT HELP.");
    expect(await msg('SELECT', 'x')).toBe('ERR value is not an integer or out of range');
    expect(await msg('SELECT', '1')).toBe('ERR DB index is out of range');
    expect(await msg('WORKER.ACQUIRE', 'app', 'n', 'TTL', 'soon')).toBe(
      'ERR value is not an integer or out of range',
    );
    expect(await msg('WORKER.ACQUIRE', 'app', 'n', 'TTL', '0')).toBe(
      'ERR invalid TTL 0: must be a positive number of milliseconds',
    );
    expect(await msg('WORKER.ACQUIRE', 'app', 'n', 'COLOR', 'red')).toBe('ERR syntax error');
    expect(await msg('WORKER.RENEW', 'app', '0', '-1')).toBe('ERR value is not an integer or out of range');
    expect(await msg('PING', 'a', 'b')).toBe("ERR wrong number of arguments for 'ping' command");
    expect(await c.call('SELECT', '0')).toBe('OK');
    expect(c.isClosed).toBe(false);
  });

  it('maps backend errors to reply codes', async () => {
    const { port, cluster } = await oneNode();
    const c = await client(port);
    expect(((await c.call('WORKER.RENEW', 'app', '3', '99')) as RespErr).message).toMatch(
      /^ERR worker 3 of app 'app' is not leased with token 99/,
    );
    for (let i = 0; i < cluster.poolSize; i++) await c.call('WORKER.ACQUIRE', 'small', `i${i}`);
    expect(((await c.call('WORKER.ACQUIRE', 'small', 'one-too-many')) as RespErr).message).toBe(
      "ERR no free worker id in app 'small' (all 1024 are leased)",
    );
  });
});

describe('authentication', () => {
  it('NOAUTH before AUTH, WRONGPASS on a bad password, HELLO AUTH, NOPERM per app', async () => {
    const cluster = new FakeCluster();
    cluster.addUser('alice', 's3cret', { orders: ['acquire', 'read'] });
    const { port } = await oneNode({}, cluster);
    const c = await client(port);
    expect(((await c.call('PING')) as RespErr).message).toBe('NOAUTH Authentication required.');
    expect(((await c.call('WORKER.LIST', 'orders')) as RespErr).message).toBe(
      'NOAUTH Authentication required.',
    );
    expect(((await c.call('HELLO', '3')) as RespErr).message).toMatch(
      /^NOAUTH HELLO must be called with the client already authenticated/,
    );
    expect(((await c.call('AUTH', 'alice', 'nope')) as RespErr).message).toBe(
      'WRONGPASS invalid username-password pair or user is disabled.',
    );
    const hello = await c.call('HELLO', '3', 'AUTH', 'alice', 's3cret', 'SETNAME', 'svc-1');
    expect(hello).toBeInstanceOf(Map);
    expect((hello as Map<unknown, unknown>).get('proto')).toBe(3);
    expect(await c.call('CLIENT', 'GETNAME')).toBe('svc-1');
    const lease = (await c.call('WORKER.ACQUIRE', 'orders', 'h1')) as Map<string, unknown>;
    expect(lease.get('worker_id')).toBe(0);
    expect(
      ((await c.call('WORKER.RELEASE', 'orders', '0', String(lease.get('token')))) as RespErr).message,
    ).toBe("NOPERM this user has no permissions to release leases of app 'orders'");
    expect(((await c.call('WORKER.ACQUIRE', 'payments', 'h1')) as RespErr).message).toMatch(/^NOPERM/);
    expect(await c.call('QUIT')).toBe('OK');
    await c.closed;
  });

  it('before AUTH, Redis limits requests to 10 arguments and 16 KiB bulks (then closes)', async () => {
    const cluster = new FakeCluster();
    cluster.addUser('default', 'pw');
    const { port } = await oneNode({}, cluster);
    const c = await client(port);
    c.write(encodeCommand('ECHO', 'a'.repeat(20_000)));
    expect(((await c.read()) as RespErr).message).toBe('ERR Protocol error: unauthenticated bulk length');
    await c.closed;
    const d = await client(port);
    expect(await d.call('AUTH', 'pw')).toBe('OK');
    expect(await d.call('ECHO', 'a'.repeat(20_000))).toHaveLength(20_000);
  });

  it('with auth off: AUTH <pass> is refused as Redis refuses it, AUTH default <any> succeeds', async () => {
    const { port } = await oneNode();
    const c = await client(port);
    expect(((await c.call('AUTH', 'x')) as RespErr).message).toMatch(
      /^ERR AUTH <password> called without any password configured for the default user/,
    );
    expect(await c.call('AUTH', 'default', 'whatever')).toBe('OK');
  });
});

describe('limits', () => {
  it('refuses connections over maxClients with Redis error and closes them; others keep working', async () => {
    const { server, port } = await oneNode({ maxClients: 2 });
    const a = await client(port);
    const b = await client(port);
    expect(await a.call('PING')).toBe('PONG');
    expect(await b.call('PING')).toBe('PONG');
    const c = await client(port);
    expect(((await c.read()) as RespErr).message).toBe('ERR max number of clients reached');
    await c.closed;
    expect(await a.call('PING')).toBe('PONG');
    expect(server.stats().rejectedConnections).toBe(1);
    const closed = nextEvent<{ id: number }>(server.events, 'client-closed');
    b.close();
    await closed;
    const d = await client(port);
    expect(await d.call('PING')).toBe('PONG');
  });

  it('closes a client idle for idleTimeoutMs, but not a pub/sub subscriber', async () => {
    const { server, port } = await oneNode({ idleTimeoutMs: 150 });
    const subscriber = await client(port);
    await subscriber.call('SUBSCRIBE', '+switch-master');
    const idle = await client(port);
    expect(await idle.call('PING')).toBe('PONG');
    const event = nextEvent<{ reason: string }>(server.events, 'client-closed');
    await idle.closed; // closed by the server: this test never closes it
    expect((await event).reason).toBe('idle');
    expect(server.stats().idleClosed).toBe(1);
    expect(subscriber.isClosed).toBe(false);
    expect(await subscriber.call('PING')).toEqual(['pong', '']);
  });

  it('does not close a client as idle while its command is still running', async () => {
    const cluster = new FakeCluster({ delayMs: () => 300 });
    const { server, port } = await oneNode({ idleTimeoutMs: 100 }, cluster);
    const c = await client(port);
    const closed = nextEvent<{ reason: string }>(server.events, 'client-closed');
    const lease = await c.call('WORKER.ACQUIRE', 'orders', 'slow'); // takes 3x the idle timeout
    expect(Array.isArray(lease)).toBe(true);
    expect(c.isClosed).toBe(false);
    expect((await closed).reason).toBe('idle'); // and it is closed once really idle
  });

  it('stops reading a client whose pipelined input piles up behind a slow command', async () => {
    const cluster = new FakeCluster({ delayMs: () => 200 });
    const { server, port } = await oneNode({ readHighWaterBytes: 16 * 1024 }, cluster);
    const c = await client(port);
    const paused = nextEvent<{ reason: string }>(server.events, 'client-paused');
    const pings = Buffer.from('PING\r\n'.repeat(100_000)); // 600 KB behind one slow command
    c.write(Buffer.concat([encodeCommand('WORKER.ACQUIRE', 'orders', 'x'), pings]));
    expect((await paused).reason).toBe('input');
    expect(server.stats().clients[0]!.queryBufferBytes).toBeLessThanOrEqual(16 * 1024 + 128 * 1024);
    const replies = await c.readN(100_001);
    expect(replies.slice(1).every((r) => r === 'PONG')).toBe(true);
  });

  it('a slow reader is paused (not buffered without bound) and gets every reply in order once it reads', async () => {
    const maxOutputBytes = 64 * 1024;
    const { server, port } = await oneNode({ maxOutputBytes });
    const c = await client(port);
    c.socket.pause(); // stop reading replies
    const payload = 'x'.repeat(4096);
    const n = 3000; // ~12 MiB of replies, far more than socket buffers hold
    const paused = nextEvent<{ reason: string }>(server.events, 'client-paused');
    const wire = Buffer.concat(Array.from({ length: n }, (_, i) => encodeCommand('ECHO', `${i}:${payload}`)));
    c.write(wire);
    expect((await paused).reason).toBe('output');
    const row = server.stats().clients[0]!;
    expect(row.paused).toBe(true);
    expect(row.outputBufferBytes).toBeLessThanOrEqual(maxOutputBytes + 2 * 4200);
    expect(row.queryBufferBytes).toBeLessThanOrEqual(2 * 64 * 1024 + 4200);
    c.socket.resume();
    const replies = await c.readN(n);
    expect(replies.map((r) => Number(String(r).split(':')[0]))).toEqual(
      Array.from({ length: n }, (_, i) => i),
    );
    expect(server.stats().backpressurePauses).toBeGreaterThanOrEqual(1);
  });

  it('a client that half-closes after sending still gets every reply, then the server closes', async () => {
    const cluster = new FakeCluster({ delayMs: () => 50 });
    const { port } = await oneNode({}, cluster);
    const c = await client(port);
    c.socket.end(Buffer.concat([encodeCommand('WORKER.ACQUIRE', 'orders', 'h'), Buffer.from('PING\r\n')]));
    const [lease, pong] = await c.readN(2);
    expect(Array.isArray(lease)).toBe(true);
    expect(pong).toBe('PONG');
    await c.closed;
  });

  it('QUIT replies OK, closes, and ignores what was pipelined after it', async () => {
    const { port, cluster } = await oneNode();
    const c = await client(port);
    c.write(Buffer.concat([encodeCommand('QUIT'), encodeCommand('WORKER.ACQUIRE', 'orders', 'late')]));
    expect(await c.read()).toBe('OK');
    await c.closed;
    expect(c.pending()).toBe('');
    expect(cluster.calls).toEqual([]);
  });

  it('rejects bad limits naming the field and the range', async () => {
    await expect(
      startRespServer({ backend: new FakeCluster().backend(1), limits: { maxArgs: 0 } }),
    ).rejects.toThrow('invalid RESP server option: limits.maxArgs = 0; allowed: an integer in [1, 1048576]');
  });
});
