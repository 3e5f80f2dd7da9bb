// Review round 3 of issue 9: a refused SNOWFLAKE.CREATE must leave the key's lease pool (and an SDK app of the same
// name) untouched. The SDK talks to a real lease state machine through a fetch stand-in (no network).
import { describe, expect, it } from 'vitest';
import { FloeClient } from '../client/floe-client.js';
import type { FetchLike } from '../client/http-transport.js';
import { encodeLeaseCommand } from '../state/leases/codec.js';
import { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import type { LeaseCommand, LeaseResult } from '../state/leases/types.js';
import { SnowflakeKeysStateMachine } from '../state/snowflakes/snowflake-keys.js';
import { SnowflakeService } from './snowflake-service.js';

function world() {
  const leases = new LeaseStateMachine();
  const keys = new SnowflakeKeysStateMachine();
  let index = 0;
  const ctx = () => ({ index: ++index, term: 1, leaderTimeMs: Date.now() });
  const run = (cmd: LeaseCommand) => leases.apply(encodeLeaseCommand(cmd), ctx()) as LeaseResult;
  const fetch: FetchLike = async (url, init) => {
    const body = JSON.parse(String(init.body)) as Record<string, unknown>;
    const m = /\/v1\/apps\/([^/]+)\/workers\/(?:(\d+)\/)?(\w+)$/.exec(new URL(url).pathname);
    if (!m) throw new Error(`unexpected ${url}`);
    const app = decodeURIComponent(m[1] as string);
    const r =
      m[3] === 'acquire'
        ? run({ op: 'acquire', app, ...body } as LeaseCommand)
        : run({
            op: m[3],
            app,
            workerId: Number(m[2]),
            lastTimestampMs: 0,
            boundMs: 0,
            ...body,
          } as unknown as LeaseCommand);
    const text = JSON.stringify(r.ok ? r : { error: r.code, message: r.message });
    return { status: r.ok ? 200 : 409, headers: { get: () => null }, text: async () => text };
  };
  const service = () =>
    new SnowflakeService({
      state: keys,
      propose: async (c) => keys.apply(c, ctx()),
      configurePool: async (app, bits, datacenterBits) => {
        const r = run({ op: 'configurePool', app, bits, datacenterBits });
        return r.ok ? { ok: true } : { ok: false, message: r.message };
      },
      pinnedLayout: (app) => leases.pool(app)?.layout || undefined,
      client: new FloeClient({ endpoints: ['127.0.0.1:1'], fetch }),
      holder: 'floe-node-1',
    });
  return { leases, service, fetch };
}

describe('SnowflakeService.create', () => {
  it('a repeated create with another layout is refused before the pool is touched; the key keeps working', async () => {
    const w = world();
    const svc = w.service();
    await svc.create('k', 'floe', 10_000);
    expect(await svc.next('k', 2)).toHaveLength(2);
    await svc.close();
    const before = w.leases.pool('k');
    await expect(svc.create('k', 'sonyflake', 10_000)).rejects.toThrow(/exists with another layout or TTL/);
    // Before the fix the pool had become 16 bits, and every later lease of the key failed (layout misfit).
    expect(w.leases.pool('k')).toEqual(before);
    expect(await w.service().next('k', 1)).toHaveLength(1);
  });

  it('a key named like an SDK app pinned to another layout is refused, and the app is left alone', async () => {
    const w = world();
    const sdk = new FloeClient({ endpoints: ['127.0.0.1:1'], fetch: w.fetch });
    const l = await sdk.leaseWorker({ app: 'orders', nodeId: 'shop-1', ttlMs: 10_000 });
    l.snowflake().next();
    const before = w.leases.pool('orders');
    await expect(w.service().create('orders', 'sonyflake', 10_000)).rejects.toThrow(
      /pinned to another ID layout/,
    );
    expect(w.leases.pool('orders')).toEqual(before);
    await l.release();
  });
});

describe('SnowflakeService.create, concurrent (round 4)', () => {
  it('two creates of one key with different layouts at once: one wins, the pool fits its layout', async () => {
    const w = world();
    const svc = w.service();
    const results = await Promise.allSettled([
      svc.create('k', 'floe', 10_000),
      svc.create('k', 'sonyflake', 10_000),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected']);
    expect(w.leases.pool('k')).toMatchObject({ bits: 10, datacenterBits: 0 });
    expect(await svc.next('k', 1)).toHaveLength(1);
    await svc.close();
  });
});
