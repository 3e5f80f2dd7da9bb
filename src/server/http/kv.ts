// The small linearizable key-value and counter API (admin on '*' once auth is on: the root
// preHandler in auth.ts): an encapsulated plugin under /v1/kv and /v1/counters.
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { FloeNode } from '../../node/node.js';
import { encodeKvCommand, type KvResult, type KvStateMachine } from '../../state/kv-state-machine.js';
import type { RouteHelpers } from './auth.js';
import { errors, int, nameParam, obj, READ_ERRORS, str, WRITE_ERRORS } from './schemas.js';

export interface KvPluginOptions {
  node: FloeNode<unknown>;
  kv: KvStateMachine;
  fail: RouteHelpers['fail'];
}

// ---- schemas --------------------------------------------------------------------------------

const keyParams = obj({ key: nameParam('1..1024 bytes') }, ['key']);
const nullableStr = { anyOf: [{ type: 'string' }, { type: 'null' }] } as const;
const kvResult = obj({ ok: { type: 'boolean' }, value: nullableStr }, [], 'the result of a write');
const kvErrors = errors(400, 401, 403, 409, ...WRITE_ERRORS);
const putMessage = 'body must be {"value": string}';
const casMessage = 'body must be {"expect": string|null, "value": string}';

// ---- routes ---------------------------------------------------------------------------------

export const kvPlugin: FastifyPluginAsync<KvPluginOptions> = async (app, { node, kv, fail }) => {
  const kvReply = (reply: FastifyReply, r: KvResult): FastifyReply => {
    if (r.ok) return reply.send(r);
    const code = r.error === 'compare failed' ? 409 : 400;
    return reply
      .code(code)
      .send({ error: code === 409 ? 'compare_failed' : 'bad_request', message: r.error, value: r.value });
  };
  const keyOk = (key: string) => key.length > 0 && Buffer.byteLength(key) <= 1024;
  const badKey = (reply: FastifyReply) =>
    reply.code(400).send({ error: 'bad_request', message: 'key must be 1..1024 bytes' });

  app.put<{ Params: { key: string }; Body: { value: string } }>(
    '/v1/kv/:key',
    {
      schema: {
        tags: ['kv'],
        summary: 'Put a value (a Raft write)',
        params: keyParams,
        body: obj({ value: str }, ['value']),
        response: { 200: kvResult, ...kvErrors },
      },
      config: { badInput: { messages: { value: putMessage } } },
    },
    async (req, reply) => {
      if (!keyOk(req.params.key)) return badKey(reply);
      try {
        return kvReply(
          reply,
          (await node.propose(
            encodeKvCommand({ op: 'put', key: req.params.key, value: req.body.value }),
          )) as KvResult,
        );
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.post<{ Params: { key: string }; Body: { expect: string | null; value: string } }>(
    '/v1/kv/:key/cas',
    {
      schema: {
        tags: ['kv'],
        summary: 'Compare and set: 409 compare_failed with the current value when it is not `expect`',
        params: keyParams,
        body: obj({ expect: { ...nullableStr, description: 'null: the key must not exist' }, value: str }, [
          'expect',
          'value',
        ]),
        response: { 200: kvResult, ...kvErrors },
      },
      config: { badInput: { messages: { expect: casMessage, value: casMessage } } },
    },
    async (req, reply) => {
      const { expect, value } = req.body;
      if (!keyOk(req.params.key)) return badKey(reply);
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
    {
      schema: {
        tags: ['kv'],
        summary: 'Read a value (linearizable unless ?consistency=serializable)',
        params: keyParams,
        querystring: obj({
          consistency: {
            type: 'string',
            description: '`serializable`: answer from this node without a linearizable read',
          },
        }),
        response: {
          200: obj({ key: str, value: nullableStr, applied: int }),
          ...errors(401, 403, ...READ_ERRORS),
        },
      },
    },
    async (req, reply) => {
      try {
        if (req.query.consistency !== 'serializable') await node.linearizableRead();
        return { key: req.params.key, value: kv.get(req.params.key), applied: node.status().appliedIndex };
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  const byMessage = 'by must be an integer';
  app.post<{ Params: { key: string }; Body: { by?: number | string } }>(
    '/v1/counters/:key/incr',
    {
      schema: {
        tags: ['kv'],
        summary: 'Add `by` (default 1) to a 64-bit counter',
        params: keyParams,
        body: obj({
          by: {
            description: 'an integer in [-2^63, 2^63-1], as a number or a decimal string',
            anyOf: [{ type: 'integer' }, { type: 'string', pattern: '^-?\\d{1,19}$' }],
          },
        }),
        response: { 200: obj({ ok: { type: 'boolean' }, value: str }), ...kvErrors },
      },
      config: { badInput: { messages: { by: byMessage } } },
    },
    async (req, reply) => {
      const by = req.body?.by ?? 1;
      if (!keyOk(req.params.key)) return badKey(reply);
      if (!(typeof by === 'number' && Number.isSafeInteger(by)) && typeof by !== 'string')
        return reply.code(400).send({ error: 'bad_request', message: byMessage });
      // Out of int64 is refused here, not at apply (nothing invalid reaches the log).
      const big = BigInt(by);
      if (big > 2n ** 63n - 1n || big < -(2n ** 63n))
        return reply
          .code(400)
          .send({ error: 'bad_request', message: 'by must be an integer in [-2^63, 2^63-1]' });
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

  app.get<{ Params: { key: string } }>(
    '/v1/counters/:key',
    {
      schema: {
        tags: ['kv'],
        summary: 'Read a counter (linearizable)',
        params: keyParams,
        response: { 200: obj({ key: str, value: str }), ...errors(401, 403, ...READ_ERRORS) },
      },
    },
    async (req, reply) => {
      try {
        await node.linearizableRead();
        return { key: req.params.key, value: kv.counter(req.params.key) };
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );
};
