/**
 * Issue 15 item 2, from inside: every command any request makes the node propose passes the
 * state's own complete check for its section (leases, auth, sequences, key-value). The node's
 * `propose` is wrapped before the services are built; the fuzzer's HTTP cases (all mistakes) and one
 * valid request of every command type then run against the real HTTP API of an in-process node.
 * (Snowflake keys are covered from outside by the fuzzer's commit-index check on a real node.)
 */

import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exchange, httpCase, parseResponses, Rng } from '../../scripts/fuzz-http.js';
import { leaseNodeOf } from '../../src/lease/floe-node-adapter.js';
import { LeaseService } from '../../src/lease/lease-service.js';
import { unpack } from '../../src/node/envelope.js';
import { SequenceService, sequenceNodeOf } from '../../src/sequences/index.js';
import { startHttpAdmin } from '../../src/server/http-admin.js';
import { memorySingleNode } from '../../src/server/test-node.js';
import { parseAuthCommand } from '../../src/state/auth/codec.js';
import { parseLeaseCommand } from '../../src/state/leases/index.js';
import { parseSequenceCommand } from '../../src/state/sequences/index.js';

/** The static part of the key-value section's apply checks (no state needed). */
function kvProblem(c: Record<string, unknown>): string | undefined {
  if (typeof c.key !== 'string' || Buffer.byteLength(c.key) > 1024)
    return 'key must be a string of <= 1024 bytes';
  if (c.op === 'put')
    return typeof c.value === 'string' && Buffer.byteLength(c.value) <= 64 * 1024 ? undefined : 'put value';
  if (c.op === 'cas')
    return typeof c.value === 'string' && (c.expect === null || typeof c.expect === 'string')
      ? undefined
      : 'cas';
  if (c.op === 'incr') {
    if (typeof c.by !== 'string' || !/^-?\d{1,19}$/.test(c.by)) return 'incr by is not an integer';
    const by = BigInt(c.by);
    return by > 2n ** 63n - 1n || by < -(2n ** 63n) ? 'incr by is outside int64' : undefined;
  }
  if (c.op === 'del') return undefined;
  return `unknown op ${String(c.op)}`;
}

/** undefined when the state would accept the command's form; otherwise why not. */
function problemOf(command: Uint8Array): { section: string; op: string; problem?: string } {
  const v = unpack<Record<string, unknown>>(command);
  const op = String(v?.op);
  const refused = (r: unknown) =>
    typeof r === 'object' && r !== null && (r as { ok?: unknown }).ok === false
      ? String((r as { message?: unknown }).message)
      : undefined;
  switch (v?.ns) {
    case 'lease':
      return { section: 'lease', op, problem: refused(parseLeaseCommand(v)) };
    case 'auth':
      return { section: 'auth', op, problem: refused(parseAuthCommand(v)) };
    case 'seq':
      return { section: 'seq', op, problem: refused(parseSequenceCommand(v)) };
    case undefined:
      return { section: 'kv', op, problem: kvProblem(v) };
    default:
      return { section: String(v.ns), op };
  }
}

const proposed: { section: string; op: string; problem?: string }[] = [];
let base = '';
let port = 0;
let stop: () => Promise<void>;

beforeAll(async () => {
  const { node, state } = memorySingleNode();
  // Every proposal, whoever makes it, is recorded with the verdict of its section's check.
  const propose = node.propose.bind(node);
  node.propose = ((command: Uint8Array) => {
    proposed.push(problemOf(command));
    return propose(command);
  }) as typeof node.propose;
  const leases = new LeaseService({ node: leaseNodeOf(node), state: state.leases });
  const sequences = new SequenceService({
    node: sequenceNodeOf(node),
    state: state.sequences,
    owner: 'node-1',
  });
  const app: FastifyInstance = await startHttpAdmin({
    node,
    kv: state.kv,
    services: { node, leases, sequences, auth: state.auth },
    host: '127.0.0.1',
    port: 0,
  });
  node.start();
  await node.waitForLeader();
  await leases.whenReady();
  port = (app.server.address() as { port: number }).port;
  base = `http://127.0.0.1:${port}`;
  stop = async () => {
    leases.close();
    sequences.close();
    await node.stop('test over');
    await app.close();
  };
});

afterAll(async () => {
  await stop?.();
});

async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

describe('nothing the state would refuse is ever proposed', () => {
  it('over 2,000 fuzzed mistakes (auth off, so every handler runs)', async () => {
    const rng = new Rng(21);
    const statuses = new Map<number, number>();
    for (let i = 0; i < 2000; i++) {
      const c = httpCase(rng, 'Basic Zm9vOmJhcg==');
      const { data } = await exchange(port, c.bytes, { localAddress: c.localAddress });
      for (const r of parseResponses(data)) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    }
    expect([...statuses.keys()].filter((s) => s >= 500)).toEqual([]);
    expect(proposed.filter((p) => p.problem !== undefined)).toEqual([]);
  });

  it('and one valid request of every command type is proposed and passes (the wrapper sees them)', async () => {
    const before = proposed.length;
    const ok = async (method: string, path: string, body?: unknown) => {
      const r = await call(method, path, body);
      expect(r.status, `${method} ${path} ${JSON.stringify(r.body)}`).toBeLessThan(300);
      return r.body as Record<string, unknown>;
    };
    await ok('PUT', '/v1/kv/k', { value: 'v' });
    await ok('POST', '/v1/kv/k/cas', { expect: 'v', value: 'w' });
    await ok('POST', '/v1/counters/c/incr', { by: '9223372036854775807' });
    await ok('PUT', '/v1/apps/a/pool', { bits: 8 });
    const lease = await ok('POST', '/v1/apps/a/workers/acquire', { nodeId: 'n' });
    await ok('POST', `/v1/apps/a/workers/${lease.workerId}/renew`, {
      token: lease.token,
      boundMs: Date.now() + 60_000,
    });
    await ok('POST', `/v1/apps/a/workers/${lease.workerId}/release`, { token: lease.token });
    await ok('POST', '/v1/sequences', { key: 's' });
    await ok('POST', '/v1/sequences/s/incr', { count: 3 });
    await ok('DELETE', '/v1/sequences/s');
    // Users last: the first one turns authentication on.
    await ok('POST', '/v1/users', {
      user: 'root',
      password: 'root-password-0123',
      grants: { '*': ['admin'] },
    });
    const seen = proposed.slice(before);
    expect(seen.filter((p) => p.problem !== undefined)).toEqual([]);
    const kinds = new Set(seen.map((p) => `${p.section}.${p.op}`));
    for (const k of [
      'kv.put',
      'kv.cas',
      'kv.incr',
      'lease.configurePool',
      'lease.acquire',
      'lease.renew',
      'lease.release',
      'seq.create',
      'seq.alloc',
      'seq.delete',
      'auth.userAdd',
    ])
      expect(kinds.has(k), `${k} in ${[...kinds].join(', ')}`).toBe(true);
  });
});
