import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { NodeTransport } from '../node/seams.js';
import type { Message, NodeId, SnapshotMessage } from '../raft/types.js';
import { bugOn } from '../testing/bug-switches.js';
import { acceptHandshake } from './accept.js';
import { decodeMessage, encodeMessage } from './codec.js';
import { dialPeer } from './dial.js';
import {
  ForgedVerdictError,
  type HandshakeRejectReason,
  ProtocolError,
  RemovedVerdictError,
} from './errors.js';
import { encodeFrame, FrameKind } from './frame.js';
import { FramedSocket } from './framed-socket.js';
import { type Channel, HANDSHAKE_MAX_FRAME_BYTES } from './handshake.js';
import {
  type PeerTransportOptions,
  parsePeerAddress,
  type ResolvedOptions,
  resolveOptions,
} from './options.js';
import { type LinkContext, PeerLink } from './peer-link.js';
import { receiveSnapshot, streamSnapshot } from './snapshot-stream.js';
import type { PeerServer, PeerSocket } from './socket-factory.js';
import type { TimerHandle } from './timers.js';

/** Per-peer figures in stats(). */
export interface PeerStats {
  /** The address we dial ("" when the configured one could not be parsed). */
  address: string;
  /** State of our outbound message connection. */
  state: 'connecting' | 'connected' | 'backoff' | 'stopped';
  connected: boolean;
  /** Frames waiting in our bounded queue for this peer. */
  queued: number;
  queuedBytes: number;
  /** Bytes the socket accepted but the kernel has not taken yet (bounded by its high-water mark + one frame). */
  socketBufferedBytes: number;
  /** Messages handed to the socket. */
  sent: number;
  /** Messages dropped: queue full, not connected, or lost in the queue when a connection broke. */
  dropped: number;
  /** Successful connections after the first one. */
  reconnects: number;
  dialFailures: number;
  /** Keepalive pings sent and answers received on our outbound connection. */
  pings: number;
  pongs: number;
  lastError: string | undefined;
  /** An authenticated inbound message connection from this peer is open. */
  inboundConnected: boolean;
  /** Messages from this peer delivered to onMessage. */
  received: number;
  /** Messages from this peer dropped because `from`/`to` did not match the authenticated ids. */
  misaddressed: number;
  snapshotInFlight: boolean;
  snapshotsSent: number;
  snapshotsFailed: number;
  snapshotsReceived: number;
  snapshotsRejected: number;
}

export interface TransportStats {
  nodeId: NodeId;
  address: { host: string; port: number };
  peers: Record<NodeId, PeerStats>;
  /** Inbound connections that failed the handshake (any reason), and the reasons. */
  rejectedHandshakes: number;
  rejectedByReason: Partial<Record<HandshakeRejectReason, number>>;
  /** Inbound connections replaced by a new authenticated one from the same peer after falling silent (a power loss). */
  replacedInbound: number;
  /** Authenticated connections closed because the peer broke the protocol (bad frame, bad message). */
  protocolErrors: number;
  /** Messages given to send() for a node that is not a peer, or that could not be encoded. */
  unsendable: number;
  /** onMessage threw (the exception is logged; the connection stays up). */
  deliveryErrors: number;
  /** Removal verdicts about this node whose proofs held (each reported to onRemoved). */
  removedVerdicts: number;
  /** Removal verdicts ignored: sent before the listener proved the secret, malformed, or with a bad proof. */
  forgedVerdicts: number;
  pendingHandshakes: number;
  openConnections: number;
}

/** Events, mainly for tests and metrics (never needed for correctness). Each is followed by 'change'. */
export interface TransportEvents {
  peerConnected: [peer: NodeId];
  peerDisconnected: [peer: NodeId];
  /** A keepalive answer arrived on our connection to `peer` (about once per keepaliveIntervalMs). */
  pong: [peer: NodeId];
  inboundConnected: [peer: NodeId, channel: Channel];
  inboundClosed: [peer: NodeId, channel: Channel];
  handshakeRejected: [reason: HandshakeRejectReason, claimedPeer: NodeId | undefined];
  protocolError: [peer: NodeId, message: string];
  snapshotStatus: [peer: NodeId, ok: boolean];
  /** Peer `peer` proved it applied this node's removal at `removedAt` (reported to onRemoved). */
  removedVerdict: [peer: NodeId, removedAt: number];
  /** A removal verdict from `peer` that is not believed (see forgedVerdicts). */
  forgedVerdict: [peer: NodeId, message: string];
  change: [];
}

interface InboundCounters {
  received: number;
  misaddressed: number;
  snapshotsReceived: number;
  snapshotsRejected: number;
}

const PONG_FRAME = encodeFrame(FrameKind.pong);

/**
 * TCP transport between Raft peers: one authenticated outbound connection per peer for messages, a
 * separate one per snapshot, inbound connections that only deliver what the authenticated peer sent.
 * See docs/transport.md for the wire format, the handshake, queues and limits.
 */
export class PeerTransport extends EventEmitter<TransportEvents> implements NodeTransport {
  readonly address: { host: string; port: number };
  private readonly opts: ResolvedOptions;
  private readonly server: PeerServer;
  private readonly links = new Map<NodeId, PeerLink>();
  private readonly inbound = new Map<string, FramedSocket>();
  private readonly inboundCounters = new Map<NodeId, InboundCounters>();
  private readonly sockets = new Set<FramedSocket>();
  private readonly lastUnreachable = new Map<NodeId, number>();
  private readonly rejectedByReason: Partial<Record<HandshakeRejectReason, number>> = {};
  private rejectedHandshakes = 0;
  private replacedInbound = 0;
  private protocolErrors = 0;
  private unsendable = 0;
  private deliveryErrors = 0;
  private removedVerdicts = 0;
  private forgedVerdicts = 0;
  private pendingHandshakes = 0;
  private readonly ticker: TimerHandle;
  private readonly linkContext: LinkContext;
  private closing: Promise<void> | undefined;

  private constructor(opts: ResolvedOptions, server: PeerServer) {
    super();
    this.opts = opts;
    this.server = server;
    const addr = server.address() as AddressInfo;
    this.address = { host: opts.listen.host, port: addr.port };
    this.linkContext = {
      opts,
      track: (conn) => this.track(conn),
      reportUnreachable: (peer) => this.reportUnreachable(peer),
      verdict: (peer, err) => this.onVerdict(peer, err),
      changed: (event, peer) => this.notify(event, peer),
    };
    const period = Math.max(5, Math.floor(Math.min(opts.keepaliveIntervalMs, opts.idleTimeoutMs) / 2));
    this.ticker = opts.timers.setInterval(() => this.tick(), period);
    this.ticker.unref?.();
    for (const [id, addr] of opts.peers) this.addPeer(id, addr);
  }

  /** Listens, then starts dialling every peer. Throws TransportOptionError on bad options, or the listen error. */
  static async start(options: PeerTransportOptions): Promise<PeerTransport> {
    const opts = resolveOptions(options);
    let transport: PeerTransport | undefined;
    const pendingSockets: PeerSocket[] = [];
    const server = opts.socketFactory.createServer((socket) => {
      if (transport) transport.onSocket(socket);
      else {
        socket.on('error', () => {}); // handled properly once the transport exists
        pendingSockets.push(socket);
      }
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: opts.listen.host, port: opts.listen.port }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // A listening server must never crash the process: log errors from here on.
    server.on('error', (err) => opts.logger.error({ err: err.message }, 'transport: server error'));
    transport = new PeerTransport(opts, server);
    for (const s of pendingSockets) transport.onSocket(s);
    return transport;
  }

  /**
   * Sends messages best-effort: each goes into its peer's bounded queue or is dropped (and the peer
   * reported unreachable). Snap messages are streamed on their own connection. Never throws, never
   * blocks, never calls a callback before returning.
   */
  send(messages: Message[]): void {
    if (this.closing || !Array.isArray(messages)) return;
    for (const m of messages) {
      try {
        this.sendOne(m);
      } catch (err) {
        this.unsendable++;
        this.opts.logger.error(
          { to: m?.to, type: m?.type, err: err instanceof Error ? err.message : String(err) },
          'transport: could not encode a message; dropped',
        );
      }
    }
  }

  /** Adds a peer, or changes its address. Idempotent; this node's own id is ignored. Never throws. */
  addPeer(id: NodeId, addr: string): void {
    if (this.closing || id === this.opts.nodeId) return;
    if (!Number.isSafeInteger(id) || id < 1) {
      this.opts.logger.error({ id }, 'transport: addPeer ignored: node id must be a positive integer');
      return;
    }
    const previous = this.opts.peers.get(id);
    const link = this.links.get(id);
    if (link && previous === addr) return;
    this.opts.peers.set(id, addr);
    let target: { host: string; port: number } | undefined;
    try {
      target = parsePeerAddress(addr);
    } catch (err) {
      this.opts.logger.error({ peer: id, addr, err: (err as Error).message }, 'transport: bad peer address');
    }
    if (link) link.setTarget(target);
    else {
      this.links.set(id, new PeerLink(id, target, this.linkContext));
      this.inboundCounters.set(id, {
        received: 0,
        misaddressed: 0,
        snapshotsReceived: 0,
        snapshotsRejected: 0,
      });
    }
  }

  /** Same as addPeer for a known peer: redials at the new address. */
  updatePeer(id: NodeId, addr: string): void {
    this.addPeer(id, addr);
  }

  /** Forgets a peer: stops dialling it, closes its connections, refuses it from now on. */
  removePeer(id: NodeId): void {
    const link = this.links.get(id);
    if (!link) return;
    link.stop();
    this.links.delete(id);
    this.opts.peers.delete(id);
    this.inboundCounters.delete(id);
    this.lastUnreachable.delete(id);
    for (const channel of ['msg', 'snap'] as const) this.inbound.get(key(id, channel))?.close();
  }

  stats(): TransportStats {
    const peers: Record<NodeId, PeerStats> = {};
    for (const [id, link] of this.links) {
      const inb = this.inboundCounters.get(id);
      peers[id] = {
        address: link.target ? `${link.target.host}:${link.target.port}` : '',
        state: link.state,
        connected: link.state === 'connected',
        queued: link.queuedMessages,
        queuedBytes: link.queuedBytes,
        socketBufferedBytes: link.socketBufferedBytes,
        sent: link.counters.sent,
        dropped: link.counters.dropped,
        reconnects: link.counters.reconnects,
        dialFailures: link.counters.dialFailures,
        pings: link.counters.pings,
        pongs: link.counters.pongs,
        lastError: link.lastError,
        inboundConnected: this.inbound.has(key(id, 'msg')),
        received: inb?.received ?? 0,
        misaddressed: inb?.misaddressed ?? 0,
        snapshotInFlight: link.snapshotInFlight,
        snapshotsSent: link.counters.snapshotsSent,
        snapshotsFailed: link.counters.snapshotsFailed,
        snapshotsReceived: inb?.snapshotsReceived ?? 0,
        snapshotsRejected: inb?.snapshotsRejected ?? 0,
      };
    }
    return {
      nodeId: this.opts.nodeId,
      address: { ...this.address },
      peers,
      rejectedHandshakes: this.rejectedHandshakes,
      rejectedByReason: { ...this.rejectedByReason },
      replacedInbound: this.replacedInbound,
      protocolErrors: this.protocolErrors,
      unsendable: this.unsendable,
      deliveryErrors: this.deliveryErrors,
      removedVerdicts: this.removedVerdicts,
      forgedVerdicts: this.forgedVerdicts,
      pendingHandshakes: this.pendingHandshakes,
      openConnections: this.sockets.size,
    };
  }

  /** Stops listening and dialling and closes every connection; resolves when all sockets are released. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.opts.timers.clearInterval(this.ticker);
    for (const link of this.links.values()) link.stop();
    const serverClosed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    const socketsClosed = [...this.sockets].map((s) => {
      s.close();
      return s.closed;
    });
    await Promise.all([serverClosed, ...socketsClosed]);
    // The server's 'close' fires before libuv has released its handle (that happens in the loop's
    // close phase): two turns later nothing of this transport is left in the event loop.
    for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
  }

  // ------------------------------------------------------------------------------------------
  // Sending

  private sendOne(m: Message): void {
    const link = this.links.get(m.to);
    if (!link) {
      this.unsendable++;
      if (m.to !== this.opts.nodeId) this.reportUnreachable(m.to);
      // Every snap message gets exactly one status, even one addressed to a stranger.
      if (m.type === 'snap') this.snapshotOutcome(m.to, false);
      return;
    }
    if (m.type === 'snap') {
      this.startSnapshot(link, m);
      return;
    }
    if (link.state !== 'connected') {
      link.drop();
      return;
    }
    const payload = encodeMessage(m);
    if (payload.length + 1 > this.opts.maxFrameBytes) {
      this.unsendable++;
      this.opts.logger.error(
        { to: m.to, type: m.type, bytes: payload.length, maxFrameBytes: this.opts.maxFrameBytes },
        'transport: message larger than maxFrameBytes; dropped',
      );
      return;
    }
    link.enqueue(encodeFrame(FrameKind.message, payload));
  }

  private startSnapshot(link: PeerLink, m: SnapshotMessage): void {
    const peer = link.peer;
    const target = link.target;
    if (link.snapshotInFlight || !target) {
      this.opts.logger.warn(
        { peer, index: m.snapshot.metadata.index },
        target
          ? 'transport: a snapshot to this peer is already in flight; refusing another'
          : 'transport: no address',
      );
      link.counters.snapshotsFailed++;
      this.snapshotOutcome(peer, false);
      return;
    }
    link.snapshotInFlight = true;
    const o = this.opts;
    const started = o.now();
    dialPeer({
      factory: o.socketFactory,
      target,
      key: o.secret,
      clusterId: o.clusterId,
      selfId: o.nodeId,
      peerId: peer,
      channel: 'snap',
      timeoutMs: o.handshakeTimeoutMs,
      maxFrameBytes: o.maxFrameBytes,
      now: o.now,
      track: (c) => this.track(c),
      timers: o.timers,
      randomBytes: o.randomBytes,
    })
      .then((conn) =>
        streamSnapshot({
          conn,
          msg: m,
          chunkBytes: o.snapshotChunkBytes,
          idleTimeoutMs: o.idleTimeoutMs,
          timers: o.timers,
        }),
      )
      .then(
        () => {
          link.counters.snapshotsSent++;
          o.logger.info(
            {
              peer,
              index: m.snapshot.metadata.index,
              bytes: m.snapshot.data.length,
              ms: Math.round(o.now() - started),
            },
            'transport: snapshot sent',
          );
          return true;
        },
        (err: unknown) => {
          if (err instanceof RemovedVerdictError || err instanceof ForgedVerdictError)
            this.onVerdict(peer, err);
          link.counters.snapshotsFailed++;
          o.logger.warn(
            { peer, index: m.snapshot.metadata.index, err: err instanceof Error ? err.message : String(err) },
            'transport: snapshot failed',
          );
          return false;
        },
      )
      .then((ok) => {
        link.snapshotInFlight = false;
        this.snapshotOutcome(peer, ok);
      });
  }

  private snapshotOutcome(peer: NodeId, ok: boolean): void {
    // Asynchronous, so a status never re-enters the caller of send().
    queueMicrotask(() => {
      if (this.closing) return;
      this.notify('snapshotStatus', peer, ok);
      try {
        this.opts.onSnapshotStatus(peer, ok);
      } catch (err) {
        this.opts.logger.error({ peer, err: String(err) }, 'transport: onSnapshotStatus threw');
      }
    });
  }

  /** A dial to `peer` ended in a removal verdict: believed ones go to onRemoved, the others are only logged. */
  private onVerdict(peer: NodeId, err: RemovedVerdictError | ForgedVerdictError): void {
    if (this.closing) return;
    if (err instanceof ForgedVerdictError) {
      this.forgedVerdicts++;
      this.opts.logger.warn({ peer, err: err.message }, 'transport: ignored a removal verdict');
      this.notify('forgedVerdict', peer, err.message);
      return;
    }
    this.removedVerdicts++;
    this.opts.logger.warn(
      { peer, removedAt: err.removedAt },
      'transport: a peer proved that this node was removed from the cluster',
    );
    this.notify('removedVerdict', peer, err.removedAt);
    queueMicrotask(() => {
      if (this.closing) return;
      try {
        this.opts.onRemoved(peer, err.removedAt);
      } catch (e) {
        this.opts.logger.error({ peer, err: String(e) }, 'transport: onRemoved threw');
      }
    });
  }

  private reportUnreachable(peer: NodeId): void {
    const now = this.opts.now();
    const last = this.lastUnreachable.get(peer);
    if (last !== undefined && now - last < this.opts.unreachableIntervalMs) return;
    this.lastUnreachable.set(peer, now);
    queueMicrotask(() => {
      if (this.closing) return;
      try {
        this.opts.onUnreachable(peer);
      } catch (err) {
        this.opts.logger.error({ peer, err: String(err) }, 'transport: onUnreachable threw');
      }
    });
  }

  // ------------------------------------------------------------------------------------------
  // Receiving

  private onSocket(socket: PeerSocket): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    if (this.pendingHandshakes >= this.opts.maxPendingHandshakes && !bugOn('transport-no-pending-limit')) {
      this.countRejected('busy');
      this.opts.logger.warn(
        { remote: socket.remoteAddress, pending: this.pendingHandshakes },
        'transport: too many unauthenticated connections (maxPendingHandshakes); closing a new one',
      );
      socket.on('error', () => {});
      socket.destroy();
      return;
    }
    const conn = new FramedSocket(socket, HANDSHAKE_MAX_FRAME_BYTES, this.opts.now, this.opts.timers);
    this.track(conn);
    this.pendingHandshakes++;
    const remote = `${socket.remoteAddress}:${socket.remotePort}`;
    acceptHandshake(conn, {
      key: this.opts.secret,
      clusterId: this.opts.clusterId,
      selfId: this.opts.nodeId,
      timeoutMs: this.opts.handshakeTimeoutMs,
      maxFrameBytes: this.opts.maxFrameBytes,
      timers: this.opts.timers,
      randomBytes: this.opts.randomBytes,
      isKnownPeer: (id) => this.links.has(id),
      removedAt: (id) => {
        try {
          return this.opts.removedAt(id);
        } catch (err) {
          this.opts.logger.error({ id, err: String(err) }, 'transport: removedAt threw');
          return undefined;
        }
      },
      claim: (peer, channel, c) => {
        const k = key(peer, channel);
        const old = this.inbound.get(k);
        if (old) {
          // A peer whose machine lost power leaves its old connection open here (no FIN, no RST) until the idle
          // timeout, and its next process dials again. A live dialer is never quiet for a keepalive interval, so an
          // old connection silent for two is that dead one: the new, authenticated claim replaces it. Otherwise
          // the claim is refused (a second process with this node id must not take a live member's place).
          const silentMs = this.opts.now() - old.lastReceivedAt;
          if (silentMs <= 2 * this.opts.keepaliveIntervalMs) return false;
          this.opts.logger.warn(
            { peer, channel, silentMs: Math.round(silentMs) },
            'transport: a new authenticated connection replaces a silent one from the same peer',
          );
          this.replacedInbound++;
          old.close(
            new Error(
              `replaced by a new connection from node ${peer}: silent for ${Math.round(silentMs)} ms`,
            ),
          );
        }
        this.inbound.set(k, c);
        return true;
      },
      onAccepted: (peer, channel, c) => {
        this.pendingHandshakes--;
        this.onInbound(peer, channel, c, remote);
      },
      onRejected: (err, claimedPeer) => {
        this.pendingHandshakes--;
        this.countRejected(err.reason);
        this.opts.logger.warn(
          { remote, claimedPeer, reason: err.reason, err: err.message },
          'transport: refused an inbound peer connection',
        );
        this.notify('handshakeRejected', err.reason, claimedPeer);
      },
    });
  }

  private onInbound(peer: NodeId, channel: Channel, conn: FramedSocket, remote: string): void {
    const o = this.opts;
    const counters = this.inboundCounters.get(peer)!;
    conn.onClose((cause) => {
      if (this.inbound.get(key(peer, channel)) === conn) this.inbound.delete(key(peer, channel));
      if (cause instanceof ProtocolError) {
        this.protocolErrors++;
        o.logger.error(
          { peer, channel, remote, err: cause.message },
          'transport: peer broke the protocol; connection closed',
        );
        this.notify('protocolError', peer, cause.message);
      }
      this.notify('inboundClosed', peer, channel);
    });
    if (channel === 'snap') {
      receiveSnapshot({
        conn,
        peer,
        selfId: o.nodeId,
        maxSnapshotBytes: o.maxSnapshotBytes,
        deliver: (msg) => this.deliver(msg),
        onOutcome: (ok, reason, bytes) => {
          if (ok) counters.snapshotsReceived++;
          else {
            counters.snapshotsRejected++;
            o.logger.warn({ peer, bytes, reason }, 'transport: refused an inbound snapshot');
          }
        },
      });
    } else {
      conn.setHandler((kind, payload) => {
        if (kind === FrameKind.message) {
          const msg = decodeMessage(payload);
          if (msg.from !== peer || msg.to !== o.nodeId) {
            // Not a protocol break worth a reconnect, but never delivered: the sender is who it proved to be.
            counters.misaddressed++;
            // Logged at the 1st, 2nd, 4th, 8th… occurrence: a confused peer cannot flood the log.
            const n = counters.misaddressed;
            if ((n & (n - 1)) !== 0) return;
            o.logger.warn(
              { peer, from: msg.from, to: msg.to, type: msg.type, occurrences: n },
              'transport: dropped a message whose from/to do not match the authenticated connection',
            );
            return;
          }
          counters.received++;
          this.deliver(msg);
          return;
        }
        if (kind === FrameKind.ping) {
          conn.write(PONG_FRAME);
          return;
        }
        throw new ProtocolError(`unexpected frame kind ${kind} on an inbound message connection`);
      });
    }
    o.logger.info({ peer, channel, remote }, 'transport: accepted peer connection');
    this.notify('inboundConnected', peer, channel);
  }

  private deliver(msg: Message): void {
    try {
      this.opts.onMessage(msg);
    } catch (err) {
      this.deliveryErrors++;
      this.opts.logger.error(
        { from: msg.from, type: msg.type, err: err instanceof Error ? err.message : String(err) },
        'transport: onMessage threw',
      );
    }
  }

  // ------------------------------------------------------------------------------------------
  // Housekeeping

  private track(conn: FramedSocket): void {
    if (this.closing) {
      conn.close();
      return;
    }
    this.sockets.add(conn);
    conn.onClose(() => this.sockets.delete(conn));
  }

  private tick(): void {
    const now = this.opts.now();
    for (const link of this.links.values()) link.tick(now);
    for (const conn of this.inbound.values()) {
      if (now - conn.lastReceivedAt > this.opts.idleTimeoutMs) {
        conn.close(new Error(`nothing received for ${this.opts.idleTimeoutMs} ms (idleTimeoutMs)`));
      }
    }
  }

  private countRejected(reason: HandshakeRejectReason): void {
    this.rejectedHandshakes++;
    this.rejectedByReason[reason] = (this.rejectedByReason[reason] ?? 0) + 1;
  }

  private notify<K extends keyof TransportEvents>(event: K, ...args: TransportEvents[K]): void {
    try {
      (this.emit as (e: string, ...a: unknown[]) => boolean)(event, ...args);
      this.emit('change');
    } catch (err) {
      this.opts.logger.error({ event, err: String(err) }, 'transport: an event listener threw');
    }
  }
}

function key(peer: NodeId, channel: Channel): string {
  return `${peer}/${channel}`;
}
