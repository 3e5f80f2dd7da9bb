import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { FloeStateMachine } from '../../state/floe-state-machine.js';
import { buildCreate, encodeSequenceCommand } from '../../state/sequences/codec.js';
import type { SequenceCommand } from '../../state/sequences/types.js';
import { startHttpAdmin } from '../http-admin.js';
import { NodeMetrics } from '../metrics.js';
import { singleNodeWithApp } from '../test-node.js';
import type { DashboardSnapshot } from './index.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

async function singleNode(): Promise<{ base: string; app: FastifyInstance; state: FloeStateMachine }> {
  const s = await singleNodeWithApp(({ node, state, leases }) => {
    const metrics = new NodeMetrics({
      node,
      defaultMetrics: false,
      leases: state.leases,
      leaseService: leases,
      sequences: state.sequences,
    });
    return startHttpAdmin({
      node,
      kv: state.kv,
      services: { node, leases, auth: state.auth },
      metrics,
      host: '127.0.0.1',
      port: 0,
      dashboard: { intervalMs: 50 },
    });
  });
  const { state, app } = s;
  stop = s.stop;
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return { base: `http://127.0.0.1:${addr.port}`, app, state };
}

/** Reads server-sent events until `pred` holds for one; then closes the stream. */
async function firstEvent(
  url: string,
  pred: (s: DashboardSnapshot) => boolean,
  headers: Record<string, string> = {},
): Promise<DashboardSnapshot> {
  const ctl = new AbortController();
  const res = await fetch(url, { headers, signal: ctl.signal });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('stream ended');
      buf += dec.decode(value, { stream: true });
      for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const line = frame.split('\n').find((l) => l.startsWith('data: '));
        if (!line) continue;
        const s = JSON.parse(line.slice(6)) as DashboardSnapshot;
        if (pred(s)) return s;
      }
    }
  } finally {
    ctl.abort();
  }
}

describe('dashboard routes', () => {
  it('serves the page, its script and style, a JSON snapshot and a live event stream with leases', async () => {
    const { base, app } = await singleNode();
    const page = await app.inject({ method: 'GET', url: '/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.body).toContain('/dashboard/app.js');
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    const js = await app.inject({ method: 'GET', url: '/dashboard/app.js' });
    expect(js.statusCode).toBe(200);
    expect(js.body).toContain("new EventSource('/dashboard/events')");
    // The whole page, script and style stay small.
    const css = await app.inject({ method: 'GET', url: '/dashboard/style.css' });
    expect(page.body.length + js.body.length + css.body.length).toBeLessThan(20_000);

    const data = await app.inject({ method: 'GET', url: '/dashboard/data' });
    expect(data.json()).toMatchObject({ node: { id: 1, role: 'leader', leader: 1 }, apps: [] });

    const grant = await app.inject({
      method: 'POST',
      url: '/v1/apps/orders/workers/acquire',
      payload: { nodeId: 'svc-a', ttlMs: 5000 },
    });
    expect(grant.statusCode).toBe(200);
    const s = await firstEvent(`${base}/dashboard/events`, (x) => x.apps.length > 0);
    expect(s.members).toEqual([expect.objectContaining({ id: 1, self: true, reachable: true })]);
    const orders = s.apps[0]!;
    expect(orders).toMatchObject({ app: 'orders', leased: 1 });
    expect(orders.leases[0]).toMatchObject({ holder: 'svc-a', workerId: grant.json().workerId });
    // The leader knows the deadline: time left is at most the TTL.
    expect(orders.leases[0]!.timeLeftMs).toBeGreaterThan(0);
    expect(orders.leases[0]!.timeLeftMs).toBeLessThanOrEqual(5000);
    expect(s.series.http.length).toBeGreaterThan(0);
  });

  it('asks for Basic credentials once users exist and needs admin on *', async () => {
    const { base, app } = await singleNode();
    const add = (user: string, grants: Record<string, string[]>, auth?: string) =>
      app.inject({
        method: 'POST',
        url: '/v1/users',
        payload: { user, password: `${user}-password`, grants },
        headers: auth ? { authorization: `Basic ${Buffer.from(auth).toString('base64')}` } : {},
      });
    expect((await add('root', { '*': ['admin'] })).statusCode).toBe(200);
    expect((await add('app', { orders: ['acquire'] }, 'root:root-password')).statusCode).toBe(200);

    for (const url of ['/', '/dashboard/data', '/dashboard/events']) {
      const r = await app.inject({ method: 'GET', url });
      expect(r.statusCode).toBe(401);
      expect(r.headers['www-authenticate']).toBe('Basic realm="floe"');
    }
    const basic = (a: string) => ({ authorization: `Basic ${Buffer.from(a).toString('base64')}` });
    expect(
      (await app.inject({ method: 'GET', url: '/', headers: basic('app:app-password') })).statusCode,
    ).toBe(403);
    expect(
      (await app.inject({ method: 'GET', url: '/', headers: basic('root:root-password') })).statusCode,
    ).toBe(200);
    const s = await firstEvent(`${base}/dashboard/events`, () => true, basic('root:root-password'));
    expect(s.node.leader).toBe(1);
  });

  it('with more sequences than it sorts once a second, lists those that allocated last', async () => {
    const { app, state } = await singleNode();
    // Straight into the replicated state (the view is under test, not Raft): 6,000 sequences.
    let index = 1_000_000;
    const apply = (cmd: SequenceCommand) =>
      state.sequences.apply(encodeSequenceCommand(cmd), { index: ++index, term: 1, leaderTimeMs: 0 });
    for (let i = 0; i < 6000; i++) {
      const c = buildCreate(`seq-${String(i).padStart(5, '0')}`, {});
      if ('ok' in c) throw new Error(c.message);
      apply(c);
    }
    const small = (await app.inject({ method: 'GET', url: '/dashboard/data' })).json() as DashboardSnapshot;
    expect(small.sequencesTotal).toBe(6000);
    expect(small.sequences).toEqual([]); // nothing allocated yet
    for (const key of ['seq-04000', 'seq-00007', 'seq-05999'])
      apply({ op: 'alloc', key, count: 10, owner: 'n1', requestId: `r-${key}`, exact: false });
    const s = (await app.inject({ method: 'GET', url: '/dashboard/data' })).json() as DashboardSnapshot;
    expect(s.sequences.map((q) => q.key)).toEqual(['seq-00007', 'seq-04000', 'seq-05999']);
    expect(s.sequences[0]).toMatchObject({ mode: 'strict', step: 1000 });
  });

  it('closing the app ends open event streams (close does not wait for them)', async () => {
    const { base, app } = await singleNode();
    const res = await fetch(`${base}/dashboard/events`);
    const reader = res.body!.getReader();
    await reader.read(); // the stream is open
    const s = stop!;
    stop = undefined;
    await s(); // resolves: preClose ended the stream
    for (;;) if ((await reader.read()).done) break;
    expect(app.server.listening).toBe(false);
  });
});
