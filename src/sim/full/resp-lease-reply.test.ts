import { describe, expect, it } from 'vitest';
import { drawConfig, drawRespLease } from './config.js';
import type { RespValue } from './resp-client.js';
import {
  type AcquireAsked,
  checkAcquireReply,
  checkRenewReply,
  deadlinesAfterAck,
  mayIssue,
  recordOf,
  renewBound,
  safetyMarginMs,
} from './resp-lease-reply.js';

const bulk = (s: string): RespValue => ({ type: 'bulk', value: s });
const rec = (fields: Record<string, string | number>): RespValue => ({
  type: 'array',
  value: Object.entries(fields).flatMap(([k, v]) => [bulk(k), bulk(String(v))]),
});

const asked: AcquireAsked = {
  app: 'svc',
  nodeId: 'r1',
  requestId: 'r1#1-ab',
  incarnation: 'r1#1',
  ttlMs: 2000,
  layout: 'e1767225600000/u1/t41/d0/w10/s12/node-sequence',
  boundMs: 1_780_000_030_000,
};

const grant = {
  worker_id: 3,
  datacenter_id: 0,
  token: 41,
  expires_at_ms: 1_780_000_002_000,
  high_water_ms: 1_779_999_999_000,
  ttl_ms: 2000,
  app: 'svc',
  node_id: 'r1',
  local_worker_id: 3,
  bound_ms: 1_780_000_030_000,
  pool_bits: 2,
  request_id: 'r1#1-ab',
  incarnation: 'r1#1',
  layout: asked.layout,
};

const parsed = (v: RespValue) => {
  const r = recordOf(v);
  if (!r) throw new Error('not a record');
  return r;
};

describe('recordOf', () => {
  it('reads a RESP2 field/value list', () => {
    expect(parsed(rec({ a: 1, b: 'x' }))).toEqual(
      new Map([
        ['a', '1'],
        ['b', 'x'],
      ]),
    );
  });
  it('refuses anything else: odd length, non-bulk items, nil, repeated fields, errors', () => {
    expect(recordOf({ type: 'array', value: [bulk('a')] })).toBeUndefined();
    expect(recordOf({ type: 'array', value: [bulk('a'), { type: 'int', value: 1n }] })).toBeUndefined();
    expect(recordOf({ type: 'array', value: null })).toBeUndefined();
    expect(recordOf({ type: 'array', value: [bulk('a'), bulk('1'), bulk('a'), bulk('2')] })).toBeUndefined();
    expect(recordOf({ type: 'error', value: 'ERR x' })).toBeUndefined();
    expect(recordOf({ type: 'simple', value: 'OK' })).toBeUndefined();
  });
});

describe('checkAcquireReply', () => {
  it('takes the grant of a reply that answers the request', () => {
    expect(checkAcquireReply(asked, parsed(rec(grant)))).toEqual({
      workerId: 3,
      datacenterId: 0,
      localWorkerId: 3,
      token: 41,
      floorMs: grant.high_water_ms,
      boundMs: grant.bound_ms,
      ttlMs: 2000,
    });
  });
  it.each([
    ['app', 'other'],
    ['node_id', 'r2'],
    ['request_id', 'r1#1-cd'],
    ['incarnation', 'r1#2'],
    ['ttl_ms', 5000],
    ['layout', ''],
  ])('refuses a reply whose %s is not the request’s', (field, value) => {
    const r = checkAcquireReply(asked, parsed(rec({ ...grant, [field]: value })));
    expect(r).toMatch(new RegExp(`^${field} is`));
  });
  it('refuses a reply with a field that is not a number, or a token 0', () => {
    expect(checkAcquireReply(asked, parsed(rec({ ...grant, token: 'x' })))).toMatch(/^token/);
    expect(checkAcquireReply(asked, parsed(rec({ ...grant, high_water_ms: -1 })))).toMatch(/^high_water_ms/);
    expect(checkAcquireReply(asked, parsed(rec({ ...grant, token: 0 })))).toMatch(/not a grant/);
    const { bound_ms: _, ...noBound } = grant;
    expect(checkAcquireReply(asked, parsed(rec(noBound)))).toMatch(/^bound_ms/);
  });
});

describe('checkRenewReply', () => {
  const renew = { app: 'svc', worker_id: 3, token: 41, ttl_ms: 2000, bound_ms: 1_780_000_060_000, logged: 1 };
  const req = { app: 'svc', workerId: 3, token: 41, ttlMs: 2000, boundMs: 1_780_000_060_000 };
  it('takes the committed bound of a reply that answers the request', () => {
    expect(checkRenewReply(req, parsed(rec(renew)))).toEqual({ boundMs: 1_780_000_060_000 });
    const { boundMs: _, ...noBound } = req;
    expect(checkRenewReply(noBound, parsed(rec({ ...renew, bound_ms: 5 })))).toEqual({ boundMs: 5 });
  });
  it.each([
    ['app', 'other'],
    ['worker_id', 2],
    ['token', 40],
    ['ttl_ms', 1000],
  ])('refuses a reply whose %s is not the request’s', (field, value) => {
    expect(checkRenewReply(req, parsed(rec({ ...renew, [field]: value })))).toMatch(
      new RegExp(`^${field} is`),
    );
  });
  it('refuses a bound below the one the renewal asked to commit', () => {
    expect(checkRenewReply(req, parsed(rec({ ...renew, bound_ms: req.boundMs - 1 })))).toMatch(
      /below the BOUND/,
    );
  });
});

describe('deadlines', () => {
  it('count TTL minus the margin from the send, on both clocks, and never move back', () => {
    expect(safetyMarginMs(2000)).toBe(300);
    const d = deadlinesAfterAck(undefined, 100, 5_000, 2000);
    expect(d).toEqual({ mono: 1800, wall: 6700 });
    // An acknowledgement of an earlier send (a slow reply) does not shorten the lease.
    expect(deadlinesAfterAck(d, 50, 4_000, 2000)).toEqual(d);
    expect(deadlinesAfterAck(d, 700, 5_600, 2000)).toEqual({ mono: 2400, wall: 7300 });
  });
  it('allow an ID only while both deadlines are more than one tick away', () => {
    const d = { mono: 1000, wall: 9000 };
    expect(mayIssue(d, 949, 8000, 50)).toBe(true);
    expect(mayIssue(d, 950, 8000, 50)).toBe(false);
    // A suspended machine: the monotonic clock stood still, the wall clock ran past its deadline.
    expect(mayIssue(d, 500, 8950, 50)).toBe(false);
  });
  it('promise a new bound only when the committed one is within half a window of the clock', () => {
    expect(renewBound(10_000, 9_000, 4_000)).toBe(13_000);
    expect(renewBound(10_000, 7_999, 4_000)).toBeUndefined();
  });
});

describe('drawRespLease', () => {
  it('gives clients only to a share of swarm seeds, and to any seed with the override', () => {
    let drawn = 0;
    for (let seed = 1; seed <= 400; seed++) {
      const c = drawRespLease(seed, 'swarm', 2000, undefined);
      expect(c.clients).toBeGreaterThanOrEqual(0);
      expect(c.clients).toBeLessThanOrEqual(3);
      if (c.clients > 0) drawn++;
      expect(drawRespLease(seed, 'net', 2000, undefined).clients).toBe(0);
      expect(drawRespLease(seed, 'nodes', 2000, 3).clients).toBe(3);
      expect(c.requestTimeoutMs).toBeLessThanOrEqual(666);
    }
    expect(drawn).toBeGreaterThan(60);
    expect(drawn).toBeLessThan(140);
  });
  it('draws from a stream of its own: the rest of a seed’s configuration does not change with it', () => {
    for (const seed of [1000, 1001, 1002, 77]) {
      const { respLease: a, ...with3 } = drawConfig(seed, 'swarm', { respLeaseClients: 3 });
      const { respLease: b, ...with0 } = drawConfig(seed, 'swarm', { respLeaseClients: 0 });
      expect(with3).toEqual(with0);
      expect(a.clients).toBe(3);
      expect(b.clients).toBe(0);
    }
  });
});
