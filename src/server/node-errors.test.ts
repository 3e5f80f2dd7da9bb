// The node runtime's proposal errors at the servers: a write whose outcome is unknown is never
// reported as a plain failure (500 / -ERR), and one that was definitely not applied says so, so
// that clients can tell "retry only idempotently" from "retry freely" (docs/http-errors.md).

import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
import {
  MemberNotCaughtUpError,
  NodeStoppedError,
  NotLeaderError,
  OverloadedError,
  ProposalNotCommittedError,
  ProposalOutcomeUnknownError,
  ProposalTimeoutError,
  ReadTimeoutError,
} from '../node/errors.js';
import { ProposalDroppedError } from '../raft/types.js';
import { respBackendOf } from './floe-services.js';
import { startHttpAdmin } from './http-admin.js';
import { sendHttpError } from './http-errors.js';
import { startRespServer } from './resp/index.js';
import { RawClient, RespErr } from './resp/test-support.js';
import { memorySingleNode } from './test-node.js';

const unknown = (reason: 'leadershipLost' | 'stopped' | 'snapshot') =>
  new ProposalOutcomeUnknownError(reason, `node 1 lost entry 7 (${reason})`);
const notCommitted = () => new ProposalNotCommittedError(3, 7, 4);

describe('sendHttpError', () => {
  /** A one-route app that fails with `err` on `path`. */
  async function replyFor(err: unknown, path = '/v1/kv/k') {
    const app = Fastify();
    app.all('/*', async (req, reply) => sendHttpError(reply, err, req.url));
    const res = await app.inject({ method: 'POST', url: path });
    await app.close();
    return { status: res.statusCode, headers: res.headers, body: res.json() as Record<string, unknown> };
  }

  it('an outcome-unknown write is 504 outcome_unknown with its reason and what a retry does', async () => {
    for (const reason of ['leadershipLost', 'stopped', 'snapshot'] as const) {
      const r = await replyFor(unknown(reason));
      expect(r.status).toBe(504);
      expect(r.body).toMatchObject({ error: 'outcome_unknown', reason });
      expect(String(r.body.message)).toMatch(
        /^the write may or may not have been applied \(node 1 lost entry 7/,
      );
    }
    const timeout = await replyFor(new ProposalTimeoutError(5000), '/v1/apps/orders/workers/acquire');
    expect(timeout).toMatchObject({ status: 504, body: { error: 'outcome_unknown', reason: 'timeout' } });
    expect(String(timeout.body.message)).toMatch(/retry with the same requestId/);
    const renew = await replyFor(unknown('leadershipLost'), '/v1/apps/orders/workers/3/renew');
    expect(String(renew.body.message)).toMatch(/retrying with the same token is safe/);
    const incr = await replyFor(unknown('leadershipLost'), '/v1/counters/c/incr?x=1');
    expect(String(incr.body.message)).toMatch(/may apply it a second time/);
  });

  it('a write that was not committed is 503 not_committed with Retry-After', async () => {
    const r = await replyFor(notCommitted());
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('1');
    expect(r.body).toMatchObject({ error: 'not_committed' });
    expect(String(r.body.message)).toMatch(/^the write was not applied \(proposal at index 7 \(term 3\)/);
  });

  it('keeps the other codes: not_leader, timeout (reads), overloaded, stopped, not_caught_up, internal', async () => {
    expect(await replyFor(new NotLeaderError(2, { id: 1, httpAddr: 'h:1' }))).toMatchObject({
      status: 307,
      headers: { location: 'http://h:1/v1/kv/k' },
      body: { error: 'not_leader', leader: { id: 1, httpAddr: 'h:1' } },
    });
    expect(await replyFor(new NotLeaderError(2, undefined))).toMatchObject({ status: 503 });
    expect(await replyFor(new ReadTimeoutError(5000))).toMatchObject({
      status: 504,
      body: { error: 'timeout' },
    });
    expect(await replyFor(new OverloadedError(10))).toMatchObject({
      status: 429,
      body: { error: 'overloaded' },
    });
    expect(await replyFor(new NodeStoppedError('x'))).toMatchObject({
      status: 503,
      body: { error: 'stopped' },
    });
    expect(await replyFor(new MemberNotCaughtUpError(4, 'match 0'))).toMatchObject({
      status: 504,
      body: { error: 'not_caught_up' },
    });
    expect(await replyFor(new Error('boom'))).toMatchObject({ status: 500, body: { error: 'internal' } });
  });

  it("maps the core's refusals: transferring 503 not_committed, tooMuchUncommitted 429, confChangePending 409", async () => {
    const transferring = await replyFor(new ProposalDroppedError('transferring', 2));
    expect(transferring).toMatchObject({ status: 503, body: { error: 'not_committed' } });
    expect(transferring.headers['retry-after']).toBe('1');
    expect(String(transferring.body.message)).toMatch(/leadership transfer/);
    expect(await replyFor(new ProposalDroppedError('tooMuchUncommitted', 1))).toMatchObject({
      status: 429,
      body: { error: 'overloaded' },
    });
    expect(await replyFor(new ProposalDroppedError('confChangePending', 1))).toMatchObject({
      status: 409,
      body: { error: 'conf_change_pending' },
    });
  });
});

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

/** One real node with both servers; `failNext` makes the next proposals fail with these errors. */
async function singleNode() {
  const { node, state } = memorySingleNode();
  const failNext: Error[] = [];
  const propose = node.propose.bind(node);
  node.propose = (cmd: Uint8Array) => {
    const err = failNext.shift();
    return err ? Promise.reject(err) : propose(cmd);
  };
  const leases = new LeaseService({ node: leaseNodeOf(node), state: state.leases });
  const services = { node, leases, auth: state.auth };
  const http = await startHttpAdmin({ node, kv: state.kv, services, host: '127.0.0.1', port: 0 });
  const resp = await startRespServer({ port: 0, backend: respBackendOf(services) });
  node.start();
  await node.waitForLeader();
  await leases.whenReady();
  const raw = await RawClient.connect(resp.address.port);
  stop = async () => {
    raw.close();
    leases.close();
    await node.stop('test over');
    await http.close();
    await resp.close();
  };
  const post = async (url: string, payload: unknown) => {
    const res = await http.inject({ method: 'POST', url, payload: payload as object });
    return { status: res.statusCode, headers: res.headers, body: res.json() as Record<string, unknown> };
  };
  return { post, raw, failNext };
}

describe('node proposal errors through the real routes', () => {
  it('HTTP acquire and counter increment: outcome_unknown (504) and not_committed (503), then a retry succeeds', async () => {
    const { post, failNext } = await singleNode();
    const acquire = { nodeId: 'svc-1', requestId: 'req-1' };
    failNext.push(new ProposalTimeoutError(5000));
    const lost = await post('/v1/apps/orders/workers/acquire', acquire);
    expect(lost).toMatchObject({ status: 504, body: { error: 'outcome_unknown', reason: 'timeout' } });
    expect(String(lost.body.message)).toMatch(/same requestId/);
    const retried = await post('/v1/apps/orders/workers/acquire', acquire);
    expect(retried).toMatchObject({ status: 200, body: { ok: true, nodeId: 'svc-1', requestId: 'req-1' } });

    failNext.push(notCommitted());
    const incr = await post('/v1/counters/c/incr', { by: 1 });
    expect(incr).toMatchObject({
      status: 503,
      headers: { 'retry-after': '1' },
      body: { error: 'not_committed' },
    });
    expect(await post('/v1/counters/c/incr', { by: 1 })).toMatchObject({ status: 200, body: { value: '1' } });
  });

  it('RESP WORKER.ACQUIRE: -TRYAGAIN outcome unknown: <reason> and -TRYAGAIN not committed, retry', async () => {
    const { raw, failNext } = await singleNode();
    failNext.push(
      unknown('leadershipLost'),
      new ProposalTimeoutError(5000),
      notCommitted(),
      new ProposalDroppedError('transferring', 1),
      new ProposalDroppedError('tooMuchUncommitted', 1),
    );
    const replies = [];
    for (let i = 0; i < 5; i++)
      replies.push(await raw.call('WORKER.ACQUIRE', 'orders', 'svc-2', 'REQID', 'r'));
    expect(replies.map((r) => (r as RespErr).message)).toEqual([
      'TRYAGAIN outcome unknown: leadershipLost',
      'TRYAGAIN outcome unknown: timeout',
      'TRYAGAIN not committed, retry',
      'TRYAGAIN not committed, retry (leadership transfer in progress)',
      'TRYAGAIN overloaded: too much uncommitted log',
    ]);
    const ok = await raw.call('WORKER.ACQUIRE', 'orders', 'svc-2', 'REQID', 'r');
    expect(ok).not.toBeInstanceOf(RespErr);
  });
});
