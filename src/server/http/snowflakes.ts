// Server-side Snowflake over HTTP (docs/snowflake-server.md): an encapsulated plugin with the JSON
// routes under /v1/snowflakes and Leaf's `GET /api/snowflake/get/{key}` (the ID as plain text).
// Every member answers `next` from its own leased worker ID, without redirecting. IDs are decimal
// strings in JSON.
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { FloeClientError } from '../../client/errors.js';
import { FloeIdError } from '../../id/errors.js';
import { SnowflakeRefusedError, type SnowflakeService } from '../../snowflakes/index.js';
import { httpStatusOf, isFloeErrorCode } from '../errors/table.js';
import type { RouteHelpers } from './auth.js';
import { bool, errors, int, leafTextSchema, nameParam, obj, str, WRITE_ERRORS } from './schemas.js';

/** The most IDs one HTTP request may take. */
export const MAX_SNOWFLAKE_BATCH = 100_000;

export interface SnowflakesPluginOptions {
  snowflakes: SnowflakeService;
  helpers: RouteHelpers;
}

// ---- schemas --------------------------------------------------------------------------------

const keyParams = obj({ key: nameParam('the Snowflake key') }, ['key']);
const info = obj({ key: str, layout: str, ttlMs: int }, [], 'A Snowflake key');
const sfErrors = errors(400, 401, 403, 404, 409, ...WRITE_ERRORS);
const countMessage = `count must be an integer in [1, ${MAX_SNOWFLAKE_BATCH}]`;

// ---- routes ---------------------------------------------------------------------------------

export const snowflakesPlugin: FastifyPluginAsync<SnowflakesPluginOptions> = async (
  app,
  { snowflakes: sf, helpers },
) => {
  const { fail, requires } = helpers;
  const keyOf = (req: FastifyRequest) => (req.params as { key: string }).key;
  const bodyKeyOf = (req: FastifyRequest) => {
    const k = (req.body as { key?: unknown } | undefined)?.key;
    return typeof k === 'string' ? k : undefined;
  };
  const status = (err: unknown): { code: number; error: string } | undefined => {
    // Every refusal answers the status the error table gives its code (layout_mismatch 409, as on leases).
    if (err instanceof SnowflakeRefusedError)
      return { code: isFloeErrorCode(err.code) ? httpStatusOf(err.code) : 400, error: err.code };
    if (err instanceof FloeClientError || err instanceof FloeIdError)
      return { code: httpStatusOf('unavailable'), error: 'unavailable' };
    return undefined;
  };
  const countOf = (v: unknown): number | string => {
    if (v === undefined) return 1;
    const n =
      typeof v === 'number' ? v : typeof v === 'string' && /^\d{1,7}$/.test(v) ? Number(v) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < 1 || n > MAX_SNOWFLAKE_BATCH) return countMessage;
    return n;
  };
  type KeyParams = { key: string };

  app.post<{ Body: { key: string; layout?: string; ttlMs?: number } }>(
    '/v1/snowflakes',
    {
      preValidation: requires('admin', bodyKeyOf),
      schema: {
        tags: ['snowflakes'],
        summary: 'Create a Snowflake key (needs admin on the key); 201 when created',
        body: obj(
          {
            key: str,
            layout: { type: 'string', description: 'a layout preset name (default floe)' },
            ttlMs: { type: 'number', description: "each member's worker-ID lease TTL" },
          },
          ['key'],
        ),
        response: { 200: obj({ created: bool }), 201: obj({ created: bool }), ...sfErrors },
      },
      config: {
        badInput: {
          code: 'invalid_argument',
          messages: {
            key: 'key must be a string',
            layout: 'layout must be a preset name',
            ttlMs: 'ttlMs must be an integer',
          },
        },
      },
    },
    async (req, reply) => {
      const b = req.body;
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

  app.get<{ Params: KeyParams }>(
    '/v1/snowflakes/:key',
    {
      preValidation: requires('read', keyOf),
      schema: {
        tags: ['snowflakes'],
        summary: 'One Snowflake key (needs read on the key)',
        params: keyParams,
        response: { 200: info, ...errors(401, 403, 404) },
      },
    },
    async (req, reply) => {
      const found = sf.info(req.params.key);
      return (
        found ??
        reply
          .code(404)
          .send({ error: 'not_found', message: `no snowflake key ${JSON.stringify(req.params.key)}` })
      );
    },
  );

  app.post<{ Params: KeyParams; Body: { count?: unknown } }>(
    '/v1/snowflakes/:key/next',
    {
      preValidation: requires('issue', keyOf),
      schema: {
        tags: ['snowflakes'],
        summary: '`count` IDs from this member (needs issue on the key)',
        params: keyParams,
        body: obj({
          count: {
            description: `1..${MAX_SNOWFLAKE_BATCH} (default 1)`,
            anyOf: [{ type: 'integer' }, { type: 'string', pattern: '^\\d{1,7}$' }],
          },
        }),
        response: {
          200: obj({ key: str, ids: { type: 'array', items: { type: 'string', pattern: '^\\d+$' } } }),
          ...sfErrors,
        },
      },
      config: { badInput: { code: 'invalid_argument', messages: { count: countMessage } } },
    },
    async (req, reply) => {
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
    {
      preValidation: requires('issue', keyOf),
      schema: leafTextSchema(
        'snowflakes',
        "Leaf's snowflake path: the ID as plain text, `?count=n` n IDs one per line",
        keyParams,
        MAX_SNOWFLAKE_BATCH,
        'IDs',
      ),
      config: { badInput: { text: true } },
    },
    async (req, reply) => {
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
};
