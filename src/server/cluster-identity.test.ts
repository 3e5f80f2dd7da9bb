// The cluster identity (review of FS-19): the first leader mints a UUID into the replicated state; every HTTP answer
// names it (`floe-cluster`), so that the SDK can refuse another cluster's answers. A real FloeClient against the real
// HTTP API of two in-process single-node clusters.
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { CLUSTER_UID_HEADER } from '../client/cluster-pin.js';
import { FloeUnavailableError, ReplyMismatchError } from '../client/errors.js';
import { FloeClient } from '../client/floe-client.js';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
import { encodeClusterInit } from '../state/cluster/cluster-identity.js';
import { FloeStateMachine } from '../state/floe-state-machine.js';
import { ClusterIdentityKeeper } from './cluster-identity.js';
import { startHttpAdmin } from './http-admin.js';
import { memorySingleNode } from './test-node.js';

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

/** A one-node cluster with the real HTTP API on a free port and the keeper minting its UUID. */
async function cluster(): Promise<{ base: string; uid: string; app: FastifyInstance }> {
  const { node, state } = memorySingleNode();
  const leases = new LeaseService({ node: leaseNodeOf(node), state: state.leases });
  const keeper = new ClusterIdentityKeeper({ node: leaseNodeOf(node), state: state.cluster });
  const known = new Promise<string>((resolve) => state.cluster.onKnown(resolve));
  const app = await startHttpAdmin({
    node,
    kv: state.kv,
    services: { node, leases, auth: state.auth, clusterUid: () => state.cluster.uid },
    host: '127.0.0.1',
    port: 0,
  });
  node.start();
  await node.waitForLeader();
  await leases.whenReady();
  const uid = await known;
  stops.push(async () => {
    keeper.close();
    leases.close();
    await node.stop('test over');
    await app.close();
  });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return { base: `127.0.0.1:${addr.port}`, uid, app };
}

describe('cluster identity over HTTP', () => {
  it('the first leader mints a UUID; every answer names it, errors and unknown routes included', async () => {
    const a = await cluster();
    expect(a.uid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    for (const url of ['/v1/cluster', '/v1/no-such-route', '/v1/apps/svc/workers/99/renew']) {
      const res = await a.app.inject({
        method: url.endsWith('renew') ? 'POST' : 'GET',
        url,
        payload: url.endsWith('renew') ? {} : undefined,
      });
      expect(res.headers[CLUSTER_UID_HEADER], url).toBe(a.uid);
    }
    const view = (await a.app.inject({ method: 'GET', url: '/v1/cluster' })).json() as { cluster: string };
    expect(view.cluster).toBe(a.uid);
  });

  it('a client pinned to cluster A whose first endpoint reaches cluster B gets its lease from A only', async () => {
    const a = await cluster();
    const b = await cluster();
    expect(a.uid).not.toBe(b.uid);
    const client = new FloeClient({ endpoints: [b.base, a.base], clusterUid: a.uid });
    const lease = await client.leaseWorker({ app: 'svc', nodeId: 'host-1' });
    stops.push(async () => {
      await lease.release().catch(() => {});
    });
    // The acquire ran on B too (B granted a lease there, which nobody uses: it expires); its answer was refused. The
    // lease the client holds is A's.
    const leasesOf = async (c: { app: FastifyInstance }) =>
      (
        (await c.app.inject({ method: 'GET', url: '/v1/apps/svc/workers' })).json() as {
          leases: { token: number }[];
        }
      ).leases;
    expect(client.transport.cluster.refused).toBe(1);
    expect((await leasesOf(a)).map((l) => l.token)).toEqual([lease.token]);
    expect(client.clusterUid).toBe(a.uid);
  });

  it('a client pinned to A whose only endpoint is B is never granted a lease (fails unavailable, cause: cluster)', async () => {
    const a = await cluster();
    const b = await cluster();
    const client = new FloeClient({ endpoints: [b.base], clusterUid: a.uid });
    const err = await client
      .leaseWorker({ app: 'svc', nodeId: 'host-1', acquireTimeoutMs: 1000 })
      .catch((e) => e);
    expect(err).toBeInstanceOf(FloeUnavailableError);
    expect((err as FloeUnavailableError).cause).toBeInstanceOf(ReplyMismatchError);
    expect(String((err as Error).message)).toMatch(/cluster/);
  });
});

describe('ClusterIdentityStateMachine in the replicated state', () => {
  const ctx = { index: 1, term: 1, leaderTimeMs: 0 };
  const X = '11111111-2222-4333-8444-555555555555';
  const Y = '66666666-7777-4888-9999-aaaaaaaaaaaa';

  it('the first init applied wins; a later one changes nothing; a malformed one is refused', () => {
    const sm = new FloeStateMachine();
    expect(sm.apply(encodeClusterInit(X), ctx)).toMatchObject({ ok: true, uid: X, minted: true });
    expect(sm.apply(encodeClusterInit(Y), ctx)).toMatchObject({ ok: true, uid: X, minted: false });
    expect(sm.apply(encodeClusterInit('not-a-uuid'), ctx)).toMatchObject({
      ok: false,
      code: 'invalid_argument',
    });
    expect(sm.cluster.uid).toBe(X);
  });

  it('a snapshot carries the UUID; without one the snapshot bytes are as before (older versions read them)', () => {
    const before = new FloeStateMachine().snapshot();
    const sm = new FloeStateMachine();
    expect(Buffer.from(sm.snapshot()).equals(Buffer.from(before))).toBe(true);
    sm.apply(encodeClusterInit(X), ctx);
    const copy = new FloeStateMachine();
    copy.restore(sm.snapshot());
    expect(copy.cluster.uid).toBe(X);
    // A restore never drops nor replaces a known UUID (a snapshot without one is an older version's).
    copy.restore(before);
    expect(copy.cluster.uid).toBe(X);
  });

  // Regression (review of the cluster identity, finding 4): in a rolling upgrade from a version without the identity,
  // a new replica that installed an old leader's snapshot forgot X, and the next leader's Y became its UUID only.
  it('mixed versions: an older leader snapshot does not make a replica forget the UUID; replicas stay on one', () => {
    const r1 = new FloeStateMachine();
    const r2 = new FloeStateMachine();
    const old = new FloeStateMachine(); // stands for an older node: its snapshot has no cluster section
    r1.apply(encodeClusterInit(X), ctx);
    r2.apply(encodeClusterInit(X), ctx);
    r2.restore(old.snapshot());
    r1.apply(encodeClusterInit(Y), ctx);
    r2.apply(encodeClusterInit(Y), ctx);
    expect(r2.cluster.uid).toBe(X);
    expect(r1.cluster.uid).toBe(X);
  });

  it('a leader that knows no UUID proposes the one its members name before minting a new one', async () => {
    const proposed: string[] = [];
    const sm = new FloeStateMachine();
    const keeper = new ClusterIdentityKeeper({
      node: {
        isLeader: () => true,
        onRoleChange: () => () => {},
        propose: async (cmd) => {
          const r = sm.apply(cmd, ctx) as { uid: string };
          proposed.push(r.uid);
          return r;
        },
      },
      state: sm.cluster,
      mint: () => Y,
      askMembers: async () => [undefined, X, 'garbage'],
    });
    await until(() => sm.cluster.uid);
    keeper.close();
    expect(proposed).toEqual([X]);
  });
});

async function until<T>(probe: () => T | undefined): Promise<T> {
  for (let i = 0; i < 1000; i++) {
    const v = probe();
    if (v !== undefined) return v;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error('never');
}
