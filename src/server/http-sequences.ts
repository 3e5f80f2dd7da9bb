import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  SequenceRefusedError,
  SequenceReplyMismatchError,
  type SequenceService,
} from '../sequences/index.js';
import type { Permission } from '../state/auth/index.js';
import { MAX_ALLOC, type SequenceErrorCode } from '../state/sequences/index.js';

/** HTTP status of each sequence refusal. */
export const SEQUENCE_ERROR_STATUS: Record<SequenceErrorCode, number> = {
  bad_command: 400,
  invalid_argument: 400,
  not_found: 404,
  exists: 409,
  exhausted: 409,
  too_many_sequences: 507,
};

/** The most values one HTTP request may take (`?count=` / `count`). */
export const MAX_HTTP_BATCH = 10_000;

export interface SequenceApiHelpers {
  /** Checks a permission and, when it is missing, replies 403. */
  allowed(req: FastifyRequest, reply: FastifyReply, resource: string, perm: Permission): boolean;
  /** Checks a permission without replying. */
  may(req: FastifyRequest, resource: string, perm: Permission): boolean;
  fail(r: FastifyReply, e: unknown, path: string): FastifyReply;
}

/**
 * Sequences over HTTP (docs/sequences.md): JSON routes under /v1/sequences, and Leaf's
 * `GET /api/segment/get/{key}`, which answers the value as plain text (and, as Leaf does, a 500 with
 * `Result{id=-2, status=EXCEPTION}` for an unknown key). 64-bit values are decimal strings in JSON.
 */
export function registerSequenceApi(
  app: FastifyInstance,
  seqs: SequenceService,
  h: SequenceApiHelpers,
): void {
  const { allowed, may, fail } = h;
  const seqFail = (reply: FastifyReply, err: unknown, path: string): FastifyReply => {
    if (err instanceof SequenceRefusedError)
      return reply
        .code(SEQUENCE_ERROR_STATUS[err.refusal.code] ?? 400)
        .send({ error: err.refusal.code, message: err.message });
    if (err instanceof SequenceReplyMismatchError)
      return reply.code(500).send({ error: 'reply_mismatch', message: err.message });
    return fail(reply, err, path);
  };
  const bad = (reply: FastifyReply, message: string) =>
    reply.code(400).send({ error: 'invalid_argument', message });
  /** A count from a query string or body: 1..max, or an error message. */
  const countOf = (v: unknown, max: number): number | string => {
    if (v === undefined) return 1;
    const n =
      typeof v === 'number' ? v : typeof v === 'string' && /^\d{1,10}$/.test(v) ? Number(v) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < 1 || n > max) return `count must be an integer in [1, ${max}]`;
    return n;
  };

  type KeyParams = { key: string };

  app.post<{ Body: Record<string, unknown> }>('/v1/sequences', async (req, reply) => {
    const b = req.body ?? {};
    if (typeof b.key !== 'string') return bad(reply, 'key must be a string');
    if (!allowed(req, reply, b.key, 'admin')) return reply;
    for (const f of ['step', 'minStep', 'maxStep'] as const)
      if (b[f] !== undefined && typeof b[f] !== 'number') return bad(reply, `${f} must be an integer`);
    for (const f of ['start', 'max'] as const)
      if (b[f] !== undefined && typeof b[f] !== 'number' && typeof b[f] !== 'string')
        return bad(reply, `${f} must be an integer (a number or a decimal string)`);
    if (b.mode !== undefined && b.mode !== 'strict' && b.mode !== 'node')
      return bad(reply, "mode must be 'strict' or 'node'");
    try {
      const r = await seqs.create(b.key, {
        start: b.start as string | number | undefined,
        max: b.max as string | number | undefined,
        step: b.step as number | undefined,
        minStep: b.minStep as number | undefined,
        maxStep: b.maxStep as number | undefined,
        mode: b.mode as 'strict' | 'node' | undefined,
      });
      return reply.code(r.created ? 201 : 200).send({ created: r.created, ...r.info });
    } catch (err) {
      return seqFail(reply, err, req.url);
    }
  });

  app.get<{ Querystring: { stale?: string } }>('/v1/sequences', async (req, reply) => {
    try {
      const all = await seqs.list({ stale: req.query.stale === '1' });
      return { sequences: all.filter((s) => may(req, s.key, 'read')) };
    } catch (err) {
      return seqFail(reply, err, req.url);
    }
  });

  app.get<{ Params: KeyParams; Querystring: { stale?: string } }>(
    '/v1/sequences/:key',
    async (req, reply) => {
      if (!allowed(req, reply, req.params.key, 'read')) return reply;
      try {
        const info = await seqs.info(req.params.key, { stale: req.query.stale === '1' });
        if (!info)
          return reply
            .code(404)
            .send({ error: 'not_found', message: `no sequence ${JSON.stringify(req.params.key)}` });
        return info;
      } catch (err) {
        return seqFail(reply, err, req.url);
      }
    },
  );

  app.delete<{ Params: KeyParams }>('/v1/sequences/:key', async (req, reply) => {
    if (!allowed(req, reply, req.params.key, 'admin')) return reply;
    try {
      await seqs.delete(req.params.key);
      return { deleted: true, key: req.params.key };
    } catch (err) {
      return seqFail(reply, err, req.url);
    }
  });

  /** `{count}` consecutive values; answers the range and the last value (INCRBY). */
  app.post<{ Params: KeyParams; Body: { count?: unknown } }>(
    '/v1/sequences/:key/incr',
    async (req, reply) => {
      if (!allowed(req, reply, req.params.key, 'issue')) return reply;
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
    async (req, reply) => {
      if (!allowed(req, reply, req.params.key, 'issue')) return reply;
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
    async (req, reply) => {
      if (!allowed(req, reply, req.params.key, 'issue')) return reply;
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
}
