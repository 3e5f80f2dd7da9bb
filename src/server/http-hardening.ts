import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { httpStatusOf } from './errors/table.js';

/** JSON bodies nested deeper than this are refused (400) before they are parsed. */
export const MAX_JSON_DEPTH = 64;
/** Path parameters may be this long (keys are up to 1,024 bytes, escaped). */
export const MAX_PARAM_LENGTH = 4096;

/**
 * The deepest nesting of arrays and objects in a JSON text, found by one scan outside strings
 * (no recursion, so a hostile depth cannot overflow the stack).
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) {
      if (++depth > max) max = depth;
    } else if (c === 93 || c === 125) depth--;
  }
  return max;
}

/** Framework codes → the documented `error` codes (docs/http-errors.md). */
function codeOf(err: FastifyError, status: number): string {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return 'invalid_json';
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return 'body_too_large';
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return 'unsupported_media_type';
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return 'invalid_content_length';
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return 'path_too_long';
    default:
      return status === 400 ? 'bad_request' : status >= 500 ? 'internal' : 'bad_request';
  }
}

/**
 * Every 4xx and 5xx in one shape, `{error, message}` with a stable code (issue 15 item 7): framework
 * errors (invalid JSON, body too large, media type), JSON nested deeper than MAX_JSON_DEPTH (400
 * `json_too_deep`), unknown paths (404 `not_found`) and known paths with another method (405
 * `method_not_allowed`, with `Allow`).
 */
export function hardenHttp(app: FastifyInstance): void {
  // A route's pattern is compiled at the first 404 (an app is built at every node start; most never answer one).
  const routes: { method: string; pattern: { url: string; re?: RegExp } }[] = [];
  const matches = (p: { url: string; re?: RegExp }, path: string): boolean => {
    p.re ??= new RegExp(
      `^${p.url
        .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
        .replace(/\/:[^/]+/g, '/[^/]+')
        .replace(/\*/g, '.*')}$`,
    );
    return p.re.test(path);
  };
  app.addHook('onRoute', (r) => {
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    const pattern = { url: r.url };
    for (const m of methods) routes.push({ method: String(m).toUpperCase(), pattern });
  });

  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = body as string;
    if (text.length === 0) return done(null, undefined);
    if (jsonDepth(text) > MAX_JSON_DEPTH) {
      const err = new Error(`JSON nested deeper than ${MAX_JSON_DEPTH} levels`) as FastifyError;
      err.statusCode = 400;
      err.code = 'FLOE_JSON_TOO_DEEP';
      return done(err, undefined);
    }
    try {
      done(null, JSON.parse(text));
    } catch (e) {
      const err = new Error(`invalid JSON body: ${(e as Error).message}`) as FastifyError;
      err.statusCode = 400;
      err.code = 'FST_ERR_CTP_INVALID_JSON_BODY';
      done(err, undefined);
    }
  });

  // Every route takes a JSON object (or no body): `[{"by":1}]` or `null` on INCR used to add 1.
  // And no path parameter may be empty (`GET /v1/kv/` used to answer 200 for the key "").
  app.addHook('preValidation', async (req, reply) => {
    const params = (req.params ?? {}) as Record<string, unknown>;
    for (const name of Object.keys(params)) {
      if (params[name] === '')
        return reply
          .code(400)
          .send({ error: 'invalid_argument', message: `path parameter ${name} must not be empty` });
    }
    const b: unknown = req.body;
    // No body at all is an empty object to the route's schema (and to the handler): required
    // fields are then reported by name, optional ones take their defaults.
    if (b === undefined && req.routeOptions.schema?.body) {
      req.body = {};
      return;
    }
    if (b !== undefined && (b === null || typeof b !== 'object' || Array.isArray(b)))
      return reply.code(400).send({
        error: 'invalid_body',
        message: `request body must be a JSON object, got ${b === null ? 'null' : Array.isArray(b) ? 'an array' : typeof b}`,
      });
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err.validation) return schemaErrorReply(err, req, reply);
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
    const error = err.code === 'FLOE_JSON_TOO_DEEP' ? 'json_too_deep' : codeOf(err, status);
    return reply.code(status).send({ error, message: err.message });
  });

  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0] ?? '';
    const allow = [...new Set(routes.filter((r) => matches(r.pattern, path)).map((r) => r.method))].filter(
      (m) => m !== 'HEAD',
    );
    if (allow.length > 0)
      return reply
        .code(405)
        .header('allow', allow.join(', '))
        .send({
          error: 'method_not_allowed',
          message: `${req.method} is not allowed on ${path}; allowed: ${allow.join(', ')}`,
        });
    return reply.code(404).send({ error: 'not_found', message: `no route ${req.method} ${path}` });
  });
}

/**
 * A route's JSON schema refused the request (fastify validates params, querystring and body before
 * the handler): 400 with the route's code (`badInput.code`, default `bad_request`) and a message
 * naming the field, the route's own sentence where it gives one (src/server/http/schemas.ts).
 */
function schemaErrorReply(err: FastifyError, req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const first = err.validation![0]!;
  const context = err.validationContext ?? 'body';
  const path = first.instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  const missing = (first.params as { missingProperty?: unknown }).missingProperty;
  if (first.keyword === 'required' && typeof missing === 'string') path.push(missing);
  const config = req.routeOptions.config.badInput;
  const given = path[0] === undefined ? undefined : config?.messages?.[path[0]];
  const where =
    context === 'params' ? 'path parameter ' : context === 'querystring' ? 'query parameter ' : '';
  const message =
    typeof given === 'function'
      ? given(req, path)
      : (given ?? `${where}${path.length > 0 ? path.join('.') : context} ${first.message ?? 'is invalid'}`);
  if (config?.text) return reply.code(400).type('text/plain').send(message);
  const code = config?.code ?? 'bad_request';
  return reply.code(httpStatusOf(code)).send({ error: code, message });
}

/** A positive integer written plainly (no sign, exponent, hex, spaces or leading zeros), or undefined. */
export function strictPositiveInt(s: string): number | undefined {
  if (!/^[1-9][0-9]{0,15}$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}
