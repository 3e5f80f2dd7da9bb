// A node's HTTP API for the simulation, driven with Fastify's inject() (no socket).
//
// The lease and user routes are the production ones (registerFloeApi from src/server/http-api.ts).
// src/server/http-admin.ts cannot be used as it is: startHttpAdmin always listens on a real port
// and starts prom-client's default process metrics (an event-loop monitor per app). Until it is
// split into a build step and a listen step, the error mapping (`fail`) and the key-value/counter
// routes below are copies of its code, kept line for line so they can be swapped for the real ones.

import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import {
  NodeStoppedError,
  NotLeaderError,
  OverloadedError,
  ProposalTimeoutError,
  ReadTimeoutError,
} from '../../node/errors.js';
import type { FloeNode } from '../../node/node.js';
import type { FloeServices } from '../../server/floe-services.js';
import { registerFloeApi } from '../../server/http-api.js';
import { encodeKvCommand, type KvResult, type KvStateMachine } from '../../state/kv-state-machine.js';

export async function buildSimHttpApp(
  node: FloeNode<unknown>,
  kv: KvStateMachine,
  services: FloeServices,
): Promise<FastifyInstance> {
  const app = Fastify({ logger: false, bodyLimit: 128 * 1024 });

  // ---- copied from startHttpAdmin (src/server/http-admin.ts) --------------------------------
  const fail = (reply: FastifyReply, err: unknown, path: string): FastifyReply => {
    if (err instanceof NotLeaderError) {
      const body: { error: string; message: string; leader?: { id: number; httpAddr?: string } } = {
        error: 'not_leader',
        message: err.message,
      };
      if (err.leader) body.leader = { id: err.leader.id, httpAddr: err.leader.httpAddr };
      if (err.leader?.httpAddr) {
        return reply.code(307).header('location', `http://${err.leader.httpAddr}${path}`).send(body);
      }
      return reply.code(503).send(body);
    }
    if (err instanceof ProposalTimeoutError || err instanceof ReadTimeoutError)
      return reply.code(504).send({ error: 'timeout', message: err.message });
    if (err instanceof OverloadedError)
      return reply.code(429).send({ error: 'overloaded', message: err.message });
    if (err instanceof NodeStoppedError)
      return reply.code(503).send({ error: 'stopped', message: err.message });
    const message = err instanceof Error ? err.message : String(err);
    return reply.code(500).send({ error: 'internal', message });
  };

  const kvReply = (reply: FastifyReply, r: KvResult): FastifyReply => {
    if (r.ok) return reply.send(r);
    const code = r.error === 'compare failed' ? 409 : 400;
    return reply
      .code(code)
      .send({ error: code === 409 ? 'compare_failed' : 'bad_request', message: r.error, value: r.value });
  };

  registerFloeApi(app, services, fail);

  const keyOk = (key: string) => key.length > 0 && Buffer.byteLength(key) <= 1024;

  app.put<{ Params: { key: string }; Body: { value?: unknown } }>('/v1/kv/:key', async (req, reply) => {
    const value = req.body?.value;
    if (!keyOk(req.params.key))
      return reply.code(400).send({ error: 'bad_request', message: 'key must be 1..1024 bytes' });
    if (typeof value !== 'string')
      return reply.code(400).send({ error: 'bad_request', message: 'body must be {"value": string}' });
    try {
      return kvReply(
        reply,
        (await node.propose(encodeKvCommand({ op: 'put', key: req.params.key, value }))) as KvResult,
      );
    } catch (err) {
      return fail(reply, err, req.url);
    }
  });

  app.post<{ Params: { key: string }; Body: { expect?: unknown; value?: unknown } }>(
    '/v1/kv/:key/cas',
    async (req, reply) => {
      const { expect, value } = req.body ?? {};
      if (!keyOk(req.params.key))
        return reply.code(400).send({ error: 'bad_request', message: 'key must be 1..1024 bytes' });
      if (typeof value !== 'string' || (expect !== null && typeof expect !== 'string'))
        return reply
          .code(400)
          .send({ error: 'bad_request', message: 'body must be {"expect": string|null, "value": string}' });
      try {
        return kvReply(
          reply,
          (await node.propose(
            encodeKvCommand({ op: 'cas', key: req.params.key, expect, value }),
          )) as KvResult,
        );
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.get<{ Params: { key: string }; Querystring: { consistency?: string } }>(
    '/v1/kv/:key',
    async (req, reply) => {
      try {
        if (req.query.consistency !== 'serializable') await node.linearizableRead();
        return { key: req.params.key, value: kv.get(req.params.key), applied: node.status().appliedIndex };
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.post<{ Params: { key: string }; Body: { by?: unknown } }>(
    '/v1/counters/:key/incr',
    async (req, reply) => {
      const by = req.body?.by ?? 1;
      if (!keyOk(req.params.key))
        return reply.code(400).send({ error: 'bad_request', message: 'key must be 1..1024 bytes' });
      if (
        !(typeof by === 'number' && Number.isSafeInteger(by)) &&
        !(typeof by === 'string' && /^-?\d{1,19}$/.test(by))
      )
        return reply.code(400).send({ error: 'bad_request', message: 'by must be an integer' });
      try {
        return kvReply(
          reply,
          (await node.propose(
            encodeKvCommand({ op: 'incr', key: req.params.key, by: String(by) }),
          )) as KvResult,
        );
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.get<{ Params: { key: string } }>('/v1/counters/:key', async (req, reply) => {
    try {
      await node.linearizableRead();
      return { key: req.params.key, value: kv.counter(req.params.key) };
    } catch (err) {
      return fail(reply, err, req.url);
    }
  });
  // ---- end of the copy ------------------------------------------------------------------------

  await app.ready();
  return app;
}
