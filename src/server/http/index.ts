// The node's HTTP routes, the fastify way (issue 13): one encapsulated plugin per concern, each
// route with JSON schemas for its params, query string, body and replies (validated by fastify's
// Ajv before the handler; docs/openapi.yaml is generated from them by scripts/gen-openapi.ts).
// The hooks that guard every route (authentication, the admin gate) stay on the root app (auth.ts).
import type { FastifyInstance, FastifyReply } from 'fastify';
import { NotLeaderError } from '../../node/errors.js';
import type { FloeNode } from '../../node/node.js';
import type { KvStateMachine } from '../../state/kv-state-machine.js';
import { addClusterUidHeader } from '../cluster-identity.js';
import type { FloeServices } from '../floe-services.js';
import { type MemberHints, sendHttpError } from '../http-errors.js';
import type { NodeMetrics } from '../metrics.js';
import { type RouteHelpers, registerAuth } from './auth.js';
import { CLUSTER_VIEW_SCHEMA_ID, clusterPlugin, clusterViewSchema } from './cluster.js';
import { healthPlugin } from './health.js';
import { kvPlugin } from './kv.js';
import { LEASE_SCHEMA_ID, leaseSchema, leasesPlugin } from './leases.js';
import { errorSchema } from './schemas.js';
import { sequencesPlugin } from './sequences.js';
import { snowflakesPlugin } from './snowflakes.js';
import { usersPlugin } from './users.js';

export type { RouteHelpers } from './auth.js';
export { addressProof } from './cluster.js';

export interface HttpRoutesOptions {
  node: FloeNode<unknown>;
  kv: KvStateMachine;
  services?: FloeServices;
  clusterSecret?: string;
  registry: NodeMetrics['registry'];
}

/**
 * Each route plugin carries its name for Fastify (the display name fastify-plugin sets): without one, Fastify looks
 * the function up among every loaded CommonJS module at each `register` (twice), a cost at every app build that
 * grows with the modules loaded, before it falls back to the function's name. That name is the one given here.
 */
for (const plugin of [
  sequencesPlugin,
  snowflakesPlugin,
  leasesPlugin,
  usersPlugin,
  healthPlugin,
  clusterPlugin,
  kvPlugin,
]) {
  Object.defineProperty(plugin, Symbol.for('fastify.display-name'), { value: plugin.name });
}

/**
 * Adds the hooks and route plugins to `app`. The plugins load when the app gets ready (`listen`,
 * `inject`, `ready`), after every root hook is in place, so they run behind all of them.
 */
export function registerHttpRoutes(app: FastifyInstance, o: HttpRoutesOptions): void {
  app.addSchema(errorSchema);
  app.addSchema({ $id: LEASE_SCHEMA_ID, ...leaseSchema });
  app.addSchema({ $id: CLUSTER_VIEW_SCHEMA_ID, ...clusterViewSchema });
  const hints = (): MemberHints => memberHints(o.node);
  const fail: RouteHelpers['fail'] = (reply, err, path) => sendHttpError(reply, err, path, hints);
  // Lease calls are served by the Raft leader, or on the etcd store by its active node; the others redirect.
  const store = o.services?.store;
  const servesLeases = () => (store?.routing ? store.routing.isActive() : o.node.isLeader);
  // Before it knows the UUID, a node that cannot act on a request naming a cluster sends it where it could be acted on.
  const redirectUnvouched = (reply: FastifyReply, url: string): boolean => {
    const to = store?.routing ? store.routing.active() : o.node.leaderHint();
    if (to?.httpAddr === undefined || to.id === o.node.id) return false;
    sendHttpError(reply, new NotLeaderError(o.node.id, to), url, hints);
    return true;
  };
  if (o.services?.clusterUid)
    addClusterUidHeader(
      app,
      o.services.clusterUid,
      servesLeases,
      () => servesLeases() || o.node.isLeader,
      redirectUnvouched,
    );
  if (o.services) {
    const helpers = registerAuth(app, o.services, fail);
    if (o.services.sequences) app.register(sequencesPlugin, { sequences: o.services.sequences, helpers });
    if (o.services.snowflakes) app.register(snowflakesPlugin, { snowflakes: o.services.snowflakes, helpers });
    app.register(leasesPlugin, { services: o.services, helpers });
    app.register(usersPlugin, { services: o.services, helpers });
  }
  app.register(healthPlugin, {
    node: o.node,
    registry: o.registry,
    ...(o.services?.clusterUid ? { clusterUid: o.services.clusterUid, servesLeases } : {}),
  });
  app.register(clusterPlugin, {
    node: o.node,
    ...(o.services?.clusterUid ? { clusterUid: o.services.clusterUid } : {}),
    clusterSecret: o.clusterSecret,
    remoteAllocServed: !store?.routing,
    fail,
  });
  app.register(kvPlugin, { node: o.node, kv: o.kv, fail });
}

/**
 * The members `node` knows an HTTP address of, by id, itself left out, and whether it is in the configuration it knows.
 * A member's directory follows the replicated configuration; a process that never joined knows only the members it
 * was started with (`--initial-cluster`), which is what its operator said the cluster is.
 */
export function memberHints(node: FloeNode<unknown>): MemberHints {
  const st = node.status();
  const members: MemberHints['members'] = [];
  for (const m of st.members)
    if (m.id !== node.id && m.httpAddr) members.push({ id: m.id, httpAddr: m.httpAddr });
  return { members, isMember: st.conf.voters.includes(node.id) || st.conf.learners.includes(node.id) };
}
