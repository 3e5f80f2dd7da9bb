// Shared pieces of the routes' JSON schemas (fastify's `schema` option, validated by fastify's Ajv
// before a handler runs, and the source of docs/openapi.yaml), and how a schema error becomes
// Floe's `{error, message}` body naming the field (the error handler in http-hardening.ts).
import type { FastifyRequest } from 'fastify';
import type { FloeErrorCode } from '../errors/table.js';

/** What the error handler says when a route's schema refuses a request. */
export interface BadInputConfig {
  /** The `error` code (default `bad_request`). */
  code?: FloeErrorCode;
  /**
   * The message per top-level field (a body property, path parameter or query parameter): the
   * route's documented sentence, so that a schema refusal reads as the handler's own check did.
   * A function gets the request and the path to the refused value (`['grants', 'orders', '0']`).
   * Fields not listed get `<field> <what the schema wanted>`.
   */
  messages?: Record<string, string | ((req: FastifyRequest, path: string[]) => string)>;
  /** Leaf's text routes answer their 400s as plain text. */
  text?: boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    badInput?: BadInputConfig;
  }
  /** What docs/openapi.yaml shows of a route (the same declarations as @fastify/swagger's). */
  interface FastifySchema {
    tags?: readonly string[];
    summary?: string;
    description?: string;
  }
}

/** The id of the shared error body schema (`$ref: 'FloeError#'`). */
export const ERROR_SCHEMA_ID = 'FloeError';

/** Every error reply: a stable code and a sentence (docs/errors.md). */
export const errorSchema = {
  $id: ERROR_SCHEMA_ID,
  type: 'object',
  description:
    'Every error reply: `error` is a stable code from docs/errors.md, `message` a sentence for people.',
  required: ['error', 'message'],
  properties: {
    error: { type: 'string', description: 'stable code (docs/errors.md)' },
    message: { type: 'string' },
    reason: {
      type: 'string',
      description: 'outcome_unknown only: leadershipLost, stopped, snapshot or timeout',
    },
    leader: {
      type: 'object',
      description: 'not_leader only: the leader when known',
      properties: { id: { type: 'integer' }, httpAddr: { type: 'string' } },
    },
    members: {
      type: 'array',
      description:
        'not_leader without a leader to redirect to (503) only: the members this node knows an HTTP address of (for operators; the SDK does not follow it)',
      items: {
        type: 'object',
        properties: { id: { type: 'integer' }, httpAddr: { type: 'string' } },
      },
    },
  },
  additionalProperties: true,
} as const;

const errorRef = { $ref: `${ERROR_SCHEMA_ID}#` } as const;

/** Response schemas for error statuses: `errors(400, 403)`. */
export function errors(...statuses: number[]): Record<number, typeof errorRef> {
  const out: Record<number, typeof errorRef> = {};
  for (const s of statuses) out[s] = errorRef;
  return out;
}

/** Statuses any write through the Raft log may answer (sendHttpError). */
export const WRITE_ERRORS = [307, 429, 500, 503, 504] as const;
/** Statuses a linearizable read may answer. */
export const READ_ERRORS = [307, 500, 503, 504] as const;

/** An integer written as a JSON number or a decimal string (what 64-bit-safe clients send). */
export function intOrString(description: string, pattern = '^\\d{1,16}$') {
  return {
    description,
    anyOf: [{ type: 'integer' }, { type: 'string', pattern }],
  } as const;
}

/** A path parameter that is a name or key (never empty: http-hardening refuses that first). */
export function nameParam(description: string) {
  return { type: 'string', description } as const;
}

/** An object schema with the given properties, extra ones allowed (documentation of replies). */
export function obj(properties: Record<string, unknown>, required: string[] = [], description?: string) {
  return {
    type: 'object',
    ...(description ? { description } : {}),
    properties,
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: true,
  } as const;
}

export const str = { type: 'string' } as const;
export const int = { type: 'integer' } as const;
export const bool = { type: 'boolean' } as const;

/** The schema of a Leaf-compatible plain-text path (`/api/segment/get/:key`, `/api/snowflake/get/:key`). */
export function leafTextSchema(tag: string, summary: string, params: object, maxCount: number, what: string) {
  const text = (description: string) => ({ description, content: { 'text/plain': { schema: str } } });
  return {
    tags: [tag],
    summary,
    params,
    querystring: obj({ count: { description: `1..${maxCount} (default 1)` } }),
    response: {
      200: text(`the ${what}, one per line`),
      400: text('the count is not in range'),
      500: text('Result{id=-2, status=EXCEPTION} for an unknown key (as Leaf)'),
    },
  };
}
