import { type HttpLimits, resolveHttpLimits } from './http-limits.js';
import { type RespLimits, resolveLimits } from './resp/limits.js';

/**
 * The limits `floe serve` was started with (its `--http-*` and `--resp-*` limit flags). The servers
 * read them as their defaults; options passed to `startHttpAdmin` / `startRespServer` win.
 * Process-wide because the node's config (src/node) does not carry server limits yet.
 */
let configured: { http: Partial<HttpLimits>; resp: Partial<RespLimits> } = { http: {}, resp: {} };

export function setServeLimits(limits: { http?: Partial<HttpLimits>; resp?: Partial<RespLimits> }): void {
  // Check now, so that a bad flag is a usage error before the node starts.
  resolveHttpLimits(limits.http);
  resolveLimits(limits.resp);
  configured = { http: { ...limits.http }, resp: { ...limits.resp } };
}

export function serveLimits(): { http: Partial<HttpLimits>; resp: Partial<RespLimits> } {
  return configured;
}

/** `a` overridden by the defined fields of `b`. */
export function mergeDefined<T extends object>(a: Partial<T>, b: Partial<T> | undefined): Partial<T> {
  const out: Partial<T> = { ...a };
  for (const [k, v] of Object.entries(b ?? {})) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}

interface FlagSpec {
  /** commander flag, e.g. `--http-header-timeout-ms <ms>`. */
  flag: string;
  /** commander's camelCase property. */
  key: string;
  server: 'http' | 'resp';
  field: keyof HttpLimits | keyof RespLimits;
  help: string;
}

/**
 * Where `floe serve` differs from the library defaults: a RESP client idle for 5 minutes is closed
 * (the library keeps Redis's `timeout 0`).
 */
export const SERVE_DEFAULTS: { http: Partial<HttpLimits>; resp: Partial<RespLimits> } = {
  http: {},
  resp: { idleTimeoutMs: 300_000 },
};

const D_HTTP = resolveHttpLimits(SERVE_DEFAULTS.http);
const D_RESP = resolveLimits(SERVE_DEFAULTS.resp);

/** The limit flags of `floe serve` (docs/security.md lists them with their defaults). */
export const SERVE_LIMIT_FLAGS: readonly FlagSpec[] = [
  {
    flag: '--http-header-timeout-ms <ms>',
    key: 'httpHeaderTimeoutMs',
    server: 'http',
    field: 'headersTimeoutMs',
    help: `HTTP: request line and headers must arrive within this (408) (default ${D_HTTP.headersTimeoutMs})`,
  },
  {
    flag: '--http-request-timeout-ms <ms>',
    key: 'httpRequestTimeoutMs',
    server: 'http',
    field: 'requestTimeoutMs',
    help: `HTTP: the whole request, body included, must arrive within this (408) (default ${D_HTTP.requestTimeoutMs})`,
  },
  {
    flag: '--http-keep-alive-timeout-ms <ms>',
    key: 'httpKeepAliveTimeoutMs',
    server: 'http',
    field: 'keepAliveTimeoutMs',
    help: `HTTP: close a keep-alive connection idle between requests (default ${D_HTTP.keepAliveTimeoutMs})`,
  },
  {
    flag: '--http-idle-timeout-ms <ms>',
    key: 'httpIdleTimeoutMs',
    server: 'http',
    field: 'idleTimeoutMs',
    help: `HTTP: close a connection with no bytes moving either way; 0 = never (default ${D_HTTP.idleTimeoutMs})`,
  },
  {
    flag: '--http-max-connections <n>',
    key: 'httpMaxConnections',
    server: 'http',
    field: 'maxConnections',
    help: `HTTP: open connections at most; more get 503 (default ${D_HTTP.maxConnections})`,
  },
  {
    flag: '--http-max-connections-per-ip <n>',
    key: 'httpMaxConnectionsPerIp',
    server: 'http',
    field: 'maxConnectionsPerAddress',
    help: `HTTP: open connections at most per client IP; more get 503 (default ${D_HTTP.maxConnectionsPerAddress})`,
  },
  {
    flag: '--http-body-limit <bytes>',
    key: 'httpBodyLimit',
    server: 'http',
    field: 'bodyLimitBytes',
    help: `HTTP: largest request body (413) (default ${D_HTTP.bodyLimitBytes})`,
  },
  {
    flag: '--resp-max-clients <n>',
    key: 'respMaxClients',
    server: 'resp',
    field: 'maxClients',
    help: `RESP: clients at most; more get -ERR max number of clients reached (default ${D_RESP.maxClients})`,
  },
  {
    flag: '--resp-max-clients-per-ip <n>',
    key: 'respMaxClientsPerIp',
    server: 'resp',
    field: 'maxClientsPerAddress',
    help: `RESP: clients at most per client IP (default ${D_RESP.maxClientsPerAddress})`,
  },
  {
    flag: '--resp-idle-timeout-ms <ms>',
    key: 'respIdleTimeoutMs',
    server: 'resp',
    field: 'idleTimeoutMs',
    help: `RESP: close a client that sent nothing for this long (not pub/sub); 0 = never (default ${D_RESP.idleTimeoutMs})`,
  },
  {
    flag: '--resp-request-timeout-ms <ms>',
    key: 'respRequestTimeoutMs',
    server: 'resp',
    field: 'requestTimeoutMs',
    help: `RESP: a started command must be complete within this; 0 = never (default ${D_RESP.requestTimeoutMs})`,
  },
  {
    flag: '--resp-max-output-bytes <bytes>',
    key: 'respMaxOutputBytes',
    server: 'resp',
    field: 'maxOutputBytes',
    help: `RESP: stop running a client's commands while this many reply bytes are unsent (default ${D_RESP.maxOutputBytes})`,
  },
  {
    flag: '--resp-output-hard-limit-bytes <bytes>',
    key: 'respOutputHardLimitBytes',
    server: 'resp',
    field: 'maxOutputHardBytes',
    help: `RESP: disconnect a client with more unsent reply bytes than this (default ${D_RESP.maxOutputHardBytes})`,
  },
  {
    flag: '--resp-output-stall-timeout-ms <ms>',
    key: 'respOutputStallTimeoutMs',
    server: 'resp',
    field: 'outputStallTimeoutMs',
    help: `RESP: disconnect a client whose replies do not drain for this long; 0 = never (default ${D_RESP.outputStallTimeoutMs})`,
  },
  {
    flag: '--resp-max-bulk-bytes <bytes>',
    key: 'respMaxBulkBytes',
    server: 'resp',
    field: 'maxBulkBytes',
    help: `RESP: largest bulk-string argument (default ${D_RESP.maxBulkBytes})`,
  },
  {
    flag: '--resp-max-args <n>',
    key: 'respMaxArgs',
    server: 'resp',
    field: 'maxArgs',
    help: `RESP: most arguments in one command (multibulk length) (default ${D_RESP.maxArgs})`,
  },
  {
    flag: '--resp-max-inline-bytes <bytes>',
    key: 'respMaxInlineBytes',
    server: 'resp',
    field: 'maxInlineBytes',
    help: `RESP: longest inline command line (default ${D_RESP.maxInlineBytes})`,
  },
];

/**
 * Read the limit flags (strings from commander) into server limits, over `SERVE_DEFAULTS`. A value
 * that is not a plain non-negative integer, or out of range, throws an Error naming the flag.
 */
export function limitsFromFlags(flags: Record<string, unknown>): {
  http: Partial<HttpLimits>;
  resp: Partial<RespLimits>;
} {
  const http: Record<string, number> = { ...(SERVE_DEFAULTS.http as Record<string, number>) };
  const resp: Record<string, number> = { ...(SERVE_DEFAULTS.resp as Record<string, number>) };
  for (const f of SERVE_LIMIT_FLAGS) {
    const raw = flags[f.key];
    if (raw === undefined) continue;
    const name = f.flag.split(' ')[0];
    const s = String(raw).trim();
    if (!/^(0|[1-9][0-9]{0,15})$/.test(s))
      throw new Error(`${name} must be a non-negative integer (got "${String(raw)}")`);
    (f.server === 'http' ? http : resp)[f.field] = Number(s);
  }
  try {
    resolveHttpLimits(http);
    resolveLimits(resp);
  } catch (err) {
    const field = (err as { field?: string }).field?.replace(/^limits\./, '');
    const spec = SERVE_LIMIT_FLAGS.find((f) => f.field === field);
    const msg = (err as Error).message;
    throw new Error(spec ? `${spec.flag.split(' ')[0]}: ${msg}` : msg);
  }
  return { http, resp };
}
