// Sequences over HTTP (docs/sequences.md): an encapsulated plugin with the JSON routes under
// /v1/sequences, and Leaf's `GET /api/segment/get/{key}`, which answers the value as plain text
// (and, as Leaf does, a 500 with `Result{id=-2, status=EXCEPTION}` for an unknown key). 64-bit
// values are decimal strings in JSON.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import {
  SequenceRefusedError,
  SequenceReplyMismatchError,
  type SequenceService,
} from '../../sequences/index.js';
import { MAX_ALLOC, type SequenceErrorCode } from '../../state/sequences/index.js';
import { httpStatusOf } from '../errors/table.js';
import type { RouteHelpers } from './auth.js';
import { bool, errors, int, leafTextSchema, nameParam, obj, str, WRITE_ERRORS } from './schemas.js';

/** HTTP status of each sequence refusal (from the error table). */
export const SEQUENCE_ERROR_STATUS: Record<SequenceErrorCode, number> = {
  bad_command: httpStatusOf('bad_command'),
  invalid_argument: httpStatusOf('invalid_argument'),
  not_found: httpStatusOf('not_found'),
  exists: httpStatusOf('exists'),
  exhausted: httpStatusOf('exhausted'),
  too_many_sequences: httpStatusOf('too_many_sequences'),
};

/** The most values one HTTP request may take (`?count=` / `count`). */
export const MAX_HTTP_BATCH = 10_000;

export interface SequencesPluginOptions {
  sequences: SequenceService;
  helpers: RouteHelpers;
}

// ---- schemas --------------------------------------------------------------------------------

const decimal = { type: 'string', pattern: '^-?\\d+$', description: 'a 64-bit integer as a decimal string' };
const info = obj(
  {
    key: str,
    next: decimal,
    max: decimal,
    step: int,
    minStep: int,
    maxStep: int,
    mode: { type: 'string', enum: ['strict', 'node'] },
  },
  [],
  'A sequence',
);
const keyParams = obj({ key: nameParam('the sequence key') }, ['key']);
const stale = obj({
  stale: { type: 'string', description: '`1`: answer from this node without a linearizable read' },
});
const countBody = obj({
  count: {
    description: `how many consecutive values, 1..${MAX_ALLOC} (default 1)`,
    anyOf: [{ type: 'integer' }, { type: 'string', pattern: '^\\d{1,10}$' }],
  },
});
const seqErrors = errors(400, 401, 403, 404, 409, 507, ...WRITE_ERRORS);

const createSchema = {
  tags: ['sequences'],
  summary: 'Create a sequence (needs admin on the key); 201 when created, 200 when it exists as asked',
  body: obj(
    {
      key: str,
      start: { description: 'first value', anyOf: [{ type: 'number' }, { type: 'string' }] },
      max: { description: 'last value', anyOf: [{ type: 'number' }, { type: 'string' }] },
      step: { type: 'number', description: 'segment size (fixed, or the adaptive start)' },
      minStep: { type: 'number' },
      maxStep: { type: 'number' },
      mode: { type: 'string', enum: ['strict', 'node'], description: 'strict (default) or node' },
    },
    ['key'],
  ),
  response: { 200: obj({ created: bool }, [], 'the sequence'), 201: obj({ created: bool }), ...seqErrors },
} as const;

const countMessage = (max: number) => `count must be an integer in [1, ${max}]`;

// ---- routes ---------------------------------------------------------------------------------

export const sequencesPlugin: FastifyPluginAsync<SequencesPluginOptions> = async (
  app,
  { sequences: seqs, helpers },
) => {
  const { may, fail, requires } = helpers;
  const keyOf = (req: FastifyRequest) => (req.params as { key: string }).key;
  const bodyKeyOf = (req: FastifyRequest) => {
    const k = (req.body as { key?: unknown } | undefined)?.key;
    return typeof k === 'string' ? k : undefined;
  };
  const seqFail = (reply: FastifyReply, err: unknown, path: string): FastifyReply => {
    if (err instanceof SequenceRefusedError)
      return reply
        .code(SEQUENCE_ERROR_STATUS[err.refusal.code] ?? 400)
        .send({ error: err.refusal.code, message: err.message });
    if (err instanceof SequenceReplyMismatchError)
      return reply
        .code(httpStatusOf('reply_mismatch'))
        .send({ error: 'reply_mismatch', message: err.message });
    return fail(reply, err, path);
  };
  const bad = (reply: FastifyReply, message: string) =>
    reply.code(400).send({ error: 'invalid_argument', message });
  /** A count from a query string or body: 1..max, or an error message. */
  const countOf = (v: unknown, max: number): number | string => {
    if (v === undefined) return 1;
    const n =
      typeof v === 'number' ? v : typeof v === 'string' && /^\d{1,10}$/.test(v) ? Number(v) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < 1 || n > max) return countMessage(max);
    return n;
  };

  type KeyParams = { key: string };
  type CreateBody = {
    key: string;
    start?: string | number;
    max?: string | number;
    step?: number;
    minStep?: number;
    maxStep?: number;
    mode?: 'strict' | 'node';
  };

  app.post<{ Body: CreateBody }>(
    '/v1/sequences',
    {
      schema: createSchema,
      preValidation: requires('admin', bodyKeyOf),
      config: {
        badInput: {
          code: 'invalid_argument',
          messages: {
            key: 'key must be a string',
            step: 'step must be an integer',
            minStep: 'minStep must be an integer',
            maxStep: 'maxStep must be an integer',
            start: 'start must be an integer (a number or a decimal string)',
            max: 'max must be an integer (a number or a decimal string)',
            mode: "mode must be 'strict' or 'node'",
          },
        },
      },
    },
    async (req, reply) => {
      const b = req.body;
      try {
        const r = await seqs.create(b.key, {
          start: b.start,
          max: b.max,
          step: b.step,
          minStep: b.minStep,
          maxStep: b.maxStep,
          mode: b.mode,
        });
        return reply.code(r.created ? 201 : 200).send({ created: r.created, ...r.info });
      } catch (err) {
        return seqFail(reply, err, req.url);
      }
    },
  );

  app.get<{ Querystring: { stale?: string } }>(
    '/v1/sequences',
    {
      schema: {
        tags: ['sequences'],
        summary: 'The sequences the user may read',
        querystring: stale,
        response: { 200: obj({ sequences: { type: 'array', items: info } }), ...errors(401, 503, 504) },
      },
    },
    async (req, reply) => {
      try {
        const all = await seqs.list({ stale: req.query.stale === '1' });
        return { sequences: all.filter((s) => may(req, s.key, 'read')) };
      } catch (err) {
        return seqFail(reply, err, req.url);
      }
    },
  );

  app.get<{ Params: KeyParams; Querystring: { stale?: string } }>(
    '/v1/sequences/:key',
    {
      preValidation: requires('read', keyOf),
      schema: {
        tags: ['sequences'],
        summary: 'One sequence (needs read on the key)',
        params: keyParams,
        querystring: stale,
        response: { 200: info, ...errors(401, 403, 404, 503, 504) },
      },
    },
    async (req, reply) => {
      try {
        const found = await seqs.info(req.params.key, { stale: req.query.stale === '1' });
        if (!found)
          return reply
            .code(404)
            .send({ error: 'not_found', message: `no sequence ${JSON.stringify(req.params.key)}` });
        return found;
      } catch (err) {
        return seqFail(reply, err, req.url);
      }
    },
  );

  app.delete<{ Params: KeyParams }>(
    '/v1/sequences/:key',
    {
      preValidation: requires('admin', keyOf),
      schema: {
        tags: ['sequences'],
        summary: 'Delete a sequence (needs admin on the key)',
        params: keyParams,
        response: { 200: obj({ deleted: bool, key: str }), ...seqErrors },
      },
    },
    async (req, reply) => {
      try {
        await seqs.delete(req.params.key);
        return { deleted: true, key: req.params.key };
      } catch (err) {
        return seqFail(reply, err, req.url);
      }
    },
  );

  const countConfig = {
    badInput: { code: 'invalid_argument', messages: { count: countMessage(MAX_ALLOC) } },
  } as const;

  /** `{count}` consecutive values; answers the range and the last value (INCRBY). */
  app.post<{ Params: KeyParams; Body: { count?: unknown } }>(
    '/v1/sequences/:key/incr',
    {
      preValidation: requires('issue', keyOf),
      schema: {
        tags: ['sequences'],
        summary: '`count` consecutive values (needs issue on the key)',
        params: keyParams,
        body: countBody,
        response: { 200: obj({ key: str, first: decimal, last: decimal, count: int }), ...seqErrors },
      },
      config: countConfig,
    },
    async (req, reply) => {
      const count = countOf(req.body?.count, MAX_ALLOC);
      if (typeof count === 'string') return bad(reply, count);
      try {
        const last = await seqs.incrBy(req.params.key, BigInt(count));
        return { key: req.params.key, first: String(last - BigInt(count) + 1n), last: String(last), count };
      } catch (err) {
        return seqFail(reply, err, req.url);
      }
    },
  );

  app.post<{ Params: KeyParams; Body: { count?: unknown } }>(
    '/v1/sequences/:key/alloc',
    {
      preValidation: requires('issue', keyOf),
      schema: {
        tags: ['sequences'],
        summary: 'A segment of `count` values for the caller to hand out (needs issue on the key)',
        params: keyParams,
        body: countBody,
        response: { 200: obj({ key: str, start: decimal, end: decimal }), ...seqErrors },
      },
      config: countConfig,
    },
    async (req, reply) => {
      const count = countOf(req.body?.count, MAX_ALLOC);
      if (typeof count === 'string') return bad(reply, count);
      try {
        const r = await seqs.alloc(req.params.key, count);
        return { key: r.key, start: r.start, end: r.end };
      } catch (err) {
        return seqFail(reply, err, req.url);
      }
    },
  );

  // Leaf's segment path: the ID as plain text; `?count=n` answers n consecutive IDs, one per line.
  app.get<{ Params: KeyParams; Querystring: { count?: string } }>(
    '/api/segment/get/:key',
    {
      preValidation: requires('issue', keyOf),
      schema: leafTextSchema(
        'sequences',
        "Leaf's segment path: the next value as plain text, `?count=n` n values one per line",
        keyParams,
        MAX_HTTP_BATCH,
        'values',
      ),
      config: { badInput: { text: true } },
    },
    async (req, reply) => {
      const count = countOf(req.query.count, MAX_HTTP_BATCH);
      if (typeof count === 'string') return reply.code(400).type('text/plain').send(count);
      try {
        const last = await seqs.incrBy(req.params.key, BigInt(count));
        reply.type('text/plain; charset=utf-8');
        if (count === 1) return String(last);
        const out: string[] = [];
        for (let v = last - BigInt(count) + 1n; v <= last; v++) out.push(String(v));
        return out.join('\n');
      } catch (err) {
        if (err instanceof SequenceRefusedError) {
          // Leaf answers its exceptions with HTTP 500 and the Result's text: -2 unknown key, -3 no segment.
          const id = err.refusal.code === 'not_found' ? -2 : -3;
          return reply.code(500).type('text/plain').send(`Result{id=${id}, status=EXCEPTION} ${err.message}`);
        }
        return seqFail(reply, err, req.url);
      }
    },
  );
};
