import { randomBytes } from 'node:crypto';
import { HostPortError, parseHostPort } from '../net/host-port.js';
import type { Message, NodeId } from '../raft/types.js';
import { TransportOptionError } from './errors.js';
import { MAX_CLUSTER_ID_LENGTH } from './handshake.js';
import { type AnySocketFactory, defaultSocketFactory } from './socket-factory.js';
import { defaultTimers, type TransportTimers } from './timers.js';

/** Pino-compatible logging subset. The transport logs objects first, message second. */
export interface TransportLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface PeerTransportOptions {
  /** This node's id (positive integer). */
  nodeId: NodeId;
  /** Both ends must agree on it; 1..128 characters. */
  clusterId: string;
  /**
   * The shared cluster secret, at least 16 bytes (32 random bytes recommended): the handshake proves
   * knowledge of it without sending it. Short secrets could be guessed offline from a recorded handshake.
   */
  secret: string | Uint8Array;
  /** Where to accept peer connections. Port 0 picks a free port (see `address`). */
  listen: { host: string; port: number };
  /** Initial peers, id → "host:port" ("[v6]:port" for IPv6). This node's own id is ignored. */
  peers: Map<NodeId, string>;
  /** Every authenticated, well-formed message addressed to this node. Never called from send(). */
  onMessage(msg: Message): void;
  /** A message to `peer` was dropped (queue full, not connected) or the connection broke. Rate-limited per peer. */
  onUnreachable?(peer: NodeId): void;
  /** Outcome of every snap message given to send(): exactly one call each (none after close()). */
  onSnapshotStatus?(peer: NodeId, ok: boolean): void;
  /**
   * Listener side of the removal verdict (FS-23): the log index at which this node applied the removal of
   * `id`, or undefined. Asked only about ids that are not peers; a dialer it names is told "removed" once it
   * has proved the cluster secret. Default: nobody is removed (every non-peer gets `unknownNode`).
   */
  removedAt?(id: NodeId): number | undefined;
  /**
   * Dialer side: peer `peer` proved, under the cluster secret, that it applied this node's removal at log
   * index `removedAt`. The node decides what to make of it (it checks its own membership first).
   */
  onRemoved?(peer: NodeId, removedAt: number): void;
  logger?: TransportLogger;
  /** Messages queued per peer before new ones are dropped. Default 4096; 1..1_000_000. */
  maxQueueMessages?: number;
  /** Encoded bytes queued per peer before new messages are dropped. Default 32 MiB; >= maxFrameBytes. */
  maxQueueBytes?: number;
  /** Largest frame accepted from an authenticated peer (kind byte + payload). Default 4 MiB; 64 KiB..1 GiB. */
  maxFrameBytes?: number;
  /** Snapshot data per chunk frame. Default 1 MiB (less if maxFrameBytes is smaller); 1 KiB..(maxFrameBytes - 64). */
  snapshotChunkBytes?: number;
  /** Largest snapshot this node accepts (it is reassembled in memory). Default 256 MiB; 0..4 GiB-1. */
  maxSnapshotBytes?: number;
  /** Dial + handshake must complete within this. Default 5000 ms; 10..600000. */
  handshakeTimeoutMs?: number;
  /** A message connection sends a ping after this much quiet. Default 1000 ms; 10..600000. */
  keepaliveIntervalMs?: number;
  /** A connection that has received nothing for this long is closed. Default 10000 ms; > keepaliveIntervalMs. */
  idleTimeoutMs?: number;
  /** First reconnect delay. Default 50 ms; 1..60000. */
  backoffBaseMs?: number;
  /** Reconnect delays double up to this cap. Default 2000 ms; >= backoffBaseMs. */
  backoffMaxMs?: number;
  /** Minimum time between two onUnreachable calls for one peer. Default 100 ms; 0..60000. */
  unreachableIntervalMs?: number;
  /** Unauthenticated connections held at once; more are closed at once. Default 64; 1..10000. */
  maxPendingHandshakes?: number;
  /** Uniform random in [0, 1) for backoff jitter. Default Math.random. */
  random?: () => number;
  /** Monotonic milliseconds. Default performance.now. */
  now?: () => number;
  /** How sockets and the server are made: plain TCP by default; node:tls slots in here (see docs/transport.md). */
  socketFactory?: AnySocketFactory;
  /** Timers for backoff, timeouts and keepalives. Default Node's global timers. */
  timers?: TransportTimers;
  /** Random bytes for handshake nonces. Default crypto.randomBytes. */
  randomBytes?: (n: number) => Buffer;
}

export const DEFAULTS = {
  maxQueueMessages: 4096,
  maxQueueBytes: 32 * 1024 * 1024,
  maxFrameBytes: 4 * 1024 * 1024,
  snapshotChunkBytes: 1024 * 1024,
  maxSnapshotBytes: 256 * 1024 * 1024,
  handshakeTimeoutMs: 5000,
  keepaliveIntervalMs: 1000,
  idleTimeoutMs: 10_000,
  backoffBaseMs: 50,
  backoffMaxMs: 2000,
  unreachableIntervalMs: 100,
  maxPendingHandshakes: 64,
} as const;

/** Room for the frame header and the offset in front of a snapshot chunk. */
const CHUNK_FRAME_OVERHEAD = 64;
export const MIN_SECRET_BYTES = 16;

export interface ResolvedOptions
  extends Required<
    Omit<
      PeerTransportOptions,
      'onUnreachable' | 'onSnapshotStatus' | 'removedAt' | 'onRemoved' | 'peers' | 'secret'
    >
  > {
  secret: Buffer;
  peers: Map<NodeId, string>;
  onUnreachable: (peer: NodeId) => void;
  onSnapshotStatus: (peer: NodeId, ok: boolean) => void;
  removedAt: (id: NodeId) => number | undefined;
  onRemoved: (peer: NodeId, removedAt: number) => void;
}

const silentLogger: TransportLogger = { info() {}, warn() {}, error() {} };

/** Applies defaults and checks every option, throwing TransportOptionError on the first bad one. */
export function resolveOptions(o: PeerTransportOptions): ResolvedOptions {
  checkNodeId('nodeId', o.nodeId);
  if (
    typeof o.clusterId !== 'string' ||
    o.clusterId.length < 1 ||
    o.clusterId.length > MAX_CLUSTER_ID_LENGTH
  ) {
    throw new TransportOptionError(
      'clusterId',
      `a string of 1..${MAX_CLUSTER_ID_LENGTH} characters`,
      o.clusterId,
    );
  }
  const secret =
    typeof o.secret === 'string'
      ? Buffer.from(o.secret, 'utf8')
      : o.secret instanceof Uint8Array
        ? Buffer.from(o.secret)
        : undefined;
  if (!secret || secret.length < MIN_SECRET_BYTES) {
    throw new TransportOptionError(
      'secret',
      `a string or Uint8Array of at least ${MIN_SECRET_BYTES} bytes`,
      o.secret,
    );
  }
  if (!o.listen || typeof o.listen.host !== 'string' || o.listen.host === '') {
    throw new TransportOptionError('listen.host', 'a host name or IP address', o.listen?.host);
  }
  checkInt('listen.port', o.listen.port, 0, 65535);
  if (!(o.peers instanceof Map))
    throw new TransportOptionError('peers', 'a Map<NodeId, "host:port">', o.peers);
  for (const id of o.peers.keys()) checkNodeId(`peers key`, id);
  if (typeof o.onMessage !== 'function')
    throw new TransportOptionError('onMessage', 'a function', o.onMessage);

  const maxFrameBytes = int(o, 'maxFrameBytes', 64 * 1024, 1024 * 1024 * 1024);
  const r: ResolvedOptions = {
    nodeId: o.nodeId,
    clusterId: o.clusterId,
    secret,
    listen: { host: o.listen.host, port: o.listen.port },
    peers: new Map(o.peers),
    onMessage: o.onMessage,
    onUnreachable: o.onUnreachable ?? (() => {}),
    onSnapshotStatus: o.onSnapshotStatus ?? (() => {}),
    removedAt: o.removedAt ?? (() => undefined),
    onRemoved: o.onRemoved ?? (() => {}),
    logger: o.logger ?? silentLogger,
    maxQueueMessages: int(o, 'maxQueueMessages', 1, 1_000_000),
    maxQueueBytes: int(
      o,
      'maxQueueBytes',
      maxFrameBytes,
      Number.MAX_SAFE_INTEGER,
      Math.max(DEFAULTS.maxQueueBytes, maxFrameBytes),
    ),
    maxFrameBytes,
    snapshotChunkBytes: int(
      o,
      'snapshotChunkBytes',
      1024,
      maxFrameBytes - CHUNK_FRAME_OVERHEAD,
      Math.min(DEFAULTS.snapshotChunkBytes, maxFrameBytes - CHUNK_FRAME_OVERHEAD),
    ),
    maxSnapshotBytes: int(o, 'maxSnapshotBytes', 0, 2 ** 32 - 1),
    handshakeTimeoutMs: int(o, 'handshakeTimeoutMs', 10, 600_000),
    keepaliveIntervalMs: int(o, 'keepaliveIntervalMs', 10, 600_000),
    idleTimeoutMs: 0,
    backoffBaseMs: int(o, 'backoffBaseMs', 1, 60_000),
    backoffMaxMs: 0,
    unreachableIntervalMs: int(o, 'unreachableIntervalMs', 0, 60_000),
    maxPendingHandshakes: int(o, 'maxPendingHandshakes', 1, 10_000),
    random: o.random ?? Math.random,
    now: o.now ?? (() => performance.now()),
    socketFactory: o.socketFactory ?? defaultSocketFactory,
    timers: o.timers ?? defaultTimers,
    randomBytes: o.randomBytes ?? randomBytes,
  };
  r.idleTimeoutMs = int(o, 'idleTimeoutMs', r.keepaliveIntervalMs + 1, 3_600_000);
  r.backoffMaxMs = int(o, 'backoffMaxMs', r.backoffBaseMs, 600_000);
  return r;
}

type NumericOption = {
  [K in keyof PeerTransportOptions]-?: PeerTransportOptions[K] extends number | undefined ? K : never;
}[keyof PeerTransportOptions];

function int(
  o: PeerTransportOptions,
  name: NumericOption,
  min: number,
  max: number,
  defaultValue?: number,
): number {
  const v = o[name] ?? defaultValue ?? (DEFAULTS as Record<string, number>)[name];
  checkInt(name, v, min, max);
  return v as number;
}

function checkInt(name: string, v: unknown, min: number, max: number): void {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
    throw new TransportOptionError(name, `an integer in ${min}..${max}`, v);
  }
}

function checkNodeId(name: string, v: unknown): void {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
    throw new TransportOptionError(name, 'a positive integer node id', v);
  }
}

/** Splits "host:port" or "[ipv6]:port". Throws TransportOptionError naming the bad address. */
export function parsePeerAddress(addr: string): { host: string; port: number } {
  try {
    return parseHostPort(addr, 'peer address');
  } catch (err) {
    const reason = err instanceof HostPortError ? `; ${err.reason}` : '';
    throw new TransportOptionError(
      'peer address',
      `"host:port" or "[ipv6]:port" with port 1..65535${reason}`,
      addr,
    );
  }
}
