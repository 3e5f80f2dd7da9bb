// Probes and metrics, open to anyone (auth.ts): liveness, readiness and Prometheus.
import type { FastifyPluginAsync } from 'fastify';
import type { FloeNode } from '../../node/node.js';
import type { NodeMetrics } from '../metrics.js';
import { bool, int, obj, str } from './schemas.js';

export interface HealthPluginOptions {
  node: FloeNode<unknown>;
  registry: NodeMetrics['registry'];
}

const readiness = obj({ ready: bool, lead: int, commit: int, applied: int });

export const healthPlugin: FastifyPluginAsync<HealthPluginOptions> = async (app, { node, registry }) => {
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
        summary: 'Readiness: a leader is known and this node applied everything committed',
        response: { 200: readiness, 503: readiness },
      },
    },
    async (_req, reply) => {
      const s = node.status();
      const ready = !s.stopped && s.lead !== 0 && s.appliedIndex >= s.commit;
      if (!ready)
        return reply
          .code(503)
          .send({ ready: false, lead: s.lead, commit: s.commit, applied: s.appliedIndex });
      return { ready: true, lead: s.lead, commit: s.commit, applied: s.appliedIndex };
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
