/**
 * A hostile-client fuzzer for a real Floe node (issue 15 item 8): it starts one `floe serve` process
 * (dist/, so build first), makes an admin user (auth on), then sends seeded, bounded streams of
 * mistakes and attacks to the HTTP and RESP ports while slow clients hold connections open.
 *
 * It asserts:
 * - no 5xx, no 2xx for a mistake, every 4xx body in the `{error, message}` shape;
 * - the node never exits and answers /healthz at the end;
 * - nothing is committed by statically invalid requests (the commit index before and after the
 *   static phases is the same); state-dependent mistakes (a lease that does not exist, a missing
 *   sequence) run one at a time afterwards and the entries each commits are reported;
 * - memory stays bounded (the node's peak RSS, from /proc, under a stated bound);
 * - slow clients are cut with 408 (and, with strictTiming, within the timeouts plus slack).
 *
 *   npm run fuzz                          # 5,000 HTTP requests + 1,000 RESP cases, seed 1
 *   npm run fuzz -- --requests 20000 --resp 5000 --seed 7 --concurrency 16
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePorts } from '../test/cluster/harness.js';

const repoRoot = resolve(import.meta.dirname, '..');
const floeBin = join(repoRoot, 'dist/cli/main.js');

export interface FuzzOptions {
  /** HTTP mistakes and attacks to send. Default 5,000. */
  requests?: number;
  /** RESP cases to send. Default 1,000. */
  respCases?: number;
  /** PRNG seed; the same seed generates the same cases. Default 1. */
  seed?: number;
  /** Connections in flight at once. Default 8. */
  concurrency?: number;
  /** Slow clients of each kind (slow headers, short body, unfinished chunked body, idle). Default 3. */
  slowClients?: number;
  /** Fail when a slow client is cut later than its timeout + 3 s (a wall-clock bound). Default true. */
  strictTiming?: boolean;
  /** Peak RSS may exceed the RSS after start-up by at most this many MiB. Default 150. */
  maxRssGrowthMiB?: number;
  /**
   * Diagnose: one request at a time, reading the commit index after each, to name every request that
   * committed an entry. Slow (two extra requests per case).
   */
  traceCommits?: boolean;
  /** Progress lines on stderr. */
  log?: (line: string) => void;
}

export interface FuzzReport {
  seed: number;
  httpRequests: number;
  respCases: number;
  statusCounts: Record<string, number>;
  /** Each problem found, described; empty when the node passed. */
  failures: string[];
  commitBefore: number;
  commitAfter: number;
  /** State-dependent mistakes run one by one: status and entries each committed. */
  stateMistakes: { desc: string; status: number; committed: number }[];
  rssStartMiB: number;
  rssPeakMiB: number;
  slowClients: { kind: string; status: string; cutAfterMs: number; limitMs: number }[];
  respReplies: number;
  respErrors: number;
  durationMs: number;
}

// Timeouts the fuzzed node runs with (short, so slow clients are cut quickly).
const HEADER_TIMEOUT_MS = 1000;
const REQUEST_TIMEOUT_MS = 2000;
const KEEP_ALIVE_MS = 1000;
const RESP_REQUEST_TIMEOUT_MS = 2000;
const ADMIN = { user: 'fuzz-admin', password: 'fuzz-admin-password-0123' };
const READER = { user: 'fuzz-reader', password: 'fuzz-reader-password-0123' };

// ---- seeded randomness -------------------------------------------------------------------------

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Rng {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = mulberry32(seed);
  }
  float(): number {
    return this.next();
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
}

// ---- a raw HTTP/1.1 exchange -------------------------------------------------------------------

interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parse every complete response in `buf` (Content-Length or chunked bodies). */
export function parseResponses(buf: Buffer): HttpResponse[] {
  const out: HttpResponse[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const end = buf.indexOf('\r\n\r\n', pos);
    if (end === -1) break;
    const head = buf.toString('latin1', pos, end).split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '');
    if (!m) break;
    const headers: Record<string, string> = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    let p = end + 4;
    let body = '';
    if (headers['transfer-encoding']?.includes('chunked')) {
      const parts: Buffer[] = [];
      for (;;) {
        const le = buf.indexOf('\r\n', p);
        if (le === -1) return out;
        const n = Number.parseInt(buf.toString('latin1', p, le), 16);
        if (Number.isNaN(n)) return out;
        p = le + 2;
        if (n === 0) {
          p += 2;
          break;
        }
        parts.push(buf.subarray(p, p + n));
        p += n + 2;
      }
      body = Buffer.concat(parts).toString('utf8');
    } else {
      const n = Number(headers['content-length'] ?? 0);
      if (p + n > buf.length) break;
      body = buf.toString('utf8', p, p + n);
      p += n;
    }
    out.push({ status: Number(m[1]), headers, body });
    pos = p;
  }
  return out;
}

/** Send bytes on a fresh connection, half-close, read until the server closes (or `limitMs`). */
export function exchange(
  port: number,
  bytes: Buffer,
  opts: { localAddress?: string; limitMs?: number; halfClose?: boolean } = {},
): Promise<{ data: Buffer; hung: boolean; error?: string }> {
  return new Promise((resolvePromise) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const socket = connect({ port, host: '127.0.0.1', localAddress: opts.localAddress });
    const finish = (hung: boolean, error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolvePromise({ data: Buffer.concat(chunks), hung, error });
    };
    const timer = setTimeout(() => finish(true), opts.limitMs ?? 20_000);
    socket.on('connect', () => {
      socket.write(bytes);
      // HTTP: no half-close (Node's server aborts requests in flight on a client FIN); requests carry
      // `Connection: close` instead. RESP: half-close, the server then answers the pipeline and closes.
      if (opts.halfClose) socket.end();
    });
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', (e: NodeJS.ErrnoException) => finish(false, e.code ?? e.message));
    socket.on('close', () => finish(false));
  });
}

function httpRequest(
  method: string,
  path: string,
  opts: { body?: string | Buffer; contentType?: string | null; auth?: string; extraHeaders?: string } = {},
): Buffer {
  const body = opts.body === undefined ? undefined : Buffer.from(opts.body);
  let head = `${method} ${path} HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n`;
  if (opts.auth !== undefined) head += `Authorization: ${opts.auth}\r\n`;
  if (body !== undefined) {
    if (opts.contentType !== null) head += `Content-Type: ${opts.contentType ?? 'application/json'}\r\n`;
    head += `Content-Length: ${body.length}\r\n`;
  }
  head += opts.extraHeaders ?? '';
  head += '\r\n';
  return body ? Buffer.concat([Buffer.from(head, 'latin1'), body]) : Buffer.from(head, 'latin1');
}

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

// ---- the cases ---------------------------------------------------------------------------------

/** One case: bytes to send and what must come back. */
interface Case {
  desc: string;
  bytes: Buffer;
  /** Expected statuses, in order, for pipelines; otherwise every response must be 4xx. */
  statuses?: number[];
  /** Send from this local address (auth attacks use 127.0.0.3 so their back-off spares the admin). */
  localAddress?: string;
}

const NOT_STRING: unknown[] = [1, -1, 1.5, true, false, null, [], {}, ['a'], { a: 1 }];
const NOT_INT: unknown[] = ['abc', 1.5, true, [], {}, '1e3', '0x10', 1e300, 2 ** 63, '', ' 1', [1], { n: 1 }];
const NOT_POSITIVE_INT: unknown[] = [...NOT_INT, 0, -1, -5];

function deep(n: number, leaf: unknown = 1): string {
  return `${'['.repeat(n)}${JSON.stringify(leaf)}${']'.repeat(n)}`;
}

interface BodyRoute {
  method: string;
  path: (r: Rng) => string;
  /** Valid values per field (the fields not made invalid). */
  valid: Record<string, (r: Rng) => unknown>;
  /** Values that make the request a mistake whatever the other fields are. */
  invalid: Record<string, unknown[]>;
}

const key = (r: Rng) => `fz${r.int(50)}`;
const app = (r: Rng) => `fuzzapp${r.int(5)}`;

const BODY_ROUTES: BodyRoute[] = [
  {
    method: 'PUT',
    path: (r) => `/v1/kv/${key(r)}`,
    valid: {},
    invalid: { value: NOT_STRING },
  },
  {
    method: 'POST',
    path: (r) => `/v1/kv/${key(r)}/cas`,
    valid: { expect: () => null, value: () => 'v' },
    invalid: { value: NOT_STRING, expect: [1, true, [], {}, ['x']] },
  },
  {
    method: 'POST',
    path: (r) => `/v1/counters/${key(r)}/incr`,
    valid: {},
    invalid: {
      by: [
        'abc',
        1.5,
        true,
        [],
        {},
        '1e3',
        2 ** 63,
        '-99999999999999999999',
        '9999999999999999999',
        '-9223372036854775809',
        '0x10',
        ' 1',
      ],
    },
  },
  {
    method: 'POST',
    path: () => '/v1/members',
    valid: { id: () => 2, peerAddr: () => '127.0.0.1:1', httpAddr: () => '127.0.0.1:2' },
    invalid: {
      id: NOT_POSITIVE_INT,
      peerAddr: [...NOT_STRING, '', 'nohost', 'a b:1', ':1', 'h:999999', 'h:-1'],
    },
  },
  {
    method: 'POST',
    path: () => '/v1/leader/transfer',
    valid: {},
    invalid: { to: NOT_POSITIVE_INT },
  },
  {
    method: 'POST',
    path: (r) => `/v1/apps/${app(r)}/workers/acquire`,
    valid: { nodeId: (r) => `n${r.int(9)}`, ttlMs: () => 5000, requestId: () => 'rq' },
    invalid: {
      nodeId: NOT_STRING,
      ttlMs: [-1, 0, 1.5, 'abc', 1e15, [], {}, true],
      boundMs: [-1, 1.5, 'abc', [], {}, true],
      incarnation: [1, [], {}, true, '', 'x'.repeat(500)],
    },
  },
  {
    method: 'POST',
    path: (r) => `/v1/apps/${app(r)}/workers/${r.int(4)}/renew`,
    valid: {},
    invalid: { token: ['abc', 1.5, -1, [], {}, true, null, '1e3'] },
  },
  {
    method: 'POST',
    path: (r) => `/v1/apps/${app(r)}/workers/${r.int(4)}/release`,
    valid: {},
    invalid: { token: ['abc', 1.5, -1, [], {}, true, null, '1e3'] },
  },
  {
    method: 'PUT',
    path: (r) => `/v1/apps/${app(r)}/pool`,
    valid: { datacenterBits: () => 0 },
    invalid: { bits: [-1, 1.5, 'abc', 99, 64, [], {}, true, null] },
  },
  {
    method: 'POST',
    path: () => '/v1/users',
    valid: { user: (r) => `u${r.int(1000)}`, password: () => 'a-long-enough-password', grants: () => ({}) },
    invalid: {
      user: [...NOT_STRING, ''],
      password: NOT_STRING,
      grants: [[], 'read', 7, { a: 'read' }, { a: ['bogus'] }, { a: [['read']] }, { a: null }],
    },
  },
  {
    method: 'PUT',
    path: () => `/v1/users/${READER.user}/password`,
    valid: {},
    invalid: { password: NOT_STRING },
  },
  {
    method: 'POST',
    path: () => `/v1/users/${READER.user}/grants`,
    valid: { app: () => 'x', permissions: () => ['read'] },
    invalid: {
      app: NOT_STRING,
      permissions: [7, 'read', null, {}, ['bogus'], [['read']], [1], JSON.parse(deep(50, 'read'))],
    },
  },
  {
    method: 'POST',
    path: () => `/v1/users/${READER.user}/revoke`,
    valid: { app: () => 'x' },
    invalid: { app: NOT_STRING, permissions: [7, 'read', null, {}, ['bogus'], [['read']], [1]] },
  },
  {
    method: 'POST',
    path: () => '/v1/sequences',
    valid: { key: (r) => `seq${r.int(20)}`, step: () => 100 },
    invalid: {
      key: [...NOT_STRING, ''],
      step: ['abc', 1.5, -1, 0, [], {}, true, null, 2 ** 63],
      minStep: ['abc', 1.5, -1, 0, [], {}, true],
      mode: ['bogus', 1, [], {}, true, ''],
      start: [[], {}, true, 'abc', '1e3', 1.5],
    },
  },
  {
    method: 'POST',
    path: (r) => `/v1/sequences/seq${r.int(20)}/incr`,
    valid: {},
    invalid: { count: [0, -1, 1.5, 'abc', 1e12, [], {}, true, '1e3'] },
  },
  {
    method: 'POST',
    path: (r) => `/v1/sequences/seq${r.int(20)}/alloc`,
    valid: {},
    invalid: { count: [0, -1, 1.5, 'abc', 1e12, [], {}, true, '1e3'] },
  },
  {
    method: 'POST',
    path: () => '/v1/snowflakes',
    valid: { key: (r) => `sf${r.int(20)}` },
    invalid: {
      key: [...NOT_STRING, ''],
      layout: ['bogus', 1, [], {}, true],
      ttlMs: ['abc', 1.5, -1, [], {}, true],
    },
  },
  {
    method: 'POST',
    path: (r) => `/v1/snowflakes/sf${r.int(20)}/next`,
    valid: {},
    invalid: { count: [0, -1, 1.5, 'abc', 1e12, [], {}, true] },
  },
  {
    method: 'POST',
    path: () => '/v1/internal/sequences/alloc',
    valid: { key: () => 'seq1', count: () => 1, proof: () => 'not-a-proof' },
    invalid: { proof: ['0'.repeat(64), 1, [], null] },
  },
  {
    method: 'POST',
    path: () => '/v1/members/1/addresses',
    valid: { httpAddr: () => '127.0.0.1:1', respAddr: () => '127.0.0.1:2', proof: () => 'x' },
    invalid: { proof: ['0'.repeat(64), 1, [], null, ''] },
  },
];

/** GETs and DELETEs with invalid path parameters or query strings. */
const BAD_PATHS: ((r: Rng) => [string, string])[] = [
  (r) => ['GET', `/v1/ids/${r.pick(['abc', '-1', '1.5', '0xZZ', '99999999999999999999999', '%20', '1e3'])}`],
  (r) => ['GET', `/v1/ids/1?layout=${r.pick(['bogus', '', '%00'])}`],
  (r) => ['GET', `/v1/apps/a/workers/${r.pick(['abc', '-1', '1.5', '4.242e3', '0x10', '+1', '%201'])}`],
  (r) => [
    'DELETE',
    `/v1/members/${r.pick(['abc', '-1', '1.5', '4.242e3', '0x1092', '+4242', '%204242', '0'])}`,
  ],
  (r) => ['GET', `/api/segment/get/seq1?count=${r.pick(['0', '-1', 'abc', '1e3', '99999999999'])}`],
  (r) => ['GET', `/api/snowflake/get/sf1?count=${r.pick(['0', '-1', 'abc', '1e3', '99999999999'])}`],
  (r) => ['GET', `/v1/kv/${r.pick(['', '%zz', '%', 'a%2'])}`],
  (r) => ['GET', `/v1/counters/${r.pick(['', '%zz'])}`],
  (r) => ['GET', `/v1/${'x'.repeat(5000 + r.int(5000))}`],
  (r) => ['GET', `/v1/kv/${'k'.repeat(4097 + r.int(2000))}`],
  (r) => [
    r.pick(['PATCH', 'DELETE', 'PUT']),
    r.pick(['/healthz', '/v1/cluster', '/v1/kv/a/cas', '/v1/users']),
  ],
  (r) => [r.pick(['GET', 'POST']), `/${r.pick(['nope', 'v2/kv/a', 'v1/kvv/a', '..%2f..%2fetc%2fpasswd'])}`],
];

/** Raw protocol mistakes (each must get a 4xx). */
const RAW: ((r: Rng) => string)[] = [
  () => 'GARBAGE\r\n\r\n',
  () => 'GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n',
  () => 'GET /healthz\x00 HTTP/1.1\r\n\r\n',
  () => 'GET /healthz HTTP/1.1\r\nBad Header Without Colon\r\n\r\n',
  () => 'GET /healthz HTTP/1.1\r\nHost: x\r\nX: \x01\x02\r\n\r\n',
  (r) => `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17_000 + r.int(10_000))}\r\n\r\n`,
  () => 'POST /v1/kv/a HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n',
  () => 'POST /v1/kv/a HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
  () =>
    'POST /v1/kv/a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  () => 'POST /v1/kv/a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
  () => 'POST /v1/kv/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n',
];

function bodyCase(r: Rng, auth: string): Case {
  const route = r.pick(BODY_ROUTES);
  const path = route.path(r);
  const kind = r.int(10);
  const json = (v: unknown) => JSON.stringify(v);
  if (kind === 0) {
    const b = r.pick(['[{"by":1}]', 'null', '7', '"str"', 'true', '[]']);
    return {
      desc: `${route.method} ${path} non-object body ${b}`,
      bytes: httpRequest(route.method, path, { body: b, auth }),
    };
  }
  if (kind === 1) {
    const b = r.pick(['{', '{"a":}', '{a:1}', "{'a':1}", '{"a":1,}', '\u0000', '{"a":"\\x"}', 'NaN']);
    return {
      desc: `${route.method} ${path} invalid JSON`,
      bytes: httpRequest(route.method, path, { body: b, auth }),
    };
  }
  if (kind === 2) {
    const n = r.pick([65, 200, 1000, 1500, 5000, 20_000]);
    const field = r.pick(Object.keys(route.invalid));
    const b = `{"${field}":${deep(n)}}`;
    return {
      desc: `${route.method} ${path} ${field} nested ${n} deep`,
      bytes: httpRequest(route.method, path, { body: b, auth }),
    };
  }
  if (kind === 3) {
    const b = json({ value: 'x'.repeat(130 * 1024 + r.int(400_000)) });
    return {
      desc: `${route.method} ${path} oversized body`,
      bytes: httpRequest(route.method, path, { body: b, auth }),
    };
  }
  if (kind === 4) {
    const ct = r.pick([
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data',
      'application/xml',
      null,
    ]);
    return {
      desc: `${route.method} ${path} content-type ${ct}`,
      bytes: httpRequest(route.method, path, { body: 'a=1', contentType: ct, auth }),
    };
  }
  // A JSON object with at least one field that makes it a mistake.
  const body: Record<string, unknown> = {};
  for (const [f, gen] of Object.entries(route.valid)) if (r.chance(0.8)) body[f] = gen(r);
  const invalidFields = Object.keys(route.invalid);
  const bad = r.pick(invalidFields);
  body[bad] = r.pick(route.invalid[bad]!);
  for (const f of invalidFields) if (f !== bad && r.chance(0.2)) body[f] = r.pick(route.invalid[f]!);
  if (r.chance(0.1)) body[`extra${r.int(3)}`] = r.pick([1, 'x', [], {}]);
  return {
    desc: `${route.method} ${path} ${json(body).slice(0, 160)}`,
    bytes: httpRequest(route.method, path, { body: json(body), auth }),
  };
}

export function httpCase(r: Rng, adminAuth: string): Case {
  const roll = r.int(100);
  if (roll < 12) {
    // Authentication attacks, from another address so their back-off never touches the admin.
    const auth = r.pick([
      undefined,
      'Basic',
      'Basic !!!notbase64',
      `Basic ${Buffer.from('no-colon').toString('base64')}`,
      `Bearer ${'x'.repeat(40)}`,
      basic(READER.user, `wrong${r.int(1000)}`),
      basic(`nobody${r.int(1000)}`, 'whatever-password'),
      `Basic ${Buffer.from(`${'u'.repeat(5000)}:p`).toString('base64')}`,
    ]);
    const c = bodyCase(r, auth ?? '');
    const bytes =
      auth === undefined
        ? Buffer.from(c.bytes.toString('latin1').replace('Authorization: \r\n', ''), 'latin1')
        : c.bytes;
    return { desc: `auth ${String(auth).slice(0, 30)}: ${c.desc}`, bytes, localAddress: '127.0.0.3' };
  }
  if (roll < 75) return bodyCase(r, adminAuth);
  if (roll < 90) {
    const [method, path] = r.pick(BAD_PATHS)(r);
    return { desc: `${method} ${path.slice(0, 80)}`, bytes: httpRequest(method, path, { auth: adminAuth }) };
  }
  if (roll < 97) {
    const raw = r.pick(RAW)(r);
    return { desc: `raw ${JSON.stringify(raw.slice(0, 60))}`, bytes: Buffer.from(raw, 'latin1') };
  }
  // A pipeline: valid requests, then a malformed one. The valid answers must all arrive.
  const n = 1 + r.int(3);
  const parts: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    const b = httpRequest('GET', r.pick(['/healthz', '/v1/cluster', '/readyz']), {});
    parts.push(Buffer.from(b.toString('latin1').replace('Connection: close\r\n', ''), 'latin1'));
  }
  parts.push(Buffer.from('BAD\x01REQUEST\r\n\r\n', 'latin1'));
  return {
    desc: `pipeline of ${n} valid then malformed`,
    bytes: Buffer.concat(parts),
    statuses: [...Array.from({ length: n }, () => 200), 400],
  };
}

// ---- RESP cases --------------------------------------------------------------------------------

function resp(...args: (string | Buffer)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const b = typeof a === 'string' ? Buffer.from(a) : a;
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

function respCase(r: Rng): { desc: string; bytes: Buffer } {
  const auth = r.chance(0.5) ? resp('AUTH', ADMIN.user, ADMIN.password) : Buffer.alloc(0);
  const who = auth.length ? 'authed' : 'anon';
  const roll = r.int(9);
  let desc: string;
  let body: Buffer;
  switch (roll) {
    case 0:
      desc = 'random bytes';
      body = r.bytes(1 + r.int(2000));
      break;
    case 1: {
      desc = 'mutated command';
      const b = Buffer.from(resp('PING', 'x'.repeat(r.int(50))));
      for (let i = 0; i < 1 + r.int(4); i++) b[r.int(b.length)] = r.int(256);
      body = b;
      break;
    }
    case 2:
      desc = 'bad lengths';
      body = Buffer.from(
        r.pick([
          '*-5\r\n',
          '*99999999999\r\n',
          '*1\r\n$999999999\r\nx\r\n',
          '*1\r\n$-7\r\n',
          '*abc\r\n',
          '*1\r\n$3\r\nabcdef\r\n',
          '*2\r\n$1\r\na\r\n:5\r\n',
          `*${2 ** 31}\r\n`,
        ]),
      );
      break;
    case 3:
      desc = 'oversized inline line';
      body = Buffer.from(`PING ${'a'.repeat(65 * 1024 + r.int(10_000))}`);
      break;
    case 4:
      desc = 'unknown command';
      body = resp(`NOPE${r.int(100)}`, 'a', 'b');
      break;
    case 5: {
      desc = 'mutating command with invalid arguments';
      body = r.pick([
        resp('INCR'),
        resp('INCRBY', 'seq1', 'abc'),
        resp('INCRBY', 'seq1', '1.5'),
        resp('SEQ.ALLOC', 'seq1', '-5'),
        resp('SEQ.ALLOC', 'seq1', 'abc'),
        resp('SEQ.CREATE'),
        resp('WORKER.ACQUIRE'),
        resp('WORKER.ACQUIRE', 'a'),
        resp('WORKER.RENEW', 'a', 'x', 'y'),
        resp('WORKER.RELEASE', 'a', '1.5', '1'),
        // Right arity, values the lease state refuses: must not reach the log either.
        resp('WORKER.ACQUIRE', 'fuzzapp1', 'n', 'TTL', '5'),
        resp('WORKER.ACQUIRE', 'fuzzapp1', 'n', 'TTL', '99999999999'),
        resp('WORKER.ACQUIRE', 'fuzzapp1', 'n', 'INCARNATION', 'i'.repeat(500)),
        resp('WORKER.ACQUIRE', 'fuzzapp1', 'n', 'REQID', 'r'.repeat(500)),
        resp('WORKER.ACQUIRE', '-bad', 'n'),
        resp('WORKER.ACQUIRE', 'fuzzapp1', 'x'.repeat(300)),
        resp('WORKER.RENEW', 'fuzzapp1', '99999999', '1'),
        resp('WORKER.RELEASE', 'fuzzapp1', '0', '0'),
        resp('SNOWFLAKE.NEXT'),
        resp('SNOWFLAKE.CREATE'),
      ]);
      break;
    }
    case 6:
      desc = 'many or large arguments';
      body = r.chance(0.5)
        ? resp('ECHO', ...Array.from({ length: 11 + r.int(2000) }, () => 'a'))
        : resp('ECHO', 'b'.repeat(17 * 1024 + r.int(600 * 1024)));
      break;
    case 7:
      desc = 'introspection with junk arguments';
      body = resp(
        r.pick(['CLIENT', 'CLUSTER', 'COMMAND', 'CONFIG', 'INFO', 'HELLO', 'SENTINEL', 'SELECT']),
        ...Array.from({ length: r.int(4) }, () =>
          r.pick(['LIST', 'KILL', 'x', '-1', '99', 'SETNAME', 'GET', 'a b']),
        ),
      );
      break;
    default:
      desc = 'pipeline of pings then junk';
      body = Buffer.concat([resp('PING'), resp('PING'), Buffer.from('*1\r\n$x\r\n')]);
  }
  return { desc: `${who} ${desc}`, bytes: Buffer.concat([auth, body]) };
}

// ---- the node ----------------------------------------------------------------------------------

function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

async function json(
  port: number,
  method: string,
  path: string,
  body?: unknown,
  auth?: string,
): Promise<HttpResponse> {
  const { data } = await exchange(
    port,
    httpRequest(method, path, { body: body === undefined ? undefined : JSON.stringify(body), auth }),
  );
  const r = parseResponses(data)[0];
  if (!r) throw new Error(`no response to ${method} ${path}`);
  return r;
}

async function commitIndex(port: number): Promise<number> {
  const r = await json(port, 'GET', '/readyz');
  return Number((JSON.parse(r.body) as { commit: number }).commit);
}

// ---- the run -----------------------------------------------------------------------------------

export async function runFuzz(options: FuzzOptions = {}): Promise<FuzzReport> {
  const requests = options.requests ?? 5000;
  const respCases = options.respCases ?? 1000;
  const seed = options.seed ?? 1;
  const concurrency = options.concurrency ?? 8;
  const slowPerKind = options.slowClients ?? 3;
  const strictTiming = options.strictTiming ?? true;
  const maxGrowth = options.maxRssGrowthMiB ?? 150;
  const log = options.log ?? (() => {});
  const started = Date.now();
  const failures: string[] = [];
  const statusCounts: Record<string, number> = {};

  const [peer, http, respPort] = (await freePorts(3)) as [number, number, number];
  const dataDir = mkdtempSync(join(tmpdir(), 'floe-fuzz-'));
  const stderr: string[] = [];
  const proc: ChildProcess = spawn(
    process.execPath,
    [
      floeBin,
      'serve',
      '--node-id',
      '1',
      '--data-dir',
      dataDir,
      '--peer-addr',
      `127.0.0.1:${peer}`,
      '--http-addr',
      `127.0.0.1:${http}`,
      '--resp-addr',
      `127.0.0.1:${respPort}`,
      '--tick-ms',
      '20',
      '--log-level',
      'warn',
      '--http-header-timeout-ms',
      String(HEADER_TIMEOUT_MS),
      '--http-request-timeout-ms',
      String(REQUEST_TIMEOUT_MS),
      '--http-keep-alive-timeout-ms',
      String(KEEP_ALIVE_MS),
      '--resp-request-timeout-ms',
      String(RESP_REQUEST_TIMEOUT_MS),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  proc.stderr?.on('data', (d: Buffer) => {
    if (stderr.length < 2000) stderr.push(d.toString());
  });
  let exited: string | undefined;
  proc.on('exit', (code, signal) => {
    exited = `exit code ${code} signal ${signal}`;
  });
  const pid = proc.pid!;
  const report: FuzzReport = {
    seed,
    httpRequests: 0,
    respCases: 0,
    statusCounts,
    failures,
    commitBefore: 0,
    commitAfter: 0,
    stateMistakes: [],
    rssStartMiB: 0,
    rssPeakMiB: 0,
    slowClients: [],
    respReplies: 0,
    respErrors: 0,
    durationMs: 0,
  };
  let sampler: NodeJS.Timeout | undefined;
  try {
    // Ready: the node elected itself and applied its log (polled: a child process has no event for it).
    for (let i = 0; ; i++) {
      if (exited) throw new Error(`node exited during start-up (${exited}): ${stderr.join('').slice(-2000)}`);
      try {
        if ((await json(http, 'GET', '/readyz')).status === 200) break;
      } catch {}
      if (i > 600) throw new Error('node not ready after 60 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const adminAuth = basic(ADMIN.user, ADMIN.password);
    const mk = await json(http, 'POST', '/v1/users', { ...ADMIN, grants: { '*': ['admin'] } });
    if (mk.status !== 200) throw new Error(`cannot create the admin user: ${mk.status} ${mk.body}`);
    const mk2 = await json(http, 'POST', '/v1/users', { ...READER, grants: { x: ['read'] } }, adminAuth);
    if (mk2.status !== 200) throw new Error(`cannot create the reader user: ${mk2.status} ${mk2.body}`);
    // Valid state for the fuzz to poke at: a sequence and a snowflake key.
    await json(http, 'POST', '/v1/sequences', { key: 'seq1' }, adminAuth);
    await json(http, 'POST', '/v1/snowflakes', { key: 'sf1' }, adminAuth);
    report.commitBefore = await commitIndex(http);
    report.rssStartMiB = rssMiB(pid);
    report.rssPeakMiB = report.rssStartMiB;
    sampler = setInterval(() => {
      report.rssPeakMiB = Math.max(report.rssPeakMiB, rssMiB(pid));
    }, 50);
    log(`node pid ${pid} ready; commit ${report.commitBefore}; rss ${report.rssStartMiB.toFixed(0)} MiB`);

    // Slow clients, alongside the fuzz.
    const slow = runSlowClients(http, adminAuth, slowPerKind, report, failures, strictTiming);

    // HTTP.
    const rng = new Rng(seed);
    const cases = Array.from({ length: requests }, () => httpCase(rng, adminAuth));
    let next = 0;
    const worker = async () => {
      while (next < cases.length && !exited) {
        const c = cases[next++]!;
        const before = options.traceCommits ? await commitIndex(http) : 0;
        const { data, hung, error } = await exchange(http, c.bytes, { localAddress: c.localAddress });
        if (options.traceCommits) {
          const after = await commitIndex(http);
          if (after !== before) failures.push(`committed ${after - before} entries: ${c.desc}`);
        }
        report.httpRequests++;
        if (report.httpRequests % 1000 === 0) log(`http ${report.httpRequests}/${requests}`);
        if (hung) {
          failures.push(`no answer within 20 s: ${c.desc}`);
          continue;
        }
        const responses = parseResponses(data);
        if (responses.length === 0) {
          // A reset while we were still sending an oversized body is an answer too (the 413 may be lost).
          if (error !== 'ECONNRESET' && error !== 'EPIPE')
            failures.push(`no response (${error ?? 'closed'}): ${c.desc}`);
          statusCounts.reset = (statusCounts.reset ?? 0) + 1;
          continue;
        }
        for (const res of responses) statusCounts[res.status] = (statusCounts[res.status] ?? 0) + 1;
        if (c.statuses) {
          const got = responses.map((x) => x.status);
          if (got.join() !== c.statuses.join())
            failures.push(`pipeline answered ${got.join()} not ${c.statuses.join()}: ${c.desc}`);
          continue;
        }
        for (const res of responses) {
          if (res.status >= 500)
            failures.push(`${res.status} for a client mistake: ${c.desc} → ${res.body.slice(0, 200)}`);
          else if (res.status < 400)
            failures.push(`${res.status} (accepted) for a mistake: ${c.desc} → ${res.body.slice(0, 200)}`);
          // Leaf's API (/api/...) answers plain text by design (docs/sequences.md).
          else if (!errorShaped(res.body) && !c.desc.includes(' /api/'))
            failures.push(`${res.status} body not {error, message}: ${c.desc} → ${res.body.slice(0, 200)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: options.traceCommits ? 1 : concurrency }, worker));

    // RESP.
    const rrng = new Rng(seed ^ 0x5eed);
    const rcases = Array.from({ length: respCases }, () => respCase(rrng));
    let rnext = 0;
    const rworker = async () => {
      while (rnext < rcases.length && !exited) {
        const c = rcases[rnext++]!;
        const { data, hung } = await exchange(respPort, c.bytes, { halfClose: true });
        report.respCases++;
        if (hung) failures.push(`RESP: connection not closed within 20 s after the client's FIN: ${c.desc}`);
        const text = data.toString('latin1');
        report.respReplies += (text.match(/\r\n[-+:$*%>_#,(=~]/g)?.length ?? 0) + (text.length > 0 ? 1 : 0);
        for (const line of text.split('\r\n')) {
          if (!line.startsWith('-')) continue;
          report.respErrors++;
          if (line.length < 5)
            failures.push(`RESP: an error without text (${JSON.stringify(line)}): ${c.desc}`);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.floor(concurrency / 2)) }, rworker));
    await slow;

    report.commitAfter = await commitIndex(http);
    if (report.commitAfter !== report.commitBefore)
      failures.push(
        `${report.commitAfter - report.commitBefore} log entries were committed by invalid requests (commit ${report.commitBefore} → ${report.commitAfter})`,
      );

    // State-dependent mistakes, one at a time, entries counted for each.
    for (const [desc, method, path, body] of STATE_MISTAKES) {
      const before = await commitIndex(http);
      const r = await json(http, method, path, body, adminAuth);
      const after = await commitIndex(http);
      report.stateMistakes.push({ desc, status: r.status, committed: after - before });
      if (r.status < 400 || r.status >= 500)
        failures.push(`state mistake "${desc}" answered ${r.status}: ${r.body.slice(0, 200)}`);
    }

    const health = await json(http, 'GET', '/healthz');
    if (health.status !== 200) failures.push(`/healthz answers ${health.status} after the fuzz`);
  } finally {
    if (sampler) clearInterval(sampler);
    if (exited) failures.push(`the node exited: ${exited}; stderr tail: ${stderr.join('').slice(-1500)}`);
    if (report.rssPeakMiB - report.rssStartMiB > maxGrowth)
      failures.push(
        `memory: peak RSS ${report.rssPeakMiB.toFixed(0)} MiB is more than ${maxGrowth} MiB over the ${report.rssStartMiB.toFixed(0)} MiB after start-up`,
      );
    if (!exited) {
      const gone = once(proc, 'exit');
      process.kill(pid, 'SIGTERM');
      await gone;
    }
    rmSync(dataDir, { recursive: true, force: true });
    report.durationMs = Date.now() - started;
  }
  return report;
}

function errorShaped(body: string): boolean {
  try {
    const b = JSON.parse(body) as { error?: unknown; message?: unknown };
    return typeof b.error === 'string' && b.error.length > 0 && typeof b.message === 'string';
  } catch {
    return false;
  }
}

/** Mistakes that only the state can tell (the entity does not exist); they may reach the log. */
const STATE_MISTAKES: [string, string, string, unknown][] = [
  ['remove a non-member', 'DELETE', '/v1/members/99', undefined],
  ['transfer leadership to a non-member', 'POST', '/v1/leader/transfer', { to: 99 }],
  ['re-add the node itself', 'POST', '/v1/members', { id: 1, peerAddr: '127.0.0.1:1' }],
  ['renew a lease never acquired', 'POST', '/v1/apps/nolease/workers/3/renew', { token: 1 }],
  ['release a lease never acquired', 'POST', '/v1/apps/nolease/workers/3/release', { token: 1 }],
  ['incr a missing sequence', 'POST', '/v1/sequences/missing/incr', { count: 1 }],
  ['alloc a missing sequence', 'POST', '/v1/sequences/missing/alloc', { count: 1 }],
  ['next of a missing snowflake key', 'POST', '/v1/snowflakes/missing/next', { count: 1 }],
  ['delete a missing user', 'DELETE', '/v1/users/nobody', undefined],
  [
    'set the password of a missing user',
    'PUT',
    '/v1/users/nobody/password',
    { password: 'long-enough-pass' },
  ],
  ['grant to a missing user', 'POST', '/v1/users/nobody/grants', { app: 'x', permissions: ['read'] }],
  ['delete a missing sequence', 'DELETE', '/v1/sequences/missing', undefined],
];

/** Slow clients of four kinds; each must be cut (408, or closed when idle). */
async function runSlowClients(
  port: number,
  auth: string,
  perKind: number,
  report: FuzzReport,
  failures: string[],
  strictTiming: boolean,
): Promise<void> {
  const authLine = `Authorization: ${auth}\r\n`;
  const kinds: { kind: string; limitMs: number; first: string; drip?: string }[] = [
    {
      kind: 'slow headers',
      limitMs: HEADER_TIMEOUT_MS,
      first: 'GET /healthz HTTP/1.1\r\nHost: x\r\n',
      drip: 'X',
    },
    {
      kind: 'short body',
      limitMs: REQUEST_TIMEOUT_MS,
      first: `PUT /v1/kv/slow HTTP/1.1\r\nHost: x\r\n${authLine}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"value":"`,
    },
    {
      kind: 'unfinished chunked body',
      limitMs: REQUEST_TIMEOUT_MS,
      first: `PUT /v1/kv/slow HTTP/1.1\r\nHost: x\r\n${authLine}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{"\r\n`,
      drip: '1\r\na\r\n',
    },
    { kind: 'idle keep-alive', limitMs: KEEP_ALIVE_MS, first: 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n' },
  ];
  const one = (k: (typeof kinds)[number]) =>
    new Promise<void>((resolvePromise) => {
      let t0 = Date.now();
      let received = '';
      let drip: NodeJS.Timeout | undefined;
      // The clock and the drip start once connected (a queued drip would otherwise go out first).
      const socket = connect({ port, host: '127.0.0.1' }, () => {
        t0 = Date.now();
        socket.write(k.first);
        if (k.drip)
          drip = setInterval(() => socket.writable && socket.write(k.drip!), Math.max(50, k.limitMs / 10));
      });
      const guard = setTimeout(() => socket.destroy(), k.limitMs + 30_000);
      socket.on('data', (d) => {
        received += d.toString('latin1');
      });
      socket.on('error', () => {});
      socket.on('close', () => {
        clearInterval(drip);
        clearTimeout(guard);
        const cutAfterMs = Date.now() - t0;
        const status = [...received.matchAll(/HTTP\/1\.1 (\d{3})/g)].pop()?.[1] ?? 'closed';
        report.slowClients.push({ kind: k.kind, status, cutAfterMs, limitMs: k.limitMs });
        if (k.kind === 'idle keep-alive') {
          if (!received.startsWith('HTTP/1.1 200'))
            failures.push(`idle keep-alive client got ${received.slice(0, 40)}`);
        } else if (status !== '408')
          failures.push(`${k.kind}: answered ${status}, not 408: ${received.slice(-300)}`);
        if (cutAfterMs > k.limitMs + 30_000) failures.push(`${k.kind}: never cut by the server`);
        else if (strictTiming && cutAfterMs > k.limitMs + 3000)
          failures.push(`${k.kind}: cut after ${cutAfterMs} ms, the limit is ${k.limitMs} ms (+3 s slack)`);
        resolvePromise();
      });
    });
  await Promise.all(kinds.flatMap((k) => Array.from({ length: perKind }, () => one(k))));
}

// ---- command line --------------------------------------------------------------------------------

function arg(name: string): number | undefined {
  const i = process.argv.indexOf(`--${name}`);
  if (i === -1) return undefined;
  const v = Number(process.argv[i + 1]);
  if (!Number.isSafeInteger(v) || v < 0) {
    process.stderr.write(`--${name} needs a non-negative integer\n`);
    process.exit(2);
  }
  return v;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const report = await runFuzz({
    requests: arg('requests'),
    respCases: arg('resp'),
    seed: arg('seed'),
    concurrency: arg('concurrency'),
    slowClients: arg('slow'),
    traceCommits: process.argv.includes('--trace-commits'),
    log: (line) => process.stderr.write(`fuzz: ${line}\n`),
  });
  const { failures, ...rest } = report;
  process.stdout.write(`${JSON.stringify(rest, null, 2)}\n`);
  if (failures.length > 0) {
    process.stdout.write(
      `\n${failures.length} failures:\n${failures
        .slice(0, 100)
        .map((f) => `- ${f}`)
        .join('\n')}\n`,
    );
    process.exit(1);
  }
  process.stdout.write('\nno failures\n');
}
