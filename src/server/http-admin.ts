import type { TlsOptions } from 'node:tls';
import AjvCompiler from '@fastify/ajv-compiler';
import Fastify, { type FastifyInstance } from 'fastify';
import type { FloeNode } from '../node/node.js';
import type { KvStateMachine } from '../state/kv-state-machine.js';
import { clusterView } from './dashboard/cluster-view.js';
import { type DashboardOptions, type DashboardSources, registerDashboard } from './dashboard/index.js';
import type { FloeServices } from './floe-services.js';
import { addressProof, registerHttpRoutes } from './http/index.js';
import type { ErrorBody } from './http-errors.js';
import { hardenHttp, MAX_PARAM_LENGTH } from './http-hardening.js';
import {
  type HttpLimits,
  httpClientErrorHandler,
  limitedServerFactory,
  resolveHttpLimits,
} from './http-limits.js';
import { NodeMetrics } from './metrics.js';
import { mergeDefined, serveLimits } from './serve-limits.js';

/**
 * Route validators shared by every app this process builds: fastify's own Ajv compiler (same options, so the same
 * validation), with each compiled schema kept by its content. A process that builds many apps (the full-stack
 * simulator builds one per node process) compiles each route's schema once, not once per app (finding FS-9).
 */
const ajvCompilerPool = AjvCompiler() as unknown as (
  externalSchemas: unknown,
  options: unknown,
) => (route: { schema: unknown }) => unknown;
/** Compiled validators by the content of the shared schemas and options, then by the content of the route's schema. */
const compiledByContent = new Map<string, Map<string, unknown>>();
function sharedValidators(
  externalSchemas: unknown,
  options: unknown,
): (route: { schema: unknown }) => unknown {
  // Two levels, so that each route's lookup hashes its own schema, not the shared schemas (several KB) again.
  const context = `${JSON.stringify(externalSchemas)}${JSON.stringify(options)}`;
  let byRoute = compiledByContent.get(context);
  if (byRoute === undefined) compiledByContent.set(context, (byRoute = new Map()));
  const compiled = byRoute;
  // Fastify's pool is asked for a compiler only when a schema is not compiled yet (it keys its pool by the shared
  // schemas too: two more JSON.stringify of them per plugin of every app).
  let compile: ((route: { schema: unknown }) => unknown) | undefined;
  return (route) => {
    const key = JSON.stringify(route.schema);
    let v = compiled.get(key);
    if (v === undefined) {
      compile ??= ajvCompilerPool(externalSchemas, options);
      compiled.set(key, (v = compile(route)));
    }
    return v;
  };
}

/** Every reply schema's serializer: one function for every route and status of every app (Fastify calls the compiler once per route and status). */
const stringifyReply = (data: unknown): string => JSON.stringify(data);

/** Refused connections are worth a warning on stderr even when the request logger is off. */
const limitLogger = {
  warn(obj: object, msg: string): void {
    process.stderr.write(`${JSON.stringify({ level: 40, time: Date.now(), ...obj, msg })}\n`);
  },
};

export interface HttpAdminOptions {
  node: FloeNode<unknown>;
  kv: KvStateMachine;
  host: string;
  port: number;
  /** Leases, users and auth: when given, the lease/user API and authentication are served too. */
  services?: FloeServices;
  /** The cluster secret: members prove it (HMAC) when they publish their client addresses. */
  clusterSecret?: string;
  /** Request bodies larger than this are refused with 413. Default `limits.bodyLimitBytes` (128 KiB). */
  bodyLimit?: number;
  /** Timeouts and connection limits (see http-limits.ts); default: `floe serve`'s flags, then built-in defaults. */
  limits?: Partial<HttpLimits>;
  logger?: boolean;
  /**
   * HTTPS: certificate, key, CA and client-certificate policy as `tls.createServer` takes them
   * (docs/tls.md). Default: plain HTTP. Reload with `app.server.setSecureContext(...)`.
   */
  tls?: TlsOptions;
  /**
   * The node's metrics (docs/metrics.md): `floe serve` passes one that also reads storage, transport,
   * lease and sequence state and the RESP server. Default: Raft, HTTP and the given services only.
   */
  metrics?: NodeMetrics;
  /**
   * Called with the new app before any hook or route is added: e.g. scripts/gen-openapi.ts
   * registers @fastify/swagger here to collect every route's schema.
   */
  setup?: (app: FastifyInstance) => void | Promise<void>;
  /** Without `metrics`: register process and Node.js runtime metrics too. Default true. */
  defaultMetrics?: boolean;
  /**
   * The live dashboard at `/` (docs/dashboard.md); `false` leaves it out. `fetchMember` reads another
   * member's `/v1/cluster` (default: plain `fetch` over http://; pass one that speaks the cluster's TLS).
   */
  dashboard?: false | (DashboardOptions & Pick<DashboardSources, 'fetchMember' | 'scheme' | 'memberFetch'>);
}

export type { ErrorBody };
export { addressProof, clusterView };

/**
 * The HTTP listener every node runs: cluster status, health, Prometheus metrics, membership
 * management and a small linearizable key-value/counter API.
 *
 * Writes (and linearizable reads) sent to a follower are answered `307 Temporary Redirect` with
 * `Location` pointing at the leader's HTTP address (method and body are preserved by clients that
 * follow 307), and a JSON body naming the leader; with no known leader the reply is 503.
 */
export async function startHttpAdmin(opts: HttpAdminOptions): Promise<FastifyInstance> {
  const app = await buildHttpAdmin(opts);
  return listenHttpAdmin(app, opts);
}

/** What `buildHttpAdmin` takes: everything but where to listen. */
export type HttpAdminBuildOptions = Omit<HttpAdminOptions, 'host' | 'port'>;

/** Listens on `host:port`; on failure (e.g. EADDRINUSE) the app is closed and the error thrown. */
export async function listenHttpAdmin(
  app: FastifyInstance,
  where: { host: string; port: number },
): Promise<FastifyInstance> {
  try {
    await app.listen({ host: where.host, port: where.port });
  } catch (err) {
    await app.close();
    throw err;
  }
  return app;
}

/**
 * Builds the HTTP app with every route, hook, metric and the dashboard, without listening: tests call
 * `app.inject()`, `listenHttpAdmin` (or `startHttpAdmin`) puts it on a port. Pass
 * `defaultMetrics: false` where many apps share one process (no process/runtime collectors).
 */
export async function buildHttpAdmin(opts: HttpAdminBuildOptions): Promise<FastifyInstance> {
  const { node } = opts;
  const limits = resolveHttpLimits(mergeDefined(serveLimits().http, opts.limits));
  const app = Fastify({
    logger: opts.logger ?? false,
    bodyLimit: opts.bodyLimit ?? limits.bodyLimitBytes,
    serverFactory: limitedServerFactory(limits, limitLogger, opts.tls),
    clientErrorHandler: httpClientErrorHandler(limits),
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // The schemas check what clients send as they send it: `"5"` is not the number 5, and nothing
    // is filled in or removed (the handlers' own checks and messages stay as documented).
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false } },
    schemaController: { compilersFactory: { buildValidator: sharedValidators as never } },
  });
  // Reply schemas document the replies (docs/openapi.yaml); replies are written as JSON.stringify
  // writes them, byte for byte what they were before the schemas.
  app.setSerializerCompiler(() => stringifyReply);
  await opts.setup?.(app);
  hardenHttp(app);
  const metrics =
    opts.metrics ??
    new NodeMetrics({
      node,
      defaultMetrics: opts.defaultMetrics,
      leaseService: opts.services?.leases,
      sequenceService: opts.services?.sequences,
      snowflakes: opts.services?.snowflakes,
    });
  metrics.attachHttp(app);
  if (opts.dashboard !== false) {
    registerDashboard(
      app,
      {
        node,
        metrics,
        leaseState: metrics.sources.leases,
        leaseService: opts.services?.leases,
        sequenceState: metrics.sources.sequences,
        fetchMember: opts.dashboard?.fetchMember,
        scheme: opts.dashboard?.scheme ?? (opts.tls ? 'https' : 'http'),
        memberFetch: opts.dashboard?.memberFetch,
      },
      opts.dashboard,
    );
  }

  registerHttpRoutes(app, {
    node,
    kv: opts.kv,
    services: opts.services,
    clusterSecret: opts.clusterSecret,
    registry: metrics.registry,
  });
  return app;
}
