// A fault-injecting TCP proxy for integration tests, in the spirit of etcd's pkg/proxy (used by its
// robustness tests): there is no `tc netem` on the test machines, so faults are injected between
// a client and a server instead, per proxy, at run time.
//
//   client ──up──▶ FaultProxy ──up──▶ target
//   client ◀─down─ FaultProxy ◀─down─ target
//
// Faults: blackhole (drop or stall bytes in one or both directions), partition (reset every
// connection and refuse new ones), delay with jitter, bandwidth limit, connection resets.
// Bytes of one connection are always delivered in order; jitter only reorders across connections.
// Memory is bounded: a connection whose delayed bytes exceed maxBufferedBytes stops reading from
// its source until the backlog halves, so TCP flow control pushes back on the sender.

import { EventEmitter } from 'node:events';
import net from 'node:net';
import { formatHostPort, parseHostPort as parseAddress } from '../net/host-port.js';

/** up: client to target. down: target to client. */
export type Direction = 'up' | 'down' | 'both';

/** drop: bytes are discarded (the stream then has a gap). stall: bytes are held, delivered on heal. */
export type BlackholeMode = 'drop' | 'stall';

export interface FaultProxyOptions {
  /** host:port to listen on; port 0 picks a free one (read it from proxy.port). */
  listen: string;
  /** host:port to forward to. */
  target: string;
  /**
   * Delayed bytes one connection may buffer per direction before its source is paused; reading
   * resumes when the backlog falls to half. Default 1 MiB. At least 1.
   */
  maxBufferedBytes?: number;
  /** Seed of the jitter generator, for reproducible runs. Default: random. */
  seed?: number;
}

export const DEFAULT_MAX_BUFFERED_BYTES = 1024 * 1024;

export interface FaultProxyStats {
  connectionsAccepted: number;
  connectionsActive: number;
  /** Connections reset on arrival because of a partition. */
  connectionsRefused: number;
  /** Connections closed by partition() or resetConnections(). */
  connectionsReset: number;
  /** Connections whose target could not be reached. */
  upstreamFailures: number;
  /** Bytes delivered. */
  bytesUp: number;
  bytesDown: number;
  /** Bytes discarded by a dropping blackhole (including delayed bytes discarded in flight). */
  droppedUp: number;
  droppedDown: number;
  /** Chunks that went through the delay queue (delay, jitter or bandwidth in force). */
  delayedChunks: number;
  /** Bytes in delay queues now, and the most any single connection direction ever held. */
  bufferedBytes: number;
  peakBufferedBytes: number;
  /** Times a source was paused because its delay queue was full. */
  backpressurePauses: number;
}

interface DirectionFaults {
  blackhole: BlackholeMode | undefined;
  delayMs: number;
  jitterMs: number;
  /** Bytes per second; 0 = unlimited. */
  bandwidth: number;
}

export interface FaultState {
  partitioned: boolean;
  up: DirectionFaults;
  down: DirectionFaults;
}

/**
 * Events: 'connection' (accepted), 'connectionClosed', 'refused' (reset: partitioned), 'dropped' ({direction, bytes}),
 * 'delayed' ({direction, bytes}: a chunk entered a delay queue), 'upstreamError' (Error: the target could not be reached), 'serverError' (Error from the
 * listener). Tests wait on these instead of sleeping.
 */
export class FaultProxy extends EventEmitter {
  readonly host: string;
  readonly port: number;
  readonly target: { host: string; port: number };
  private readonly maxBuffered: number;
  private readonly faults: FaultState = {
    partitioned: false,
    up: { blackhole: undefined, delayMs: 0, jitterMs: 0, bandwidth: 0 },
    down: { blackhole: undefined, delayMs: 0, jitterMs: 0, bandwidth: 0 },
  };
  private readonly connections = new Set<Connection>();
  private readonly counters = {
    connectionsAccepted: 0,
    connectionsRefused: 0,
    connectionsReset: 0,
    upstreamFailures: 0,
    bytesUp: 0,
    bytesDown: 0,
    droppedUp: 0,
    droppedDown: 0,
    delayedChunks: 0,
    peakBufferedBytes: 0,
    backpressurePauses: 0,
  };
  private readonly random: () => number;
  private closing: Promise<void> | undefined;
  /** Sockets not yet fully closed, so close() can wait for every handle to go away. */
  private readonly openSockets = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    options: FaultProxyOptions,
    address: net.AddressInfo,
  ) {
    super();
    this.host = address.address;
    this.port = address.port;
    this.target = parseHostPort(options.target, 'target');
    this.maxBuffered = options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
    this.random = mulberry32(options.seed ?? Math.floor(Math.random() * 2 ** 32));
    server.on('connection', (socket) => this.accept(socket));
    // After listen, a server error (e.g. out of file descriptors) must not crash the test process.
    server.on('error', (err) => this.emit('serverError', err));
  }

  /** Listen and start forwarding. Rejects if listen/target are malformed or the port is taken. */
  static async start(options: FaultProxyOptions): Promise<FaultProxy> {
    const listen = parseHostPort(options.listen, 'listen');
    parseHostPort(options.target, 'target');
    const max = options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
    if (!Number.isInteger(max) || max < 1) {
      throw new RangeError(`maxBufferedBytes must be an integer >= 1, got ${max}`);
    }
    // allowHalfOpen: a client's FIN is forwarded after its delayed bytes, not applied at once.
    const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: listen.host, port: listen.port }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return new FaultProxy(server, options, server.address() as net.AddressInfo);
  }

  /** "host:port" the proxy listens on. */
  get address(): string {
    return formatHostPort({ host: this.host, port: this.port });
  }

  /**
   * Stop forwarding bytes in direction. 'drop' discards them (also those already delayed in
   * flight); 'stall' holds them (and stops reading, so senders block) until heal().
   * Connections stay open and new ones are still accepted.
   */
  blackhole(direction: Direction = 'both', mode: BlackholeMode = 'drop'): void {
    checkDirection(direction);
    if (mode !== 'drop' && mode !== 'stall')
      throw new RangeError(`mode must be 'drop' or 'stall', got ${String(mode)}`);
    for (const d of sides(direction)) this.faults[d].blackhole = mode;
    this.refreshAll();
  }

  /** Reset every connection and refuse (reset on accept) new ones until heal(). */
  partition(): void {
    this.faults.partitioned = true;
    this.resetConnections();
  }

  /** End the partition and every blackhole (held bytes are delivered). Delays stay. */
  heal(): void {
    this.faults.partitioned = false;
    this.faults.up.blackhole = undefined;
    this.faults.down.blackhole = undefined;
    this.refreshAll();
  }

  /**
   * Deliver bytes ms (± jitterMs, uniformly; never below 0) after they arrive. Bytes of one
   * connection keep their order: a chunk never overtakes an earlier one. Applies to bytes
   * arriving from now on. setDelay(0) removes the delay.
   */
  setDelay(ms: number, jitterMs = 0, direction: Direction = 'both'): void {
    checkDirection(direction);
    if (!(ms >= 0 && Number.isFinite(ms)))
      throw new RangeError(`delay must be a finite number of ms >= 0, got ${ms}`);
    if (!(jitterMs >= 0 && Number.isFinite(jitterMs))) {
      throw new RangeError(`jitter must be a finite number of ms >= 0, got ${jitterMs}`);
    }
    for (const d of sides(direction)) Object.assign(this.faults[d], { delayMs: ms, jitterMs });
  }

  /** Limit each connection to bytesPerSecond in direction; 0 removes the limit. */
  setBandwidth(bytesPerSecond: number, direction: Direction = 'both'): void {
    checkDirection(direction);
    if (!(bytesPerSecond >= 0 && Number.isFinite(bytesPerSecond))) {
      throw new RangeError(
        `bandwidth must be a finite number of bytes/s >= 0 (0 = unlimited), got ${bytesPerSecond}`,
      );
    }
    for (const d of sides(direction)) this.faults[d].bandwidth = bytesPerSecond;
  }

  /** heal(), and remove every delay and bandwidth limit. */
  clearFaults(): void {
    this.setDelay(0);
    this.setBandwidth(0);
    this.heal();
  }

  /** Reset (RST) every open connection; new connections are accepted as usual. */
  resetConnections(): void {
    for (const c of [...this.connections]) {
      this.counters.connectionsReset++;
      c.destroy(true);
    }
  }

  faultState(): FaultState {
    return structuredClone(this.faults);
  }

  stats(): FaultProxyStats {
    let buffered = 0;
    for (const c of this.connections) buffered += c.up.queuedBytes + c.down.queuedBytes;
    return { ...this.counters, connectionsActive: this.connections.size, bufferedBytes: buffered };
  }

  /** Stop listening and close every connection. Idempotent; resolves when every socket is closed. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const serverClosed = new Promise<void>((resolve) => this.server.close(() => resolve()));
      for (const c of [...this.connections]) c.destroy(true);
      // Also sockets of finished connections still flushing a goodbye to a peer that is not reading.
      for (const s of this.openSockets) s.destroy();
      await Promise.all([
        serverClosed,
        // A socket whose 'close' already fired cannot fire it again: do not wait for it.
        ...[...this.openSockets]
          .filter((s) => !s.closed)
          .map((s) => new Promise<void>((resolve) => s.once('close', () => resolve()))),
      ]);
    })();
    return this.closing;
  }

  private accept(client: net.Socket): void {
    if (this.closing) {
      client.destroy();
      return;
    }
    this.track(client);
    if (this.faults.partitioned) {
      this.counters.connectionsRefused++;
      client.resetAndDestroy();
      this.emit('refused');
      return;
    }
    this.counters.connectionsAccepted++;
    const upstream = net.connect({ host: this.target.host, port: this.target.port, allowHalfOpen: true });
    this.track(upstream);
    const conn = new Connection(this, client, upstream);
    this.connections.add(conn);
    upstream.once('connect', () => {
      upstream.setNoDelay(true);
      conn.refresh();
    });
    client.setNoDelay(true);
    this.emit('connection');
  }

  private track(socket: net.Socket): void {
    this.openSockets.add(socket);
    socket.once('close', () => this.openSockets.delete(socket));
  }

  private refreshAll(): void {
    for (const c of this.connections) c.refresh();
  }

  // --- used by Connection and Link -------------------------------------------------------------

  /** @internal */
  directionFaults(d: 'up' | 'down'): DirectionFaults {
    return this.faults[d];
  }

  /** @internal */
  get bufferLimit(): number {
    return this.maxBuffered;
  }

  /** @internal Delay for a chunk arriving now, jitter applied. */
  sampleDelay(d: 'up' | 'down'): number {
    const f = this.faults[d];
    if (f.jitterMs === 0) return f.delayMs;
    return Math.max(0, f.delayMs + (this.random() * 2 - 1) * f.jitterMs);
  }

  /** @internal */
  count(event: 'delivered' | 'dropped' | 'delayed' | 'paused', d: 'up' | 'down', bytes: number): void {
    if (event === 'delivered') this.counters[d === 'up' ? 'bytesUp' : 'bytesDown'] += bytes;
    else if (event === 'dropped') {
      this.counters[d === 'up' ? 'droppedUp' : 'droppedDown'] += bytes;
      this.emit('dropped', { direction: d, bytes });
    } else if (event === 'delayed') {
      this.counters.delayedChunks++;
      this.emit('delayed', { direction: d, bytes });
    } else this.counters.backpressurePauses++;
  }

  /** @internal */
  notePeak(bytes: number): void {
    if (bytes > this.counters.peakBufferedBytes) this.counters.peakBufferedBytes = bytes;
  }

  /** @internal */
  upstreamFailed(err: Error): void {
    this.counters.upstreamFailures++;
    this.emit('upstreamError', err);
  }

  /** @internal */
  forget(conn: Connection): void {
    if (this.connections.delete(conn)) this.emit('connectionClosed');
  }
}

/** One proxied connection: a client socket, its upstream socket and a Link each way. */
class Connection {
  readonly up: Link;
  readonly down: Link;
  private done = false;

  constructor(
    readonly proxy: FaultProxy,
    readonly client: net.Socket,
    readonly upstream: net.Socket,
  ) {
    this.up = new Link(this, 'up', client, upstream);
    this.down = new Link(this, 'down', upstream, client);
    let upstreamConnected = false;
    upstream.once('connect', () => (upstreamConnected = true));
    const onError = (from: net.Socket) => (err: Error) => {
      if (from === upstream && !upstreamConnected) proxy.upstreamFailed(err);
      // A reset on one side is passed on as a reset on the other, like a router would.
      this.destroy(true);
    };
    client.on('error', onError(client));
    upstream.on('error', onError(upstream));
    client.once('close', () => this.sideClosed(client));
    upstream.once('close', () => this.sideClosed(upstream));
  }

  refresh(): void {
    this.up.refresh();
    this.down.refresh();
  }

  /** A socket closed: nothing more can reach it; once the other direction drains, finish. */
  private sideClosed(socket: net.Socket): void {
    const toward = socket === this.client ? this.down : this.up;
    toward.discard();
    const other = socket === this.client ? this.upstream : this.client;
    const from = socket === this.client ? this.up : this.down;
    from.whenFlushed(() => {
      // Pass the close on once everything it sent was delivered; its peer cannot hear any reply.
      if (!other.destroyed) {
        if (!other.writableEnded) other.end();
        if (other.writableFinished) other.destroy();
        else other.once('finish', () => other.destroy());
      }
      this.finish();
    });
    if (this.client.destroyed && this.upstream.destroyed) this.finish();
  }

  /** Tear down both sides; reset=true sends RST to the client instead of FIN. */
  destroy(reset: boolean): void {
    this.up.discard();
    this.down.discard();
    if (!this.client.destroyed) {
      if (reset) this.client.resetAndDestroy();
      else this.client.destroy();
    }
    if (!this.upstream.destroyed) {
      if (reset && this.upstream.readyState === 'open') this.upstream.resetAndDestroy();
      else this.upstream.destroy();
    }
    this.finish();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.proxy.forget(this);
  }
}

const PAUSE_BUFFER = 1; // delay queue over its limit
const PAUSE_DRAIN = 2; // destination socket's own buffer is full
const PAUSE_STALL = 4; // stalling blackhole
const PAUSE_CONNECTING = 8; // upstream not connected yet

/** One direction of a connection: reads from source, delays, writes to dest in order. */
class Link {
  private readonly queue: Array<{ data: Buffer; at: number }> = [];
  private head = 0;
  queuedBytes = 0;
  private lastAt = 0;
  private linkFreeAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private pausedFor = 0;
  private sourceEnded = false;
  private ended = false;
  private discarded = false;
  private flushWaiters: Array<() => void> = [];

  constructor(
    private readonly conn: Connection,
    private readonly dir: 'up' | 'down',
    private readonly source: net.Socket,
    private readonly dest: net.Socket,
  ) {
    // The client socket starts paused (pauseOnConnect) and the upstream one is not connected yet:
    // nothing flows until refresh() finds the upstream open.
    this.pausedFor = PAUSE_CONNECTING;
    source.on('data', (chunk: Buffer) => this.onData(chunk));
    source.once('end', () => {
      this.sourceEnded = true;
      this.pump();
    });
    dest.on('drain', () => {
      this.pausedFor &= ~PAUSE_DRAIN;
      this.pump();
    });
  }

  private get faults(): DirectionFaults {
    return this.conn.proxy.directionFaults(this.dir);
  }

  private get pending(): number {
    return this.queue.length - this.head;
  }

  /** Re-read the fault settings (after a change) and resume or pause accordingly. */
  refresh(): void {
    if (this.conn.upstream.readyState === 'open') this.pausedFor &= ~PAUSE_CONNECTING;
    if (this.faults.blackhole === 'stall') this.pausedFor |= PAUSE_STALL;
    else this.pausedFor &= ~PAUSE_STALL;
    if (this.faults.blackhole === 'drop') this.dropQueued();
    this.pump();
  }

  private onData(chunk: Buffer): void {
    if (this.discarded) return;
    const proxy = this.conn.proxy;
    const f = this.faults;
    if (f.blackhole === 'drop') {
      proxy.count('dropped', this.dir, chunk.length);
      return;
    }
    const now = performance.now();
    const delayed = f.delayMs > 0 || f.jitterMs > 0 || f.bandwidth > 0 || this.pending > 0;
    if (!delayed && !(this.pausedFor & (PAUSE_DRAIN | PAUSE_STALL))) {
      this.write(chunk);
      this.applyFlow(); // the destination may be full now: stop reading until it drains
      return;
    }
    // Bandwidth: send in slices of ~50 ms worth, each finishing when the link has carried it.
    const slice = f.bandwidth > 0 ? Math.max(1024, Math.floor(f.bandwidth / 20)) : chunk.length;
    for (let off = 0; off < chunk.length; off += slice) {
      const data = chunk.subarray(off, Math.min(chunk.length, off + slice));
      // Never before an earlier chunk: per-connection order is TCP's promise.
      let at = Math.max(now + proxy.sampleDelay(this.dir), this.lastAt);
      if (f.bandwidth > 0) {
        at = Math.max(at, this.linkFreeAt) + (data.length * 1000) / f.bandwidth;
        this.linkFreeAt = at;
      }
      this.lastAt = at;
      this.queue.push({ data, at });
      this.queuedBytes += data.length;
      proxy.count('delayed', this.dir, data.length);
    }
    proxy.notePeak(this.queuedBytes);
    if (this.queuedBytes > proxy.bufferLimit && !(this.pausedFor & PAUSE_BUFFER)) {
      this.pausedFor |= PAUSE_BUFFER;
      proxy.count('paused', this.dir, 0);
    }
    this.pump();
  }

  /** Deliver every due chunk, then arm a timer for the next one; apply pause/resume. */
  private pump(): void {
    if (this.discarded) return;
    const now = performance.now();
    while (this.pending > 0 && !(this.pausedFor & (PAUSE_DRAIN | PAUSE_STALL | PAUSE_CONNECTING))) {
      const next = this.queue[this.head]!;
      if (next.at > now) break;
      this.queue[this.head++] = undefined as never; // let the buffer be collected
      this.queuedBytes -= next.data.length;
      this.write(next.data);
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    if (this.pausedFor & PAUSE_BUFFER && this.queuedBytes <= this.conn.proxy.bufferLimit / 2) {
      this.pausedFor &= ~PAUSE_BUFFER;
    }
    this.armTimer(now);
    this.applyFlow();
    if (this.pending === 0) {
      if (this.sourceEnded && !this.ended) {
        this.ended = true;
        if (!this.dest.destroyed) this.dest.end();
      }
      if (this.sourceEnded || this.source.destroyed) this.flushed();
    }
  }

  private armTimer(now: number): void {
    if (this.timer || this.pending === 0 || this.pausedFor & (PAUSE_DRAIN | PAUSE_STALL | PAUSE_CONNECTING))
      return;
    const wait = Math.max(1, Math.ceil(this.queue[this.head]!.at - now));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.pump();
    }, wait);
  }

  private write(data: Buffer): void {
    if (this.dest.destroyed || this.ended) return;
    this.conn.proxy.count('delivered', this.dir, data.length);
    if (!this.dest.write(data)) this.pausedFor |= PAUSE_DRAIN;
  }

  private applyFlow(): void {
    if (this.source.destroyed) return;
    if (this.pausedFor) this.source.pause();
    else this.source.resume();
  }

  private dropQueued(): void {
    if (this.pending === 0) return;
    let bytes = 0;
    for (let i = this.head; i < this.queue.length; i++) bytes += this.queue[i]!.data.length;
    this.clearQueue();
    this.conn.proxy.count('dropped', this.dir, bytes);
  }

  private clearQueue(): void {
    this.queue.length = 0;
    this.head = 0;
    this.queuedBytes = 0;
    this.pausedFor &= ~PAUSE_BUFFER;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** The destination is gone: forget queued bytes and stop timers. */
  discard(): void {
    this.discarded = true;
    this.clearQueue();
    this.flushed();
  }

  /** Run fn once this direction has delivered everything it will ever deliver. */
  whenFlushed(fn: () => void): void {
    if (this.discarded || (this.pending === 0 && (this.sourceEnded || this.source.destroyed))) fn();
    else this.flushWaiters.push(fn);
  }

  private flushed(): void {
    const waiters = this.flushWaiters;
    this.flushWaiters = [];
    for (const fn of waiters) fn();
  }
}

// --- small helpers ------------------------------------------------------------------------------

function sides(direction: Direction): Array<'up' | 'down'> {
  return direction === 'both' ? ['up', 'down'] : [direction];
}

function checkDirection(direction: Direction): void {
  if (direction !== 'up' && direction !== 'down' && direction !== 'both') {
    throw new RangeError(`direction must be 'up', 'down' or 'both', got ${String(direction)}`);
  }
}

/** "127.0.0.1:8080", "localhost:0", "[::1]:9000" (rules: src/net/host-port.ts; port 0 allowed). RangeError otherwise. */
export function parseHostPort(s: string, what: string): { host: string; port: number } {
  try {
    return parseAddress(s, what, { allowPortZero: true });
  } catch (err) {
    throw new RangeError((err as Error).message);
  }
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// --- the control language shared by the CLI's stdin and HTTP channels ----------------------------

export type ControlReply =
  | { ok: true; stats?: FaultProxyStats; faults?: FaultState }
  | { ok: false; error: string };

export const CONTROL_HELP = `commands (one per line):
  partition                                  reset all connections, refuse new ones
  heal                                       end partition and blackholes
  blackhole [up|down|both] [drop|stall]      default: both drop
  delay MS [JITTER_MS] [up|down|both]        delay 0 removes it
  bandwidth BYTES_PER_SEC [up|down|both]     0 removes the limit
  reset                                      reset all open connections
  clear                                      heal + no delay + no bandwidth limit
  stats                                      counters and current faults`;

/** Apply one control command line to proxy. Never throws: errors come back as {ok:false}. */
export function applyControlCommand(proxy: FaultProxy, line: string): ControlReply {
  const [cmd = '', ...args] = line.trim().split(/\s+/);
  // Numbers and words may come in any order: "delay 50 10 up" = "delay up 50 10".
  const numbers = args.filter((a) => a !== '' && !Number.isNaN(Number(a))).map(Number);
  const words = args.filter((a) => a !== '' && Number.isNaN(Number(a)));
  const direction = (): Direction => {
    const d = words.find((w) => w !== 'drop' && w !== 'stall');
    return (d ?? 'both') as Direction;
  };
  const expect = (minNumbers: number, maxNumbers: number, usage: string) => {
    if (numbers.length < minNumbers || numbers.length > maxNumbers) throw new RangeError(`usage: ${usage}`);
  };
  try {
    switch (cmd) {
      case 'partition':
        proxy.partition();
        break;
      case 'heal':
        proxy.heal();
        break;
      case 'blackhole':
        expect(0, 0, 'blackhole [up|down|both] [drop|stall]');
        proxy.blackhole(direction(), words.includes('stall') ? 'stall' : 'drop');
        break;
      case 'delay':
        expect(1, 2, 'delay MS [JITTER_MS] [up|down|both]');
        proxy.setDelay(numbers[0]!, numbers[1] ?? 0, direction());
        break;
      case 'bandwidth':
        expect(1, 1, 'bandwidth BYTES_PER_SEC [up|down|both]');
        proxy.setBandwidth(numbers[0]!, direction());
        break;
      case 'reset':
        proxy.resetConnections();
        break;
      case 'clear':
        proxy.clearFaults();
        break;
      case 'stats':
        return { ok: true, stats: proxy.stats(), faults: proxy.faultState() };
      default:
        return { ok: false, error: `unknown command ${JSON.stringify(cmd)}\n${CONTROL_HELP}` };
    }
    return { ok: true, faults: proxy.faultState() };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
}
