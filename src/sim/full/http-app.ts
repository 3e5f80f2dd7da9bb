// A node's HTTP API for the simulation: the production app of `floe serve` (buildHttpAdmin from
// src/server/http-admin.ts: every route, the error mapping, the hardening and limits), driven with
// Fastify's inject() (no socket is ever listened on). Left out: prom-client's default process
// metrics (an event-loop monitor per app) and the live dashboard; both only observe.

import type { FastifyInstance } from 'fastify';
import type { FloeNode } from '../../node/node.js';
import type { FloeServices } from '../../server/floe-services.js';
import { buildHttpAdmin } from '../../server/http-admin.js';
import type { KvStateMachine } from '../../state/kv-state-machine.js';

export async function buildSimHttpApp(
  node: FloeNode<unknown>,
  kv: KvStateMachine,
  services: FloeServices,
  clusterSecret: string,
): Promise<FastifyInstance> {
  const app = await buildHttpAdmin({
    node,
    kv,
    services,
    clusterSecret,
    defaultMetrics: false,
    dashboard: false,
  });
  await app.ready();
  return app;
}
