// A one-node cluster with the real HTTP API and the cluster identity, for the cluster identity's tests (no disk).

import { createServer, type Server } from 'node:http';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
import type { FloeNode } from '../node/node.js';
import type { FloeStateMachine } from '../state/floe-state-machine.js';
import type { LeaseExport } from '../store/migrate.js';
import { ClusterIdentityKeeper } from './cluster-identity.js';
import type { FloeServices } from './floe-services.js';
import { startHttpAdmin } from './http-admin.js';
import { memorySingleNode } from './test-node.js';

/** Where a test registers what its afterEach stops (in reverse). */
export type Stops = Array<() => Promise<void>>;

export interface IdentityClusterOptions {
  /** False plays the window before the UUID is applied (no keeper until `startKeeper`). Default true. */
  keeper?: boolean;
  /** The cluster secret its HTTP API proves its UUID under. Default 'secret-a'. */
  secret?: string;
  /** What the HTTP API sees of the node (a test's follower view). */
  wrap?: (n: FloeNode<unknown>) => FloeNode<unknown>;
  /** More services for the HTTP API (sequences, a store), given the node it sees and the state. */
  services?: (served: FloeNode<unknown>, state: FloeStateMachine) => Partial<FloeServices>;
}

export async function identityCluster(stops: Stops, o: IdentityClusterOptions = {}) {
  const { node, state } = memorySingleNode();
  const leases = new LeaseService({ node: leaseNodeOf(node), state: state.leases });
  const keeperOf = () => new ClusterIdentityKeeper({ node: leaseNodeOf(node), state: state.cluster });
  let keeper = (o.keeper ?? true) ? keeperOf() : undefined;
  const served = o.wrap ? o.wrap(node) : node;
  const app = await startHttpAdmin({
    node: served,
    kv: state.kv,
    services: {
      node: served,
      leases,
      auth: state.auth,
      clusterUid: () => state.cluster.uid,
      ...o.services?.(served, state),
    },
    clusterSecret: o.secret ?? 'secret-a',
    host: '127.0.0.1',
    port: 0,
  });
  node.start();
  await node.waitForLeader();
  await leases.whenReady();
  stops.push(async () => {
    keeper?.close();
    leases.close();
    await node.stop('test over');
    await app.close();
  });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  const startKeeper = () => {
    keeper ??= keeperOf();
  };
  return { node, state, app, base: `127.0.0.1:${addr.port}`, startKeeper };
}

/** Resolves with the UUID once `state.cluster` names one (its onKnown event). */
export function knownUid(state: FloeStateMachine): Promise<string> {
  return new Promise((resolve) => {
    if (state.cluster.uid !== undefined) resolve(state.cluster.uid);
    else state.cluster.onKnown(resolve);
  });
}

/** Listens on a free 127.0.0.1 port; returns `host:port`. */
export async function listenLocal(stops: Stops, server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  stops.push(() => new Promise<void>((r) => server.close(() => r())));
  const a = server.address();
  if (!a || typeof a === 'string') throw new Error('no address');
  return `127.0.0.1:${a.port}`;
}

/** An export of one app (`svc`, 16 worker IDs) with one marked worker ID, as import-api takes it. */
export function oneAppExport(): LeaseExport {
  return {
    format: 'floe-leases',
    version: 2,
    source: ['test'],
    pools: [
      {
        app: 'svc',
        bits: 4,
        datacenterBits: 0,
        layout: '',
        records: [{ workerId: 3, highWaterMs: Date.now() - 60_000, floorMs: 0 }],
      },
    ],
    sequences: [],
    tombstones: [],
  } as unknown as LeaseExport;
}

/**
 * A follower of cluster `uid` that knows its UUID and redirects every other request (307) to a stale leader address,
 * `leaderBase`, that now reaches another cluster's node. Returns its `host:port`.
 */
export function staleFollower(stops: Stops, uid: string, leaderBase: string): Promise<string> {
  const server = createServer((req, res) => {
    res.setHeader('floe-cluster', uid);
    res.setHeader('content-type', 'application/json');
    if (req.method === 'GET' && req.url === '/v1/cluster') {
      res.end(JSON.stringify({ id: 2, cluster: uid, role: 'follower', leader: 1 }));
      return;
    }
    res.statusCode = 307;
    res.setHeader('location', `http://${leaderBase}${req.url}`);
    res.end(JSON.stringify({ error: 'not_leader', leader: { id: 1, httpAddr: leaderBase } }));
  });
  return listenLocal(stops, server);
}
