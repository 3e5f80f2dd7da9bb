import type { FastifyInstance } from 'fastify';
import { FloeClientError } from '../client/errors.js';
import { FloeIdError } from '../id/errors.js';
import { SnowflakeRefusedError, type SnowflakeService } from '../snowflakes/index.js';
import type { SequenceApiHelpers } from './http-sequences.js';

/** The most IDs one HTTP request may take. */
export const MAX_SNOWFLAKE_BATCH = 100_000;

/**
 * Server-side Snowflake over HTTP (docs/snowflake-server.md): JSON routes under /v1/snowflakes and
 * Leaf's `GET /api/snowflake/get/{key}` (the ID as plain text). Every member answers `next` from
 * its own leased worker ID, without redirecting. IDs are decimal strings in JSON.
 */
export function registerSnowflakeApi(
  app: FastifyInstance,
  sf: SnowflakeService,
  h: SequenceApiHelpers,
): void {
  const { allowed, fail } = h;
  const status = (err: unknown): { code: number; error: string } | undefined => {
    if (err instanceof SnowflakeRefusedError)
      return { code: err.code === 'not_found' ? 404 : err.code === 'exists' ? 409 : 400, error: err.code };
    if (err instanceof FloeClientError || err instanceof FloeIdError)
      return { code: 503, error: 'unavailable' };
    return undefined;
  };
  const countOf = (v: unknown): number | string => {
    if (v === undefined) return 1;
    const n =
      typeof v === 'number' ? v : typeof v === 'string' && /^\d{1,7}$/.test(v) ? Number(v) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < 1 || n > MAX_SNOWFLAKE_BATCH)
      return `count must be an integer in [1, ${MAX_SNOWFLAKE_BATCH}]`;
    return n;
  };
  type KeyParams = { key: string };

  app.post<{ Body: { key?: unknown; layout?: unknown; ttlMs?: unknown } }>(
    '/v1/snowflakes',
    async (req, reply) => {
      const b = req.body ?? {};
      if (typeof b.key !== 'string')
        return reply.code(400).send({ error: 'invalid_argument', message: 'key must be a string' });
      if (!allowed(req, reply, b.key, 'admin')) return reply;
      if (b.layout !== undefined && typeof b.layout !== 'string')
        return reply.code(400).send({ error: 'invalid_argument', message: 'layout must be a preset name' });
      if (b.ttlMs !== undefined && typeof b.ttlMs !== 'number')
        return reply.code(400).send({ error: 'invalid_argument', message: 'ttlMs must be an integer' });
      try {
        const r = await sf.create(b.key, b.layout, b.ttlMs);
        return reply.code(r.created ? 201 : 200).send({ created: r.created, ...r.info });
      } catch (err) {
        const s = status(err);
        return s
          ? reply.code(s.code).send({ error: s.error, message: (err as Error).message })
          : fail(reply, err, req.url);
      }
    },
  );

  app.get<{ Params: KeyParams }>('/v1/snowflakes/:key', async (req, reply) => {
    if (!allowed(req, reply, req.params.key, 'read')) return reply;
    const info = sf.info(req.params.key);
    return (
      info ??
      reply
        .code(404)
        .send({ error: 'not_found', message: `no snowflake key ${JSON.stringify(req.params.key)}` })
    );
  });

  app.post<{ Params: KeyParams; Body: { count?: unknown } }>(
    '/v1/snowflakes/:key/next',
    async (req, reply) => {
      if (!allowed(req, reply, req.params.key, 'issue')) return reply;
      const count = countOf(req.body?.count);
      if (typeof count === 'string')
        return reply.code(400).send({ error: 'invalid_argument', message: count });
      try {
        const ids = await sf.next(req.params.key, count);
        return { key: req.params.key, ids: ids.map(String) };
      } catch (err) {
        const s = status(err);
        return s
          ? reply.code(s.code).send({ error: s.error, message: (err as Error).message })
          : fail(reply, err, req.url);
      }
    },
  );

  // Leaf's snowflake path: the ID as plain text; `?count=n`: n IDs, one per line.
  app.get<{ Params: KeyParams; Querystring: { count?: string } }>(
    '/api/snowflake/get/:key',
    async (req, reply) => {
      if (!allowed(req, reply, req.params.key, 'issue')) return reply;
      const count = countOf(req.query.count);
      if (typeof count === 'string') return reply.code(400).type('text/plain').send(count);
      try {
        const ids = await sf.next(req.params.key, count);
        return reply.type('text/plain; charset=utf-8').send(ids.map(String).join('\n'));
      } catch (err) {
        // Leaf answers failures with HTTP 500 and its Result's text.
        const id = err instanceof SnowflakeRefusedError && err.code === 'not_found' ? -2 : -1;
        if (status(err))
          return reply
            .code(500)
            .type('text/plain')
            .send(`Result{id=${id}, status=EXCEPTION} ${(err as Error).message}`);
        return fail(reply, err, req.url);
      }
    },
  );
}
