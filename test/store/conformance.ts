import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, it } from 'vitest';

/**
 * The lease store conformance suite: the same calls, the same answers, whatever store keeps the
 * leases. It talks to a Floe node over HTTP (so the servers' lease routes and the store seam are in
 * the path), or to anything else with the same shape.
 */
export interface LeaseApi {
  acquire(b: {
    app: string;
    nodeId: string;
    requestId?: string;
    incarnation?: string;
    ttlMs?: number;
    boundMs?: number;
    layout?: string;
    healthUrl?: string;
  }): Promise<Answer>;
  renew(
    app: string,
    workerId: number,
    b: { token: number; boundMs?: number; healthUrl?: string },
  ): Promise<Answer>;
  release(app: string, workerId: number, b: { token: number; lastTimestampMs?: number }): Promise<Answer>;
  configurePool(app: string, bits: number, datacenterBits?: number): Promise<Answer>;
  get(app: string, workerId: number): Promise<Answer>;
  list(app: string): Promise<Answer>;
  /** Server-side Snowflake keys (docs/snowflake-server.md). */
  snowflakeCreate(b: { key: string; layout?: string; ttlMs?: number }): Promise<Answer>;
  snowflakeNext(key: string, count: number): Promise<Answer>;
  snowflakeInfo(key: string): Promise<Answer>;
}

/** `ok: true` with the reply's fields, or `ok: false` with the refusal's code. */
export type Answer =
  | { ok: true; status: number; [k: string]: unknown }
  | { ok: false; status: number; code: string };

export function httpLeaseApi(base: () => string): LeaseApi {
  const call = async (method: string, path: string, body?: unknown): Promise<Answer> => {
    const res = await fetch(`${base()}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (res.status >= 200 && res.status < 300) return { ...json, ok: true, status: res.status };
    return { ok: false, status: res.status, code: String(json.error) };
  };
  return {
    acquire: (b) => call('POST', `/v1/apps/${encodeURIComponent(b.app)}/workers/acquire`, b),
    renew: (app, w, b) => call('POST', `/v1/apps/${encodeURIComponent(app)}/workers/${w}/renew`, b),
    release: (app, w, b) => call('POST', `/v1/apps/${encodeURIComponent(app)}/workers/${w}/release`, b),
    configurePool: (app, bits, datacenterBits = 0) =>
      call('PUT', `/v1/apps/${encodeURIComponent(app)}/pool`, { bits, datacenterBits }),
    get: (app, w) => call('GET', `/v1/apps/${encodeURIComponent(app)}/workers/${w}`),
    list: (app) => call('GET', `/v1/apps/${encodeURIComponent(app)}/workers`),
    snowflakeCreate: (b) => call('POST', '/v1/snowflakes', b),
    snowflakeNext: (key, count) => call('POST', `/v1/snowflakes/${encodeURIComponent(key)}/next`, { count }),
    snowflakeInfo: (key) => call('GET', `/v1/snowflakes/${encodeURIComponent(key)}`),
  };
}

function ok(a: Answer): Record<string, unknown> {
  if (!a.ok) throw new Error(`expected success, got ${a.status} ${a.code}`);
  return a;
}

function refused(a: Answer, code: string): void {
  expect(a.ok ? `success ${JSON.stringify(a)}` : a.code).toBe(code);
}

/** Registers the suite's tests; `api()` is called inside each test. `tag` keeps app names apart between runs. */
export function leaseStoreConformance(api: () => LeaseApi, tag: string): void {
  let n = 0;
  const app = (what: string) => `conf-${tag}-${what}-${++n}`;
  const now = () => Date.now();

  it('acquire grants the lowest fresh worker ID with a token and a zero floor; list and get show it', async () => {
    const a = app('acq');
    const g = ok(
      await api().acquire({ app: a, nodeId: 'n1', requestId: 'r1', incarnation: 'i1', ttlMs: 10_000 }),
    );
    expect(g.workerId).toBe(0);
    expect(g.token).toBeGreaterThan(0);
    expect(g.highWaterMs).toBe(0);
    expect(g).toMatchObject({
      nodeId: 'n1',
      requestId: 'r1',
      incarnation: 'i1',
      retried: false,
      ttlMs: 10_000,
    });
    const g2 = ok(await api().acquire({ app: a, nodeId: 'n2', requestId: 'r2', ttlMs: 10_000 }));
    expect(g2.workerId).toBe(1);
    const l = ok(await api().list(a));
    expect((l.leases as { workerId: number }[]).map((x) => x.workerId)).toEqual([0, 1]);
    const w = ok(await api().get(a, 0));
    expect(w).toMatchObject({ live: true, nodeId: 'n1', token: g.token });
    expect(w.remainingMs).toBeGreaterThan(0);
  });

  it('a retry with the same requestId and incarnation gets the same grant; without incarnation it is lease_held', async () => {
    const a = app('retry');
    const g = ok(await api().acquire({ app: a, nodeId: 'n1', requestId: 'r1', incarnation: 'i1' }));
    const again = ok(await api().acquire({ app: a, nodeId: 'n1', requestId: 'r1', incarnation: 'i1' }));
    expect(again).toMatchObject({ workerId: g.workerId, token: g.token, retried: true });
    refused(
      await api().acquire({ app: a, nodeId: 'n1', requestId: 'r1', incarnation: 'other' }),
      'lease_held',
    );
    refused(await api().acquire({ app: a, nodeId: 'n1', requestId: 'r2', incarnation: 'i1' }), 'lease_held');
    const b = app('noinc');
    ok(await api().acquire({ app: b, nodeId: 'n1', requestId: 'r1' }));
    refused(await api().acquire({ app: b, nodeId: 'n1', requestId: 'r1' }), 'lease_held');
  });

  it('renew raises the high-water mark; stale and unknown tokens are refused', async () => {
    const a = app('renew');
    const g = ok(await api().acquire({ app: a, nodeId: 'n1', requestId: 'r1', incarnation: 'i' }));
    const bound = now() + 5_000;
    const r = ok(await api().renew(a, 0, { token: g.token as number, boundMs: bound }));
    expect(r).toMatchObject({ token: g.token, boundMs: bound, logged: true });
    const r2 = ok(await api().renew(a, 0, { token: g.token as number, boundMs: bound - 1 }));
    expect(r2).toMatchObject({ boundMs: bound, logged: false });
    refused(await api().renew(a, 0, { token: (g.token as number) + 1000 }), 'stale_token');
    refused(await api().renew(a, 5, { token: 1 }), 'not_held');
    refused(
      await api().renew(a, 0, { token: g.token as number, boundMs: now() + 7_200_000 }),
      'invalid_argument',
    );
  });

  it('release frees the ID, a retried release is recognised, and the next holder starts above every mark', async () => {
    const a = app('rel');
    const g = ok(
      await api().acquire({ app: a, nodeId: 'n1', requestId: 'r1', incarnation: 'i', boundMs: now() + 1000 }),
    );
    const t = g.token as number;
    ok(await api().renew(a, 0, { token: t, boundMs: now() + 2000 }));
    const last = now() + 3000;
    const rel = ok(await api().release(a, 0, { token: t, lastTimestampMs: last }));
    expect(rel).toMatchObject({ highWaterMs: last, alreadyReleased: false });
    const rel2 = ok(await api().release(a, 0, { token: t, lastTimestampMs: last }));
    expect(rel2.alreadyReleased).toBe(true);
    refused(await api().renew(a, 0, { token: t }), 'not_held');
    // The same holder gets its worker ID back, with a larger token and the floor at the last mark.
    const g2 = ok(await api().acquire({ app: a, nodeId: 'n1', requestId: 'r2', incarnation: 'i2' }));
    expect(g2.workerId).toBe(0);
    expect(g2.token as number).toBeGreaterThan(t);
    expect(g2.highWaterMs).toBe(last);
    const w = ok(await api().get(a, 0));
    expect(w).toMatchObject({ floorMs: last, highWaterMs: last, live: true });
    refused(await api().release(a, 0, { token: t }), 'stale_token');
  });

  it('pool_exhausted when every worker ID is leased; configurePool refuses changes it must not make', async () => {
    const a = app('pool');
    expect(ok(await api().configurePool(a, 1))).toMatchObject({ size: 2, created: true });
    ok(await api().acquire({ app: a, nodeId: 'n1' }));
    ok(await api().acquire({ app: a, nodeId: 'n2' }));
    refused(await api().acquire({ app: a, nodeId: 'n3' }), 'pool_exhausted');
    refused(await api().configurePool(a, 2), 'pool_busy');
    const b = app('split');
    ok(await api().configurePool(b, 4, 1));
    const g = ok(await api().acquire({ app: b, nodeId: 'n1' }));
    ok(await api().release(b, g.workerId as number, { token: g.token as number }));
    refused(await api().configurePool(b, 4, 2), 'pool_split_fixed');
    expect(ok(await api().configurePool(b, 4, 1)).changed).toBe(false);
  });

  it('the first acquire naming a layout pins it for the app', async () => {
    const a = app('layout');
    ok(await api().acquire({ app: a, nodeId: 'n1', layout: 'L1' }));
    refused(await api().acquire({ app: a, nodeId: 'n2', layout: 'L2' }), 'layout_mismatch');
    expect(ok(await api().acquire({ app: a, nodeId: 'n3', layout: 'L1' })).layout).toBe('L1');
  });

  it('a lease nobody renews expires on the serving node, and its ID is granted again with a larger token', async () => {
    const a = app('exp');
    ok(await api().configurePool(a, 1));
    const g = ok(await api().acquire({ app: a, nodeId: 'n1', ttlMs: 1000, boundMs: now() + 500 }));
    ok(await api().acquire({ app: a, nodeId: 'n2', ttlMs: 60_000 }));
    const until = Date.now() + 15_000;
    for (;;) {
      const w = ok(await api().get(a, g.workerId as number));
      if (!w.live) break;
      if (Date.now() > until) throw new Error('lease not expired within 15 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const r = await api().renew(a, g.workerId as number, { token: g.token as number });
    expect(r.ok ? 'ok' : r.code).toMatch(/^(not_held|lease_expired)$/);
    const g3 = ok(await api().acquire({ app: a, nodeId: 'n3' }));
    expect(g3.workerId).toBe(g.workerId);
    expect(g3.token as number).toBeGreaterThan(g.token as number);
    expect(g3.highWaterMs as number).toBeGreaterThanOrEqual(g.boundMs as number);
  });

  it('holder health: renewals are refused (lease_unhealthy) once the health URL fails its probes; bad URLs are refused', async () => {
    let healthy = true;
    const server = createServer((_req, res) => {
      res.writeHead(healthy ? 200 : 503).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const healthUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/health`;
      const a = app('health');
      const g = ok(await api().acquire({ app: a, nodeId: 'n1', ttlMs: 60_000, healthUrl }));
      const w = g.workerId as number;
      const token = g.token as number;
      ok(await api().renew(a, w, { token, healthUrl }));
      healthy = false;
      // Probed every second; refused after 3 failed probes in a row.
      const until = Date.now() + 20_000;
      for (;;) {
        const r = await api().renew(a, w, { token, healthUrl });
        if (!r.ok) {
          expect(r.code).toBe('lease_unhealthy');
          expect(r.status).toBe(409);
          break;
        }
        if (Date.now() > until)
          throw new Error('renewals still accepted 20 s after the holder became unhealthy');
        await new Promise((res) => setTimeout(res, 250));
      }
      // Nothing was expired early: the lease is still live until its deadline.
      expect(ok(await api().get(a, w)).live).toBe(true);
      refused(
        await api().acquire({ app: app('health-bad'), nodeId: 'n1', healthUrl: 'ftp://x/health' }),
        'invalid_argument',
      );
      refused(await api().renew(a, w, { token, healthUrl: 'not a url' }), 'invalid_argument');
    } finally {
      server.close();
    }
  }, 30_000);

  it('server-side Snowflake keys: create (idempotent, other settings refused), next, info, unknown key, pinned pool', async () => {
    const key = app('sf');
    const c = await api().snowflakeCreate({ key, layout: 'floe', ttlMs: 10_000 });
    expect(ok(c)).toMatchObject({ status: 201, created: true, layout: 'floe', ttlMs: 10_000 });
    expect(ok(await api().snowflakeCreate({ key, layout: 'floe', ttlMs: 10_000 }))).toMatchObject({
      status: 200,
      created: false,
    });
    refused(await api().snowflakeCreate({ key, layout: 'twitter', ttlMs: 10_000 }), 'exists');
    const n = ok(await api().snowflakeNext(key, 500));
    const ids = (n.ids as string[]).map(BigInt);
    expect(ids).toHaveLength(500);
    expect(new Set(ids).size).toBe(500);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    const n2 = ok(await api().snowflakeNext(key, 1));
    expect(BigInt((n2.ids as string[])[0]!) > ids.at(-1)!).toBe(true);
    expect(ok(await api().snowflakeInfo(key))).toMatchObject({ key, layout: 'floe', ttlMs: 10_000 });
    const missing = app('sf-missing');
    refused(await api().snowflakeNext(missing, 1), 'not_found');
    refused(await api().snowflakeInfo(missing), 'not_found');
    // A lease pool an SDK app pinned to another layout is not resized for a key of the same name.
    const pinned = app('sf-pinned');
    ok(await api().acquire({ app: pinned, nodeId: 'n1', layout: 'some-other-layout' }));
    const mismatch = await api().snowflakeCreate({ key: pinned, layout: 'floe' });
    refused(mismatch, 'layout_mismatch');
    expect(mismatch.status).toBe(409); // the error table's status, as on the lease routes (was 400)
  });

  it('bad input is refused naming the field', async () => {
    refused(await api().acquire({ app: 'bad app!', nodeId: 'n1' }), 'invalid_argument');
    refused(await api().acquire({ app: app('ttl'), nodeId: 'n1', ttlMs: 10 }), 'invalid_argument');
  });
}
