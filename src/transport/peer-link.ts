import type { NodeId } from '../raft/types.js';
import { Backoff } from './backoff.js';
import { dialPeer } from './dial.js';
import { ForgedVerdictError, ProtocolError, RemovedVerdictError } from './errors.js';
import { encodeFrame, FrameKind } from './frame.js';
import type { FramedSocket } from './framed-socket.js';
import type { ResolvedOptions } from './options.js';
import { SendQueue } from './send-queue.js';
import type { TimerHandle } from './timers.js';

/** What a link needs from the transport that owns it. */
export interface LinkContext {
  readonly opts: ResolvedOptions;
  /** Registers a socket so close() can destroy it. */
  track(conn: FramedSocket): void;
  /** Tells the core (rate-limited) that messages to this peer are being lost. */
  reportUnreachable(peer: NodeId): void;
  /** A dial ended in a removal verdict (believed or not): the transport reports, logs and counts it. */
  verdict(peer: NodeId, err: RemovedVerdictError | ForgedVerdictError): void;
  /** State changed: the transport emits events for tests and metrics. */
  changed(event: 'peerConnected' | 'peerDisconnected' | 'pong', peer: NodeId): void;
}

export type LinkState = 'connecting' | 'connected' | 'backoff' | 'stopped';

const PING_FRAME = encodeFrame(FrameKind.ping);

/**
 * Our one outbound message connection to one peer: dials, authenticates, redials with backoff, and
 * owns the bounded queue in front of the socket.
 *
 * Rules (docs/transport.md, "Queues and backpressure"):
 *  - only while connected are frames queued; otherwise they are dropped at once;
 *  - the queue is bounded by count and bytes; a frame that does not fit is dropped;
 *  - frames move from the queue to the socket until socket.write() returns false, then wait for
 *    'drain', so the socket's own buffer holds at most its high-water mark plus one frame;
 *  - every drop reports the peer unreachable (rate-limited by the transport);
 *  - when the connection breaks, its queued frames are dropped too (Raft resends what matters).
 */
export class PeerLink {
  state: LinkState = 'connecting';
  target: { host: string; port: number } | undefined;
  private conn: FramedSocket | undefined;
  private readonly queue: SendQueue;
  private readonly backoff: Backoff;
  private waitingDrain = false;
  private flushScheduled = false;
  private reconnectTimer: TimerHandle | undefined;
  private lastPingAt = 0;
  private everConnected = false;
  private failuresInARow = 0;
  /** A snapshot stream to this peer is running (at most one). */
  snapshotInFlight = false;

  readonly counters = {
    sent: 0,
    dropped: 0,
    connects: 0,
    reconnects: 0,
    dialFailures: 0,
    snapshotsSent: 0,
    snapshotsFailed: 0,
    pings: 0,
    pongs: 0,
  };
  lastError: string | undefined;

  constructor(
    readonly peer: NodeId,
    target: { host: string; port: number } | undefined,
    private readonly ctx: LinkContext,
  ) {
    this.target = target;
    const o = ctx.opts;
    this.queue = new SendQueue(o.maxQueueMessages, o.maxQueueBytes);
    this.backoff = new Backoff(o.backoffBaseMs, o.backoffMaxMs, o.random);
    this.connect();
  }

  get queuedMessages(): number {
    return this.queue.length;
  }

  get queuedBytes(): number {
    return this.queue.byteLength;
  }

  /** Bytes the socket has accepted but not yet passed to the kernel. */
  get socketBufferedBytes(): number {
    return this.conn?.writableLength ?? 0;
  }

  /** Counts a message dropped before it was even encoded (we are not connected). */
  drop(): void {
    this.counters.dropped++;
    this.ctx.reportUnreachable(this.peer);
  }

  /** Queues one encoded frame for the peer, or drops it. Returns whether it was queued. */
  enqueue(frame: Uint8Array): boolean {
    if (this.state !== 'connected' || !this.queue.push(frame)) {
      this.drop();
      return false;
    }
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      // Everything queued in this turn of the event loop goes out in one corked write.
      process.nextTick(() => {
        this.flushScheduled = false;
        this.flush();
      });
    }
    return true;
  }

  /** New address for the peer: the current connection (if any) is dropped and redialled. */
  setTarget(target: { host: string; port: number } | undefined): void {
    this.target = target;
    if (this.state === 'stopped') return;
    if (this.conn) {
      this.conn.close(new Error('peer address changed'));
    } else if (this.state === 'backoff') {
      this.ctx.opts.timers.clearTimeout(this.reconnectTimer);
      this.connect();
    }
  }

  /** Keepalive and dead-peer detection, driven by the transport's timer. */
  tick(now: number): void {
    const conn = this.conn;
    if (!conn || this.state !== 'connected') return;
    const o = this.ctx.opts;
    if (now - conn.lastReceivedAt > o.idleTimeoutMs) {
      conn.close(new Error(`no answer from the peer for ${o.idleTimeoutMs} ms (idleTimeoutMs)`));
      return;
    }
    // Ping on a fixed beat whatever else we send: only the listener's PONGs tell us it is alive,
    // since it sends nothing else on this connection. While the socket waits for 'drain' the ping
    // queues behind the data (5 bytes a beat), and a pong that comes back proves the peer still reads.
    if (now - this.lastPingAt >= o.keepaliveIntervalMs) {
      this.lastPingAt = now;
      this.counters.pings++;
      conn.write(PING_FRAME);
    }
  }

  /** Stops for good: no more dialling, connection closed, queue dropped. */
  stop(): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.ctx.opts.timers.clearTimeout(this.reconnectTimer);
    this.queue.clear();
    this.conn?.close();
  }

  private flush(): void {
    const conn = this.conn;
    if (!conn || this.waitingDrain || this.queue.length === 0) return;
    const socket = conn.socket;
    socket.cork();
    let frame: Uint8Array | undefined;
    while ((frame = this.queue.shift()) !== undefined) {
      this.counters.sent++;
      if (!conn.write(frame)) {
        this.waitingDrain = true;
        socket.once('drain', () => {
          this.waitingDrain = false;
          if (this.conn === conn) this.flush();
        });
        break;
      }
    }
    socket.uncork();
  }

  private connect(): void {
    if (this.state === 'stopped') return;
    const o = this.ctx.opts;
    const target = this.target;
    if (!target) {
      // No usable address: stay unreachable, but look again later (setTarget may fix it).
      this.lastError = 'no valid address for this peer';
      this.scheduleReconnect();
      return;
    }
    this.state = 'connecting';
    dialPeer({
      factory: o.socketFactory,
      target,
      key: o.secret,
      clusterId: o.clusterId,
      selfId: o.nodeId,
      peerId: this.peer,
      channel: 'msg',
      timeoutMs: o.handshakeTimeoutMs,
      maxFrameBytes: o.maxFrameBytes,
      now: o.now,
      track: (c) => this.ctx.track(c),
      timers: o.timers,
      randomBytes: o.randomBytes,
    }).then(
      (conn) => this.onConnected(conn),
      (err: unknown) => {
        if (this.state === 'stopped') return;
        this.counters.dialFailures++;
        this.failuresInARow++;
        this.lastError = err instanceof Error ? err.message : String(err);
        // Then back off as after any refusal: a node told it was removed is about to stop.
        if (err instanceof RemovedVerdictError || err instanceof ForgedVerdictError)
          this.ctx.verdict(this.peer, err);
        // Log the first failure of a run only: a peer that is down for an hour is one log line.
        if (this.failuresInARow === 1) {
          o.logger.warn(
            { peer: this.peer, addr: `${target.host}:${target.port}`, err: this.lastError },
            'transport: cannot connect to peer; retrying with backoff',
          );
        }
        this.scheduleReconnect();
      },
    );
  }

  private onConnected(conn: FramedSocket): void {
    if (this.state === 'stopped') {
      conn.close();
      return;
    }
    const o = this.ctx.opts;
    this.conn = conn;
    this.state = 'connected';
    this.waitingDrain = false;
    this.lastPingAt = o.now();
    this.backoff.reset();
    this.failuresInARow = 0;
    this.counters.connects++;
    if (this.everConnected) this.counters.reconnects++;
    this.everConnected = true;
    o.logger.info({ peer: this.peer }, 'transport: connected to peer');
    conn.setHandler((kind) => {
      // A listener only ever answers pings on a message connection.
      if (kind !== FrameKind.pong) {
        throw new ProtocolError(`unexpected frame kind ${kind} on an outbound connection`);
      }
      this.counters.pongs++;
      this.ctx.changed('pong', this.peer);
    });
    conn.onClose((cause) => this.onDisconnected(conn, cause));
    this.ctx.changed('peerConnected', this.peer);
  }

  private onDisconnected(conn: FramedSocket, cause: Error | undefined): void {
    if (this.conn !== conn) return;
    this.conn = undefined;
    this.waitingDrain = false;
    this.counters.dropped += this.queue.clear();
    if (this.state === 'stopped') return;
    this.lastError = cause?.message ?? 'connection closed by peer';
    const log = cause instanceof ProtocolError ? this.ctx.opts.logger.error : this.ctx.opts.logger.info;
    log.call(
      this.ctx.opts.logger,
      { peer: this.peer, err: this.lastError },
      'transport: lost connection to peer',
    );
    this.ctx.reportUnreachable(this.peer);
    this.ctx.changed('peerDisconnected', this.peer);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.state === 'stopped') return;
    this.state = 'backoff';
    const timers = this.ctx.opts.timers;
    timers.clearTimeout(this.reconnectTimer);
    this.reconnectTimer = timers.setTimeout(() => this.connect(), this.backoff.next());
  }
}
