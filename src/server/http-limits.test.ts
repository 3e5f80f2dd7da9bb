/**
 * Issue 15 item 6 on HTTP, with real sockets against the real HTTP server of an in-process node:
 * slow headers and short bodies are cut after their timeouts with a 408 in the documented shape,
 * connection N+1 (in total or from one address) gets 503 too_many_connections, and a malformed
 * request in a pipeline does not drop the valid responses before it.
 */

import { connect, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { startHttpAdmin } from './http-admin.js';
import { type HttpLimits, httpConnectionStats, resolveHttpLimits } from './http-limits.js';
import { memorySingleNode } from './test-node.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

async function node(limits: Partial<HttpLimits>): Promise<{ port: number; app: FastifyInstance }> {
  const { node: n, state } = memorySingleNode();
  const app = await startHttpAdmin({ node: n, kv: state.kv, host: '127.0.0.1', port: 0, limits });
  n.start();
  await n.waitForLeader();
  cleanups.push(async () => {
    await n.stop('test over');
    await app.close();
  });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return { port: addr.port, app };
}

/** A raw client that records everything received and when the server closed. */
interface Raw {
  socket: Socket;
  text(): string;
  closed: Promise<number>;
}

function raw(port: number, localAddress?: string): Promise<Raw> {
  return new Promise((resolve, reject) => {
    let received = '';
    const socket = connect({ port, host: '127.0.0.1', localAddress }, () =>
      resolve({ socket, text, closed }),
    );
    const text = () => received;
    const closed = new Promise<number>((r) => socket.on('close', () => r(Date.now())));
    socket.on('data', (d) => {
      received += d.toString('latin1');
    });
    socket.on('error', () => {});
    socket.once('error', reject);
    cleanups.push(() => socket.destroy());
  });
}

function bodyOf(response: string): { error: string; message: string } {
  return JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4)) as { error: string; message: string };
}

describe('HTTP against slow and greedy clients', () => {
  it('cuts slowloris headers after headersTimeoutMs with 408 request_timeout', async () => {
    const { port, app } = await node({ headersTimeoutMs: 300, requestTimeoutMs: 600 });
    const c = await raw(port);
    const started = Date.now();
    c.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
    // A header byte every 50 ms: data keeps flowing, the headers never end.
    const drip = setInterval(() => c.socket.writable && c.socket.write('X'), 50);
    cleanups.push(() => clearInterval(drip));
    const closedAt = await c.closed;
    expect(closedAt - started).toBeGreaterThanOrEqual(300);
    expect(c.text()).toMatch(/^HTTP\/1\.1 408 /);
    expect(bodyOf(c.text()).error).toBe('request_timeout');
    expect(httpConnectionStats(app.server)?.timedOut).toBe(1);
  });

  it('cuts a body shorter than its Content-Length after requestTimeoutMs', async () => {
    const { port } = await node({ headersTimeoutMs: 200, requestTimeoutMs: 400 });
    const c = await raw(port);
    const started = Date.now();
    c.socket.write(
      'PUT /v1/kv/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"value":',
    );
    const closedAt = await c.closed;
    expect(closedAt - started).toBeGreaterThanOrEqual(400);
    expect(c.text()).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('cuts an unfinished chunked body after requestTimeoutMs', async () => {
    const { port } = await node({ headersTimeoutMs: 200, requestTimeoutMs: 400 });
    const c = await raw(port);
    c.socket.write(
      'PUT /v1/kv/a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"v\r\n',
    );
    await c.closed;
    expect(c.text()).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('connection N+1 gets 503 too_many_connections and is closed; the others keep working', async () => {
    const { port, app } = await node({ maxConnections: 3 });
    const held = [await raw(port), await raw(port), await raw(port)];
    // Wait until the server has counted all three (accept order is the kernel's).
    while ((httpConnectionStats(app.server)?.open ?? 0) < 3) await new Promise((r) => setTimeout(r, 5));
    const extra = await raw(port);
    await extra.closed;
    expect(extra.text()).toMatch(/^HTTP\/1\.1 503 /);
    const b = bodyOf(extra.text());
    expect(b.error).toBe('too_many_connections');
    expect(b.message).toContain('maxConnections');
    held[0]!.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    while (!held[0]!.text().includes('"ok":true')) await new Promise((r) => setTimeout(r, 5));
    expect(httpConnectionStats(app.server)?.refused).toBe(1);
  });

  it('limits connections per client address; another address still connects', async () => {
    const { port, app } = await node({ maxConnectionsPerAddress: 2 });
    await raw(port);
    await raw(port);
    while ((httpConnectionStats(app.server)?.open ?? 0) < 2) await new Promise((r) => setTimeout(r, 5));
    const extra = await raw(port);
    await extra.closed;
    expect(bodyOf(extra.text()).message).toContain('maxConnectionsPerAddress');
    const other = await raw(port, '127.0.0.2');
    other.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await other.closed;
    expect(other.text()).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('a malformed request in a pipeline does not drop the valid responses before it', async () => {
    const { port } = await node({});
    const c = await raw(port);
    c.socket.write(
      'PUT /v1/kv/p1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"value":"1"}' +
        'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n' +
        'GARBAGE\x01 / HTTP/1.1\r\n\r\n',
    );
    await c.closed;
    const statuses = [...c.text().matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
    expect(statuses).toEqual(['200', '200', '400']);
    const last = c.text().slice(c.text().lastIndexOf('HTTP/1.1 400'));
    expect(bodyOf(last).error).toBe('malformed_request');
  });

  it('an idle keep-alive connection is closed after keepAliveTimeoutMs', async () => {
    const { port } = await node({ keepAliveTimeoutMs: 200 });
    const c = await raw(port);
    c.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    const closedAt = await c.closed;
    expect(c.text()).toMatch(/^HTTP\/1\.1 200 /);
    expect(closedAt).toBeGreaterThan(0);
  });

  it('refuses bad limits naming the field and its range', () => {
    expect(() => resolveHttpLimits({ headersTimeoutMs: 5000, requestTimeoutMs: 1000 })).toThrow(
      'invalid HTTP server limit: requestTimeoutMs = 1000; allowed: an integer in [headersTimeoutMs (5000)',
    );
    expect(() => resolveHttpLimits({ maxConnections: 0 })).toThrow('maxConnections = 0');
  });
});

describe('HTTP against a client that pipelines and never reads', () => {
  it('stops reading it: the server-side write buffer stays bounded, then the idle timeout cuts it', async () => {
    const { port, app } = await node({ idleTimeoutMs: 1500 });
    let serverSide: Socket | undefined;
    app.server.prependListener('connection', (s: Socket) => {
      serverSide = s;
    });
    const c = await raw(port);
    c.socket.pause(); // never read
    const one = Buffer.from('GET /v1/cluster HTTP/1.1\r\nHost: x\r\n\r\n');
    let written = 0;
    let stopped = false;
    const pump = (): void => {
      while (!stopped && written < 200_000) {
        written++;
        if (!c.socket.write(one)) {
          c.socket.once('drain', pump);
          return;
        }
      }
    };
    pump();
    // Wait until the client's own writes back up: the server stopped reading.
    await new Promise<void>((resolve) => {
      const check = () => (c.socket.writableLength > 0 && written > 1000 ? resolve() : setTimeout(check, 20));
      check();
    });
    let maxBuffered = 0;
    for (let i = 0; i < 20; i++) {
      maxBuffered = Math.max(maxBuffered, serverSide?.writableLength ?? 0);
      await new Promise((r) => setTimeout(r, 20));
    }
    // Node's HTTP server pauses a socket whose responses wait (one response past its high-water mark).
    expect(maxBuffered).toBeLessThan(1024 * 1024);
    stopped = true;
    await c.closed; // cut by the idle timeout: nothing moves either way
  });
});
