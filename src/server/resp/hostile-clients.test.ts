/**
 * Issue 15 item 6 on RESP, with real sockets: a slowloris client is cut, connection N+1 (in total or
 * from one address) gets a clear error, and a client that pipelines without reading stays bounded in
 * server memory and is then disconnected with a clear log line (client-output-buffer-limit).
 */
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServerLogger } from './command.js';
import { FakeCluster } from './fake-backend.js';
import type { RespLimits } from './limits.js';
import { type RespServer, startRespServer } from './server.js';
import { encodeCommand, nextEvent, RawClient, type RespErr } from './test-support.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

interface Logged {
  level: string;
  msg: string;
}

async function oneNode(
  limits: Partial<RespLimits>,
): Promise<{ server: RespServer; port: number; logs: Logged[] }> {
  const logs: Logged[] = [];
  const at =
    (level: string) =>
    (_obj: unknown, msg?: string): void => {
      logs.push({ level, msg: msg ?? '' });
    };
  const logger: ServerLogger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  const cluster = new FakeCluster();
  const server = await startRespServer({ backend: cluster.backend(1), limits, logger });
  cluster.setMember(1, `127.0.0.1:${server.address.port}`);
  cluster.setLeader(1);
  cleanups.push(() => server.close());
  return { server, port: server.address.port, logs };
}

async function client(port: number): Promise<RawClient> {
  const c = await RawClient.connect(port);
  cleanups.push(() => c.close());
  return c;
}

/** A raw socket from a chosen local address (127.0.0.2 is another client address on Linux loopback). */
function rawFrom(port: number, localAddress: string): Promise<{ socket: Socket; data: () => string }> {
  return new Promise((resolve, reject) => {
    let received = '';
    const socket = connect({ port, host: '127.0.0.1', localAddress }, () =>
      resolve({ socket, data: () => received }),
    );
    socket.on('data', (d) => {
      received += d.toString('latin1');
    });
    socket.once('error', reject);
    cleanups.push(() => socket.destroy());
  });
}

describe('RESP against hostile clients', () => {
  it('cuts a slowloris client whose request stays incomplete past requestTimeoutMs, with an error', async () => {
    const { server, port, logs } = await oneNode({ requestTimeoutMs: 300, idleTimeoutMs: 0 });
    const c = await client(port);
    const started = Date.now();
    // One byte of a command every 50 ms: the idle timer never fires, the request never completes.
    const wire = encodeCommand('ECHO', 'x'.repeat(200));
    let i = 0;
    const drip = setInterval(() => {
      if (i < wire.length - 1 && !c.isClosed) c.write(wire.subarray(i, ++i));
    }, 50);
    cleanups.push(() => clearInterval(drip));
    const closed = nextEvent<{ reason: string }>(server.events, 'client-closed');
    const reply = await c.read();
    expect((reply as RespErr).message).toBe('ERR request not completed within 300 ms (requestTimeoutMs)');
    expect((await closed).reason).toBe('request-timeout');
    await c.closed;
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(server.stats().requestTimeoutClosed).toBe(1);
    expect(logs.some((l) => l.msg.includes('request not completed within 300 ms'))).toBe(true);
  });

  // Regression (FS-18, full-stack simulator, hostile seed 6): a request that stopped right after a CRLF left nothing
  // buffered (the parser had consumed its parts so far), and the request timer never ran: the client held its
  // connection slot for ever.
  it('cuts a client whose request stops right after a CRLF (nothing buffered, the request begun)', async () => {
    const { server, port } = await oneNode({ requestTimeoutMs: 300, idleTimeoutMs: 0 });
    const c = await client(port);
    c.write(Buffer.from('*2\r\n$4\r\nECHO\r\n'));
    const closed = nextEvent<{ reason: string }>(server.events, 'client-closed');
    const reply = await c.read();
    expect((reply as RespErr).message).toBe('ERR request not completed within 300 ms (requestTimeoutMs)');
    expect((await closed).reason).toBe('request-timeout');
    await c.closed;
    expect(server.stats().requestTimeoutClosed).toBe(1);
  });

  it('a complete request never starts the request timer; a pipeline split across packets is fine', async () => {
    const { port } = await oneNode({ requestTimeoutMs: 200 });
    const c = await client(port);
    const wire = Buffer.concat([encodeCommand('PING'), encodeCommand('ECHO', 'hi')]);
    c.write(wire.subarray(0, 20));
    c.write(wire.subarray(20));
    expect(await c.readN(2)).toEqual(['PONG', 'hi']);
    // Idle between complete requests is not a slow request.
    await new Promise((r) => setTimeout(r, 400));
    expect(await c.call('PING')).toBe('PONG');
  });

  it('connection N+1 gets "-ERR max number of clients reached" and is closed', async () => {
    const { server, port, logs } = await oneNode({ maxClients: 3 });
    const held = [await client(port), await client(port), await client(port)];
    for (const h of held) expect(await h.call('PING')).toBe('PONG');
    const extra = await client(port);
    expect(((await extra.read()) as RespErr).message).toBe('ERR max number of clients reached');
    await extra.closed;
    expect(server.stats().connectedClients).toBe(3);
    expect(logs.some((l) => l.level === 'warn' && l.msg.includes('max number of clients (3) reached'))).toBe(
      true,
    );
  });

  it('limits clients per address: the extra one from 127.0.0.1 is refused, 127.0.0.2 still connects', async () => {
    const { server, port } = await oneNode({ maxClientsPerAddress: 2 });
    const a = await client(port);
    const b = await client(port);
    expect(await a.call('PING')).toBe('PONG');
    expect(await b.call('PING')).toBe('PONG');
    const rejected = nextEvent<{ reason: string }>(server.events, 'client-rejected');
    const c = await client(port);
    expect(((await c.read()) as RespErr).message).toBe('ERR max number of clients per address reached');
    expect((await rejected).reason).toBe('max-clients-per-address');
    await c.closed;
    const other = await rawFrom(port, '127.0.0.2');
    other.socket.write('PING\r\n');
    await new Promise<void>((resolve) => {
      const check = () => (other.data() === '+PONG\r\n' ? resolve() : setTimeout(check, 10));
      check();
    });
    // A slot frees when one closes.
    const closed = nextEvent(server.events, 'client-closed');
    a.close();
    await closed;
    const d = await client(port);
    expect(await d.call('PING')).toBe('PONG');
  });

  it('a client pipelining without reading is bounded in server memory, then cut with a clear log line', async () => {
    const maxOutputBytes = 32 * 1024;
    const { server, port, logs } = await oneNode({ maxOutputBytes, outputStallTimeoutMs: 500 });
    const c = await client(port);
    c.socket.pause(); // never read a reply
    const payload = 'y'.repeat(1000);
    const one = encodeCommand('ECHO', payload);
    const paused = nextEvent<{ reason: string }>(server.events, 'client-paused');
    const closed = nextEvent<{ reason: string }>(server.events, 'client-closed');
    // ~40 MB of requests: far more than the kernel's socket buffers in both directions.
    let written = 0;
    const pump = (): void => {
      while (written < 40_000 && !c.isClosed) {
        written++;
        if (!c.socket.write(one)) {
          c.socket.once('drain', pump);
          return;
        }
      }
    };
    pump();
    expect((await paused).reason).toBe('output');
    // Sample the server's buffers while the client is paused: never over the limit plus one reply.
    const reply = one.length + 16;
    let maxOut = 0;
    let maxIn = 0;
    for (let i = 0; i < 20 && server.stats().clients.length > 0; i++) {
      const row = server.stats().clients[0]!;
      maxOut = Math.max(maxOut, row.outputBufferBytes);
      maxIn = Math.max(maxIn, row.queryBufferBytes);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(maxOut).toBeLessThanOrEqual(maxOutputBytes + reply);
    expect(maxIn).toBeLessThanOrEqual(2 * 64 * 1024 + reply);
    expect((await closed).reason).toBe('output-limit');
    expect(server.stats().outputLimitClosed).toBe(1);
    expect(
      logs.some(
        (l) =>
          l.level === 'warn' &&
          l.msg.includes('client-output-buffer-limit') &&
          l.msg.includes('did not drain for 500 ms'),
      ),
    ).toBe(true);
  });

  it('a reply that would put a non-reader over maxOutputHardBytes disconnects it at once', async () => {
    const { server, port, logs } = await oneNode({
      maxOutputBytes: 16 * 1024,
      maxOutputHardBytes: 64 * 1024,
      outputStallTimeoutMs: 0,
      maxBulkBytes: 256 * 1024,
    });
    const c = await client(port);
    c.socket.pause();
    const big = encodeCommand('ECHO', 'z'.repeat(100 * 1024));
    const closed = nextEvent<{ reason: string }>(server.events, 'client-closed');
    let written = 0;
    const pump = (): void => {
      while (written < 400 && !c.isClosed) {
        written++;
        if (!c.socket.write(big)) {
          c.socket.once('drain', pump);
          return;
        }
      }
    };
    pump();
    expect((await closed).reason).toBe('output-limit');
    expect(logs.some((l) => l.msg.includes('over the hard limit of 65536 (maxOutputHardBytes)'))).toBe(true);
    // Others are unaffected.
    const d = await client(port);
    expect(await d.call('PING')).toBe('PONG');
  });

  it('rejects a hard output limit below the pause threshold, naming both', async () => {
    await expect(
      startRespServer({
        backend: new FakeCluster().backend(1),
        limits: { maxOutputBytes: 64 * 1024, maxOutputHardBytes: 1024 },
      }),
    ).rejects.toThrow('limits.maxOutputHardBytes = 1024; allowed: an integer in [maxOutputBytes (65536)');
  });
});
