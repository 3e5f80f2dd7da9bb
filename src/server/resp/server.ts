import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import { createServer, type Server, type Socket } from 'node:net';
import {
  type SecureContextOptions,
  type TlsOptions,
  type Server as TlsServer,
  createServer as tlsCreateServer,
} from 'node:tls';
import { showsUnverifiedCertificate } from '../../tls/reloadable.js';
import { instrumentCommandTable, type RespCommandObserver } from '../metrics-resp.js';
import { mergeDefined, serveLimits } from '../serve-limits.js';
import type { RespBackend } from './backend.js';
import { ClientConnection, type CloseReason } from './client-connection.js';
import {
  type CommandSpecInput,
  type ServerCounters,
  type ServerLogger,
  type ServerState,
  type Session,
  zeroServerCounters,
} from './command.js';
import { ALL_COMMANDS, buildCommandTable } from './commands/index.js';
import { publish } from './commands/pubsub.js';
import { type RespLimits, RespOptionError, resolveLimits } from './limits.js';
import { parseHostPort } from './node-id.js';
import { addrOf, readTopology, type Topology } from './topology.js';

export interface RespServerOptions {
  /** Interface to listen on. Default `127.0.0.1`. */
  host?: string;
  /** Port; 0 = any free port (see `address`). Default 0. */
  port?: number;
  backend: RespBackend;
  limits?: Partial<RespLimits>;
  /** pino-compatible logger (`debug/info/warn/error(obj, msg)`). Default: silent. */
  logger?: ServerLogger;
  /**
   * `cluster` (default): CLUSTER commands work, INFO shows cluster_enabled:1, HELLO mode=cluster.
   * `standalone`: CLUSTER answers `ERR This instance has cluster support disabled` (MOVED still applies).
   */
  mode?: 'cluster' | 'standalone';
  /** The master name Sentinel clients ask for. Default `floe`. */
  sentinelName?: string;
  /**
   * The `host:port` clients should dial for this node, used when the backend's `members()` has no address for it.
   * Default: the address listened on (`0.0.0.0`/`::` become `127.0.0.1`).
   */
  announce?: string;
  /** Shown as `floe_version` in INFO. Default: package.json's version. */
  floeVersion?: string;
  /** Extra commands (e.g. INCR) appended to the built-in table. */
  commands?: readonly CommandSpecInput[];
  /** Called after every command that reached its handler (metrics: name, seconds, ok). */
  onCommand?: RespCommandObserver;
  /**
   * TLS for clients (`redis-cli --tls`): certificate, key, CA and client-certificate policy as
   * `tls.createServer` takes them. Default: plain TCP. See docs/tls.md.
   */
  tls?: TlsOptions;
}

/** Counters plus one row per connected client. */
export interface RespServerStats extends ServerCounters {
  connectedClients: number;
  pausedClients: number;
  clients: {
    id: number;
    addr: string;
    proto: 2 | 3;
    name: string;
    queryBufferBytes: number;
    outputBufferBytes: number;
    paused: boolean;
    subscriptions: number;
  }[];
}

export interface RespServerEvents {
  /** Stopped reading a client: `output` = slow reader, `input` = parse backlog behind an async command. */
  'client-paused': [{ id: number; reason: 'output' | 'input' }];
  'client-resumed': [{ id: number }];
  'client-closed': [{ id: number; reason: CloseReason }];
  /** A connection over `maxClients` was refused. */
  'client-rejected': [{ addr: string; reason: 'max-clients' | 'max-clients-per-address' }];
}

export interface RespServer {
  /** The address actually listened on. */
  readonly address: { host: string; port: number };
  stats(): RespServerStats;
  /** For tests and metrics; correctness never depends on them. */
  readonly events: EventEmitter<RespServerEvents>;
  /** Whether clients connect with TLS. */
  readonly tls: boolean;
  /** New TLS connections use this material (certificate reload); open ones keep theirs. Throws without TLS. */
  setSecureContext(options: SecureContextOptions): void;
  /** Stop listening, close every client, release every timer. Idempotent. */
  close(): Promise<void>;
}

const REDIS_COMPAT_VERSION = '7.0.0';
const MAX_CLIENTS_REPLY = Buffer.from('-ERR max number of clients reached\r\n');
const MAX_PER_ADDRESS_REPLY = Buffer.from('-ERR max number of clients per address reached\r\n');

const silentLogger: ServerLogger = { debug() {}, info() {}, warn() {}, error() {} };

function packageVersion(): string {
  try {
    // src/server/resp and dist/server/resp are both three levels below the package root.
    const pkg = createRequire(import.meta.url)('../../../package.json') as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/**
 * Start a RESP server (any Redis client can talk to it) in front of `backend`. Resolves once listening;
 * rejects with the listen error (e.g. EADDRINUSE) or `RespOptionError` for a bad option.
 */
export async function startRespServer(opts: RespServerOptions): Promise<RespServer> {
  // `floe serve`'s limit flags are the defaults; the options given here win.
  const limits = resolveLimits(mergeDefined(serveLimits().resp, opts.limits));
  const host = opts.host ?? '127.0.0.1';
  const port = opts.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RespOptionError('port', 'an integer in [0, 65535]', port);
  }
  const mode = opts.mode ?? 'cluster';
  if (mode !== 'cluster' && mode !== 'standalone') {
    throw new RespOptionError('mode', "'cluster' or 'standalone'", mode);
  }
  if (opts.announce !== undefined && !parseHostPort(opts.announce)) {
    throw new RespOptionError('announce', 'host:port with a port in [1, 65535]', opts.announce);
  }
  const sentinelName = opts.sentinelName ?? 'floe';
  if (sentinelName.length === 0 || /\s/.test(sentinelName)) {
    throw new RespOptionError('sentinelName', 'a non-empty name without spaces', sentinelName);
  }
  const backend = opts.backend;
  const logger = opts.logger ?? silentLogger;
  const events = new EventEmitter<RespServerEvents>();
  const sessions = new Map<number, ClientConnection>();
  const refused = new Set<Socket>();
  /** Connected clients per remote IP address (maxClientsPerAddress). */
  const perAddress = new Map<string, number>();
  const counters = zeroServerCounters();
  let nextId = 1;
  let listening = { host, port };
  const announced = opts.announce ? parseHostPort(opts.announce)! : undefined;
  const selfAddr = (): { host: string; port: number } => {
    if (announced) return announced;
    const h = listening.host === '0.0.0.0' || listening.host === '::' ? '127.0.0.1' : listening.host;
    return { host: h, port: listening.port };
  };

  const state: ServerState = {
    backend,
    limits,
    options: {
      mode,
      sentinelName,
      floeVersion: opts.floeVersion ?? packageVersion(),
      redisVersion: REDIS_COMPAT_VERSION,
    },
    counters,
    startedAt: Date.now(),
    runId: randomBytes(20).toString('hex'),
    logger,
    table: opts.onCommand
      ? instrumentCommandTable(buildCommandTable([...ALL_COMMANDS, ...(opts.commands ?? [])]), opts.onCommand)
      : buildCommandTable([...ALL_COMMANDS, ...(opts.commands ?? [])]),
    selfAddr,
    topology: (): Topology => readTopology(backend, selfAddr()),
    sessions: (): Iterable<Session> => sessions.values(),
  };

  const hooks = {
    onPaused: (c: ClientConnection, reason: 'output' | 'input') =>
      events.emit('client-paused', { id: c.id, reason }),
    onResumed: (c: ClientConnection) => events.emit('client-resumed', { id: c.id }),
    onClosed: (c: ClientConnection, reason: CloseReason) => {
      sessions.delete(c.id);
      events.emit('client-closed', { id: c.id, reason });
    },
  };

  // The write high-water mark must not exceed maxOutputBytes, or 'drain' (which resumes a paused client)
  // would not be emitted for a buffer between the two.
  // allowHalfOpen: a client that shuts down its sending side still gets its replies (see ClientConnection).
  const socketOptions = {
    noDelay: true,
    allowHalfOpen: true,
    highWaterMark: Math.min(16 * 1024, limits.maxOutputBytes),
  };
  // With TLS the callback runs once the handshake is done ('secureConnection'): a client that fails it
  // (no or a bad client certificate, plain text on a TLS port) never becomes a session.
  const makeServer = (onSocket: (socket: Socket) => void): Server =>
    opts.tls
      ? tlsCreateServer({ ...socketOptions, ...opts.tls }, (socket) => {
          // Client certificates optional (`request`): one that does not verify is still refused.
          if (showsUnverifiedCertificate(socket)) {
            logger.warn(
              {
                addr: `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`,
                err: socket.authorizationError,
              },
              'RESP client certificate refused',
            );
            socket.destroy();
            return;
          }
          onSocket(socket);
        })
      : createServer(socketOptions, onSocket);
  const server: Server = makeServer((socket) => {
    counters.totalConnections++;
    if (sessions.size >= limits.maxClients) {
      counters.rejectedConnections++;
      refuse(socket, 'max-clients');
      return;
    }
    const ip = socket.remoteAddress ?? '?';
    const fromIp = perAddress.get(ip) ?? 0;
    if (fromIp >= limits.maxClientsPerAddress) {
      counters.rejectedConnections++;
      refuse(socket, 'max-clients-per-address');
      return;
    }
    perAddress.set(ip, fromIp + 1);
    socket.once('close', () => {
      const n = (perAddress.get(ip) ?? 1) - 1;
      if (n <= 0) perAddress.delete(ip);
      else perAddress.set(ip, n);
    });
    const id = nextId++;
    sessions.set(id, new ClientConnection(id, socket, state, hooks));
  });

  /** Redis's answer to one client too many: the error, then close. */
  const refuse = (socket: Socket, reason: 'max-clients' | 'max-clients-per-address'): void => {
    // A flood of refused connections must not hold sockets for the grace period without bound.
    if (refused.size >= 1024) {
      socket.destroy();
      return;
    }
    refused.add(socket);
    const addr = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`;
    if (reason === 'max-clients')
      logger.warn(
        { addr, maxClients: limits.maxClients },
        `RESP connection from ${addr} refused: max number of clients (${limits.maxClients}) reached`,
      );
    else
      logger.warn(
        { addr, maxClientsPerAddress: limits.maxClientsPerAddress },
        `RESP connection from ${addr} refused: max number of clients per address (${limits.maxClientsPerAddress}) reached`,
      );
    events.emit('client-rejected', { addr, reason });
    socket.on('error', () => {});
    socket.on('data', () => {}); // discard: the client may have pipelined before reading our error
    socket.on('close', () => refused.delete(socket));
    socket.end(reason === 'max-clients' ? MAX_CLIENTS_REPLY : MAX_PER_ADDRESS_REPLY);
    setTimeout(() => socket.destroy(), limits.closeGraceMs).unref();
  };

  server.on('error', (err) => logger.error({ err }, 'RESP server error'));
  if (opts.tls) {
    server.on('tlsClientError', (err: Error, socket: Socket) =>
      logger.debug(
        { addr: `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`, err: err.message },
        'RESP TLS handshake failed',
      ),
    );
  }

  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const bound = server.address();
  if (bound && typeof bound === 'object') listening = { host: bound.address, port: bound.port };

  // Sentinel clients learn of a failover from +switch-master.
  let lastLeader = state.topology().leader;
  const unsubscribe = backend.onTopologyChange?.(() => {
    const leader = state.topology().leader;
    const before = addrOf(lastLeader);
    const now = addrOf(leader);
    if (leader && now) {
      if (before && before !== now && lastLeader) {
        publish(
          state,
          '+switch-master',
          `${sentinelName} ${lastLeader.host} ${lastLeader.port} ${leader.host} ${leader.port}`,
        );
      }
      lastLeader = leader;
    }
  });

  let closing: Promise<void> | undefined;
  return {
    address: listening,
    events,
    tls: opts.tls !== undefined,
    setSecureContext(options: SecureContextOptions): void {
      if (!opts.tls) throw new Error('this RESP server was started without TLS');
      (server as TlsServer).setSecureContext(options);
    },
    stats(): RespServerStats {
      let paused = 0;
      const clients: RespServerStats['clients'] = [];
      for (const c of sessions.values()) {
        if (c.isPaused) paused++;
        clients.push({
          id: c.id,
          addr: c.remoteAddress,
          proto: c.proto,
          name: c.name,
          queryBufferBytes: c.queryBufferBytes(),
          outputBufferBytes: c.outputBufferBytes(),
          paused: c.isPaused,
          subscriptions: c.channels.size + c.patterns.size,
        });
      }
      return { ...counters, connectedClients: sessions.size, pausedClients: paused, clients };
    },
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        unsubscribe?.();
        server.close(() => resolve());
        for (const c of [...sessions.values()]) c.destroy();
        for (const s of refused) s.destroy();
      });
      return closing;
    },
  };
}
