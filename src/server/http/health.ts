// Probes and metrics, open to anyone (auth.ts): liveness, readiness and Prometheus.
import type { FastifyPluginAsync } from 'fastify';
import type { FloeNode } from '../../node/node.js';
import type { NodeMetrics } from '../metrics.js';
import { bool, int, obj, str } from './schemas.js';

export interface HealthPluginOptions {
  node: FloeNode<unknown>;
  registry: NodeMetrics['registry'];
  /** The cluster's UUID once known here: until then lease calls answer 503 not_ready, so the node is not ready. */
  clusterUid?: () => string | undefined;
  /**
   * Whether lease calls are served here (the leader): only there do they wait for the UUID. A follower redirects
   * them, so it is ready without it (under an older leader that never mints one, a rolling upgrade would stall).
   */
  servesLeases?: () => boolean;
}

const readiness = obj({
  ready: bool,
  lead: int,
  commit: int,
  applied: int,
  clusterKnown: { ...bool, description: "this node knows the cluster's UUID (docs/cluster-identity.md)" },
});

export const healthPlugin: FastifyPluginAsync<HealthPluginOptions> = async (
  app,
  { node, registry, clusterUid, servesLeases },
) => {
  app.get(
    '/healthz',
    {
      schema: {
        tags: ['health'],
        summary: 'Liveness: 503 once the node stopped',
        response: { 200: obj({ ok: bool }), 503: obj({ ok: bool, reason: str }) },
      },
    },
    async (_req, reply) => {
      const st = node.stopped;
      if (st) return reply.code(503).send({ ok: false, reason: st });
      return { ok: true };
    },
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['health'],
        summary:
          "Readiness: a leader is known, this node applied everything committed and, if it serves lease calls, knows the cluster's UUID",
        response: { 200: readiness, 503: readiness },
      },
    },
    async (_req, reply) => {
      const s = node.status();
      const clusterKnown = clusterUid === undefined || clusterUid() !== undefined;
      const gated = !clusterKnown && (servesLeases?.() ?? true);
      const ready = !s.stopped && s.lead !== 0 && s.appliedIndex >= s.commit && !gated;
      const body = { ready, lead: s.lead, commit: s.commit, applied: s.appliedIndex, clusterKnown };
      return ready ? body : reply.code(503).send(body);
    },
  );

  app.get(
    '/metrics',
    {
      schema: {
        tags: ['health'],
        summary: 'Prometheus metrics (docs/metrics.md)',
        response: {
          200: { description: 'Prometheus text format', content: { 'text/plain': { schema: str } } },
        },
      },
    },
    async (_req, reply) => {
      reply.header('content-type', registry.contentType);
      return registry.metrics();
    },
  );
};
