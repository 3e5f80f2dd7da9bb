import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket, TlsOptions } from 'node:tls';
import { showsUnverifiedCertificate } from '../tls/reloadable.js';

/**
 * Timeouts and connection limits of the HTTP listener (issue 15 item 6). A slow client (headers or
 * body sent byte by byte: slowloris, a body shorter than its Content-Length, an unfinished chunked
 * body) is cut after `requestTimeoutMs` at the latest; an idle keep-alive connection after
 * `keepAliveTimeoutMs`; a connection on which nothing moves in either direction after
 * `idleTimeoutMs`. Connections over `maxConnections`, or over `maxConnectionsPerAddress` from one
 * IP address, get `503 too_many_connections` and are closed.
 */
export interface HttpLimits {
  /** The request line and all headers must arrive within this many ms of the request's start (408). Default 10,000. */
  headersTimeoutMs: number;
  /** The whole request, body included, must arrive within this many ms (408). Default 30,000; >= headersTimeoutMs. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection (between requests) is closed after this many ms. Default 65,000 (above load balancers' usual 60 s). */
  keepAliveTimeoutMs: number;
  /** A connection with no bytes moving either way for this many ms is closed (a client that stops reading its response). Default 120,000; 0 = never. */
  idleTimeoutMs: number;
  /** Open connections at most, in total. Default 10,000. */
  maxConnections: number;
  /** Open connections at most from one client IP address. Default 1,000. */
  maxConnectionsPerAddress: number;
  /** Request bodies larger than this are refused (413 body_too_large). Default 128 KiB. */
  bodyLimitBytes: number;
}

export const DEFAULT_HTTP_LIMITS: Readonly<HttpLimits> = Object.freeze({
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 65_000,
  idleTimeoutMs: 120_000,
  maxConnections: 10_000,
  maxConnectionsPerAddress: 1000,
  bodyLimitBytes: 128 * 1024,
});

/** An HTTP limit outside its allowed range. */
export class HttpLimitError extends Error {
  constructor(
    readonly field: string,
    readonly allowed: string,
    readonly value: unknown,
  ) {
    super(`invalid HTTP server limit: ${field} = ${String(value)}; allowed: ${allowed}`);
    this.name = 'HttpLimitError';
  }
}

/** Fill in defaults and check every limit; throws `HttpLimitError` naming the field and its range. */
export function resolveHttpLimits(partial: Partial<HttpLimits> = {}): HttpLimits {
  const l: HttpLimits = { ...DEFAULT_HTTP_LIMITS };
  for (const [k, v] of Object.entries(partial)) {
    if (v === undefined) continue;
    if (!(k in DEFAULT_HTTP_LIMITS)) throw new HttpLimitError(k, 'a known HTTP limit name', v);
    (l as unknown as Record<string, unknown>)[k] = v;
  }
  const check = (field: keyof HttpLimits, min: number, max: number, minText = String(min)): void => {
    const v = l[field];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
      throw new HttpLimitError(field, `an integer in [${minText}, ${max}]`, v);
  };
  const maxMs = 2 ** 31 - 1;
  check('headersTimeoutMs', 1, maxMs);
  check('requestTimeoutMs', l.headersTimeoutMs, maxMs, `headersTimeoutMs (${l.headersTimeoutMs})`);
  check('keepAliveTimeoutMs', 1, maxMs);
  check('idleTimeoutMs', 0, maxMs);
  check('maxConnections', 1, 1_000_000);
  check('maxConnectionsPerAddress', 1, 1_000_000);
  check('bodyLimitBytes', 1, 1024 * 1024 * 1024);
  return l;
}

/** What the connection gate has seen (for tests, metrics and the fuzzer). */
export interface HttpConnectionStats {
  open: number;
  refused: number;
  /** Open connections of the busiest client address. */
  maxPerAddress: number;
  /** Requests answered 408 or cut because their headers or body did not arrive in time. */
  timedOut: number;
}

interface Gate {
  stats: HttpConnectionStats;
  perAddress: Map<string, number>;
}

const gates = new WeakMap<Server, Gate>();

/** Connection counters of a server made by `limitedServerFactory` (undefined for any other). */
export function httpConnectionStats(server: unknown): HttpConnectionStats | undefined {
  const g = gates.get(server as Server);
  if (!g) return undefined;
  let maxPerAddress = 0;
  for (const n of g.perAddress.values()) maxPerAddress = Math.max(maxPerAddress, n);
  return { ...g.stats, maxPerAddress };
}

/** Minimal logger (pino-compatible). */
export interface LimitLogger {
  warn(obj: object, msg: string): void;
}

/** Responses still owed on each socket: a malformed request waits for them before its 400 is written. */
const inflight = new WeakMap<Socket, { n: number; idle: (() => void)[] }>();

function jsonResponse(status: number, reason: string, error: string, message: string, extra = ''): string {
  const body = JSON.stringify({ error, message });
  return (
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n${extra}\r\n${body}`
  );
}

/** Refused sockets are ended with their 503 and destroyed after this grace if the client does not close. */
const REFUSE_GRACE_MS = 2000;

/**
 * A Fastify `serverFactory`: a Node HTTP server with the timeouts set, and a gate in front of its
 * connection handling that refuses connections over the limits with a clear 503.
 */
export function limitedServerFactory(
  limits: HttpLimits,
  logger?: LimitLogger,
  tls?: TlsOptions,
): (handler: (req: IncomingMessage, res: ServerResponse) => void) => Server {
  return (handler) => {
    const options = {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // How often Node checks the two timeouts above: a slow client is cut within this much after them.
      connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4))),
    };
    // HTTPS (docs/tls.md): the TLS handshake must finish within the header timeout too.
    const make = (h: (req: IncomingMessage, res: ServerResponse) => void): Server =>
      tls
        ? (createHttpsServer(
            { ...options, ...tls, handshakeTimeout: limits.headersTimeoutMs },
            h,
          ) as unknown as Server)
        : createServer(options, h);
    const server = make((req, res) => {
      const sock = req.socket;
      let f = inflight.get(sock);
      if (!f) {
        f = { n: 0, idle: [] };
        inflight.set(sock, f);
      }
      const entry = f;
      entry.n++;
      let done = false;
      const finished = () => {
        if (done) return;
        done = true;
        entry.n--;
        if (entry.n === 0) for (const cb of entry.idle.splice(0)) cb();
      };
      res.once('finish', finished);
      res.once('close', finished);
      handler(req, res);
    });
    server.setTimeout(limits.idleTimeoutMs);
    // Client certificates optional (`request`): one that does not verify is still refused.
    if (tls?.requestCert && !tls.rejectUnauthorized) {
      server.prependListener('secureConnection' as 'connection', (socket: Socket) => {
        if (showsUnverifiedCertificate(socket as TLSSocket)) socket.destroy();
      });
    }
    const gate: Gate = {
      stats: { open: 0, refused: 0, maxPerAddress: 0, timedOut: 0 },
      perAddress: new Map(),
    };
    gates.set(server, gate);
    let refusing = 0;
    // At most one warning per second: a connection flood must not become a log flood.
    let lastWarn = 0;
    let unlogged = 0;

    // Node's own connection handler runs only for connections under the limits.
    const nodeListeners = server.listeners('connection') as ((s: Socket) => void)[];
    server.removeAllListeners('connection');
    server.on('connection', (socket: Socket) => {
      const ip = socket.remoteAddress ?? '?';
      const fromIp = gate.perAddress.get(ip) ?? 0;
      const total = gate.stats.open >= limits.maxConnections;
      if (total || fromIp >= limits.maxConnectionsPerAddress) {
        gate.stats.refused++;
        const what = total
          ? `the node has ${limits.maxConnections} HTTP connections open (maxConnections)`
          : `${ip} has ${limits.maxConnectionsPerAddress} HTTP connections open (maxConnectionsPerAddress)`;
        const now = Date.now();
        if (now - lastWarn >= 1000) {
          const more = unlogged > 0 ? ` (and ${unlogged} more refused since the last warning)` : '';
          logger?.warn({ addr: ip }, `HTTP connection from ${ip} refused: ${what}${more}`);
          lastWarn = now;
          unlogged = 0;
        } else unlogged++;
        socket.on('error', () => {});
        // Over TLS nothing readable can be written before the handshake: the refusal is a close.
        if (refusing >= 1024 || tls) {
          socket.destroy(); // a flood of refusals must not hold sockets for the grace period
          return;
        }
        refusing++;
        socket.once('close', () => refusing--);
        socket.on('data', () => {}); // discard what it sent: it sees our 503 and FIN, not a reset
        socket.end(
          jsonResponse(
            503,
            'Service Unavailable',
            'too_many_connections',
            `connection refused: ${what}; close idle connections or retry later`,
            'Retry-After: 1\r\n',
          ),
        );
        setTimeout(() => socket.destroy(), REFUSE_GRACE_MS).unref();
        return;
      }
      gate.stats.open++;
      gate.perAddress.set(ip, fromIp + 1);
      socket.once('close', () => {
        gate.stats.open--;
        const n = (gate.perAddress.get(ip) ?? 1) - 1;
        if (n <= 0) gate.perAddress.delete(ip);
        else gate.perAddress.set(ip, n);
      });
      for (const l of nodeListeners) l.call(server, socket);
    });
    return server;
  };
}

/**
 * Fastify's `clientErrorHandler`: malformed requests, header overflow and timeouts get the
 * documented `{error, message}` shape; responses still owed for earlier requests of a pipeline
 * are sent first (a malformed request must not drop the valid ones before it).
 */
export function httpClientErrorHandler(limits: HttpLimits) {
  return function onClientError(this: { server: Server }, err: NodeJS.ErrnoException, socket: Socket): void {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    let text: string;
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      const g = gates.get(this.server);
      if (g) g.stats.timedOut++;
      text = jsonResponse(
        408,
        'Request Timeout',
        'request_timeout',
        `request not received in time: headers within ${limits.headersTimeoutMs} ms, the whole request within ${limits.requestTimeoutMs} ms`,
      );
    } else if (err.code === 'HPE_HEADER_OVERFLOW') {
      text = jsonResponse(
        431,
        'Request Header Fields Too Large',
        'headers_too_large',
        'request headers exceed the 16 KiB limit',
      );
    } else {
      text = jsonResponse(400, 'Bad Request', 'malformed_request', `malformed HTTP request: ${err.message}`);
    }
    const send = () => {
      if (socket.destroyed) return;
      if (socket.writable) socket.end(text);
      setTimeout(() => socket.destroy(), REFUSE_GRACE_MS).unref();
    };
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      // The late request is itself in flight (its handler waits for the body): answer now, unless
      // a response has already started on this socket, in which case only closing is safe.
      const current = (socket as unknown as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
      if (current?.headersSent) socket.destroy();
      else send();
      return;
    }
    const f = inflight.get(socket);
    if (f && f.n > 0) f.idle.push(send);
    else send();
  };
}
