// The production PeerTransport between simulated node processes: the node's NodeTransport is
// `PeerTransport` itself (src/transport: dialling, the cluster-secret handshake, framing, bounded
// queues and socket backpressure, keepalives and idle detection, reconnect backoff, snapshot streams on
// their own connection), started on the process's virtual clock, timers and randomness, with sockets
// from this file instead of node:net (the transport's SocketFactory and its PeerSocket/PeerServer
// types).
//
// A connection is a pair of SimPeerSockets. Bytes travel as events of the receiving process, in order
// per direction, never lost or reordered inside a connection (TCP). The network's faults reach a
// connection as TCP would show them:
// - delay and delay spikes: the run's one-way delay per segment (`NetConditions`);
// - loss: a lost segment is retransmitted, 200 ms later per loss (TCP's minimum RTO);
// - a corrupted segment is caught by TCP's checksum and retransmitted (a stall); during a `netNoise` fault one in
//   eight passes it (TCP's 16-bit sum misses some multi-bit damage, and a NIC or middlebox may corrupt after
//   checking it) and is delivered: the transport's frame checksum must catch it and close the connection. The
//   harness bug `peer-corrupt-delivered` delivers every corrupted segment, at any time;
// - a partition (any directed link blocked, one-way included) stalls the bytes that would cross it:
//   they wait, retransmitted with a doubling RTO (200 ms .. 3.2 s), and flow again once it heals,
//   unless the transport's idle timeout closed the connection first;
// - resets: a connection is reset by the network with a drawn probability per segment (a middlebox,
//   a NAT table flush), and when a process at either end dies (its kernel closes its sockets);
// - a SYN across a blocked link is lost (retried after 1 s, 2 s, ...; the dialler's handshake
//   timeout ends it); a connect to an address with no live listener is refused.
// Send buffers: write() returns false once more than the drawn kernel buffer plus 16 KiB (Node's
// high-water mark) is written and not yet delivered, and 'drain' follows when it is all delivered:
// the transport's backpressure (its bounded queue in front of the socket) runs.

import type { NodeTransport, TransportSink } from '../../node/seams.js';
import type { NodeId } from '../../raft/types.js';
import type { PeerServer, PeerSocket, SocketFactory } from '../../transport/socket-factory.js';
import { PeerTransport } from '../../transport/transport.js';
import type { Prng } from '../prng.js';
import type { NetConditions, VirtualNetwork } from './network.js';
import { STRANGER_NET_ID_BASE, STRANGER_TERM } from './peer-strangers.js';
import type { SimProcess } from './process.js';
import type { World } from './world.js';

/** Per-seed settings of the production transport (config.ts, stream `config-late4-transport`). */
export interface PeerTransportConfig {
  /** The transport's maxPendingHandshakes (absent: the production default); set in seeds with peer strangers. */
  maxPendingHandshakes?: number;
  /** Run the production PeerTransport (else the simulator's NodeTransport of network.ts). */
  production: boolean;
  /** Kernel send buffer per socket, bytes. */
  sndBufBytes: number;
  /** Probability that a data segment makes the network reset its connection. */
  resetChance: number;
  /** PeerTransport snapshotChunkBytes. */
  snapshotChunkBytes: number;
  /**
   * A node machine that loses power leaves its connections half-open: the other ends are told nothing, get no ACK,
   * and are reset only when a segment reaches the rebooted machine's kernel (or after TCP's retransmissions give
   * up). Absent: the other ends see a reset, as after a process crash. Stream `config-late7-halfopen`.
   */
  halfOpenOnPowerLoss?: boolean;
}

export interface PeerNetStats {
  connects: number;
  refused: number;
  synLost: number;
  resets: number;
  segments: number;
  stalls: number;
  corruptCaught: number;
  corruptDelivered: number;
  drains: number;
  /** Snapshots delivered to a node through a snapshot stream, and the senders' outcomes. */
  snapshotsDelivered: number;
  snapshotsOk: number;
  snapshotsFailed: number;
  /** Connections closed by the transport because a frame failed its checksum (either end's log). */
  frameChecksumFailures: number;
  /** Connections left half-open by a power loss (`halfOpenOnPowerLoss`). */
  halfOpen: number;
  /** Silent inbound connections a member's new connection replaced (either end's log). */
  replacedInbound: number;
}

/** Harness bugs of the transport path (run.ts lists them with the others). */
export const PEER_HARNESS_BUGS: readonly string[] = ['peer-corrupt-delivered'];

/** Node's default high-water mark of a writable stream. */
const HIGH_WATER_MARK = 16 * 1024;
const MIN_RTO_US = 200_000;
/** TCP's minimum retransmission timeout (Linux), ms. */
export const PEER_MIN_RTO_MS = MIN_RTO_US / 1000;
const MAX_RTO_US = 3_200_000;
/** Retransmissions before a connection to a silent machine is given up (Linux tcp_retries2 is 15; fewer here, as the runs are short). */
const TCP_MAX_RETRIES = 8;

type Segment = { kind: 'data'; bytes: Buffer } | { kind: 'fin' } | { kind: 'rst'; why: string };
type Listener = (...args: never[]) => void;

/** One end of a simulated TCP connection between node processes. */
export class SimPeerSocket implements PeerSocket {
  destroyed = false;
  private writable = true;
  private peerEnded = false;
  /** Bytes written and not yet delivered to the peer. */
  unacked = 0;
  private needDrain = false;
  private corked = 0;
  private corkedChunks: Buffer[] = [];
  private readonly listeners = new Map<string, Listener[]>();

  constructor(
    readonly conn: SimConn,
    readonly proc: SimProcess,
    readonly nodeId: NodeId,
    readonly remoteAddress: string,
    readonly remotePort: number,
  ) {}

  get writableLength(): number {
    return Math.max(0, this.unacked - this.conn.net.cfg.sndBufBytes);
  }

  on(event: string, listener: Listener): this {
    const l = this.listeners.get(event);
    if (l) l.push(listener);
    else this.listeners.set(event, [listener]);
    return this;
  }

  once(event: string, listener: Listener): this {
    const wrapped = ((...args: unknown[]) => {
      this.off(event, wrapped);
      (listener as (...a: unknown[]) => void)(...args);
    }) as Listener;
    return this.on(event, wrapped);
  }

  private off(event: string, listener: Listener): void {
    const l = this.listeners.get(event);
    const i = l?.indexOf(listener) ?? -1;
    if (l && i >= 0) l.splice(i, 1);
  }

  emit(event: string, ...args: unknown[]): void {
    const l = this.listeners.get(event);
    if (!l) return;
    for (const f of [...l]) (f as (...a: unknown[]) => void)(...args);
  }

  setNoDelay(): this {
    return this;
  }

  cork(): void {
    this.corked++;
  }

  uncork(): void {
    if (this.corked === 0) return;
    if (--this.corked > 0 || this.corkedChunks.length === 0) return;
    const bytes = Buffer.concat(this.corkedChunks);
    this.corkedChunks = [];
    this.conn.send(this, { kind: 'data', bytes });
  }

  write(data: Uint8Array): boolean {
    if (!this.writable || this.destroyed) return false;
    const bytes = Buffer.from(data); // the caller may reuse its buffer; the wire holds a copy
    this.unacked += bytes.length;
    if (this.corked > 0) this.corkedChunks.push(bytes);
    else this.conn.send(this, { kind: 'data', bytes });
    const ok = this.writableLength < HIGH_WATER_MARK;
    if (!ok) this.needDrain = true;
    return ok;
  }

  end(data?: Uint8Array): this {
    if (data) this.write(data);
    if (!this.writable || this.destroyed) return this;
    this.corked = 1;
    this.uncork();
    this.writable = false;
    this.conn.send(this, { kind: 'fin' });
    if (this.peerEnded) this.closed();
    return this;
  }

  destroy(): this {
    if (this.destroyed) return this;
    if (this.writable) {
      this.corked = 1;
      this.uncork();
      this.conn.send(this, { kind: 'fin' });
    }
    this.closed();
    return this;
  }

  /** The peer took `n` bytes of ours (an event of this end's process after delivery). */
  acked(n: number): void {
    this.unacked -= n;
    if (this.needDrain && this.writableLength === 0 && !this.destroyed) {
      this.needDrain = false;
      this.conn.net.stats.drains++;
      this.emit('drain');
    }
  }

  /** A segment arrives (an event of this end's process). */
  receive(seg: Segment): void {
    if (this.destroyed) return;
    if (seg.kind === 'rst') {
      this.emit('error', Object.assign(new Error(`read ECONNRESET (${seg.why})`), { code: 'ECONNRESET' }));
      this.closed();
      return;
    }
    if (seg.kind === 'data') {
      this.emit('data', seg.bytes);
      return;
    }
    if (!this.peerEnded) {
      this.peerEnded = true;
      this.emit('end');
      if (!this.writable) this.closed();
    }
  }

  /** A connect that failed: 'error' then 'close', as node:net reports ECONNREFUSED. */
  refused(why: string): void {
    if (this.destroyed) return;
    this.emit('error', Object.assign(new Error(`connect ECONNREFUSED (${why})`), { code: 'ECONNREFUSED' }));
    this.closed();
  }

  private closed(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.writable = false;
    this.corkedChunks = [];
    this.conn.ended(this);
    // Node emits 'close' on a later tick, never inside destroy().
    process.nextTick(() => this.emit('close'));
  }
}

/** The bytes of one direction of a connection: in order, stalled while its link is blocked. */
class Direction {
  readonly queue: Segment[] = [];
  lastAt = 0;
  rtoUs = MIN_RTO_US;
  waiting = false;
}

/** One TCP connection between a dialling node process and a listening one. */
export class SimConn {
  dialer!: SimPeerSocket;
  listener: SimPeerSocket | undefined;
  reset = false;
  /** The end whose machine lost power, when the connection was left half-open (`halfOpenOnPowerLoss`). */
  private deadEnd: SimPeerSocket | undefined;
  /** Retransmissions towards a powered-off end (TCP gives up after TCP_MAX_RETRIES of them). */
  private unanswered = 0;
  /** Data segments the dialer wrote so far (the first two of a member's dial are recorded for strangers). */
  dialerSegments = 0;
  private readonly up = new Direction();
  private readonly down = new Direction();

  constructor(
    readonly net: PeerNet,
    readonly name: string,
  ) {}

  send(from: SimPeerSocket, seg: Segment): void {
    if (this.reset) return;
    const to = from === this.dialer ? this.listener : this.dialer;
    if (!to) return;
    const dir = from === this.dialer ? this.up : this.down;
    if (
      this.net.recording &&
      from === this.dialer &&
      seg.kind === 'data' &&
      from.nodeId < STRANGER_NET_ID_BASE
    )
      this.net.record(this, seg.bytes);
    dir.queue.push(seg);
    if (!dir.waiting) this.pump(from, to, dir);
  }

  /** Moves what `from` wrote onto the wire, unless its link is blocked (then it waits for a retransmission). */
  private pump(from: SimPeerSocket, to: SimPeerSocket, dir: Direction): void {
    const net = this.net;
    const w = net.world;
    dir.waiting = false;
    while (!this.reset && dir.queue.length > 0) {
      if (to === this.deadEnd) {
        // Nothing answers while the machine is off; once it runs again its kernel answers with RST.
        const up = net.machineUp(to.nodeId);
        if (up || this.unanswered >= TCP_MAX_RETRIES) {
          this.resetOne(from, up ? 'reset by the rebooted peer' : 'retransmissions timed out');
          return;
        }
        this.unanswered++;
        dir.waiting = true;
        const rto = dir.rtoUs;
        dir.rtoUs = Math.min(MAX_RTO_US, rto * 2);
        w.sched.after(rto, undefined, 'peer-rto', () => this.pump(from, to, dir));
        return;
      }
      if (net.vnet.isBlocked(from.nodeId, to.nodeId)) {
        net.stats.stalls++;
        dir.waiting = true;
        const rto = dir.rtoUs;
        dir.rtoUs = Math.min(MAX_RTO_US, rto * 2);
        w.sched.after(rto, undefined, 'peer-rto', () => this.pump(from, to, dir));
        return;
      }
      dir.rtoUs = MIN_RTO_US;
      let seg = dir.queue.shift() as Segment;
      let extraUs = 0;
      if (seg.kind === 'data') {
        net.stats.segments++;
        // Resets are a fault: none after the heal (a 2-voter cluster with a short election timeout elects again on
        // every reset, and each new leader gives every lease a full TTL: swarm seed 451036 never freed its pool).
        if (net.rng.chance(net.cfg.resetChance) && !net.healed) {
          this.resetBoth('reset by the network');
          return;
        }
        const c = net.conditions();
        if (c.corrupt > 0 && net.rng.chance(c.corrupt)) {
          const flipped = flipBit(seg.bytes, net.rng.int(seg.bytes.length * 8));
          const past = c.corruptPastTcp ?? 0;
          if (w.bugs.has('peer-corrupt-delivered') || (past > 0 && net.rng.chance(past))) {
            net.stats.corruptDelivered++;
            w.trace(`peer ${this.name}: a corrupted segment passes TCP's checksum`);
            seg = { kind: 'data', bytes: flipped };
          } else {
            // TCP's checksum catches it: the segment is dropped and sent again.
            net.stats.corruptCaught++;
            extraUs += MIN_RTO_US;
          }
        }
      }
      const at = Math.max(from.proc.effectiveUs + net.delayUs() + extraUs, dir.lastAt);
      dir.lastAt = at;
      const s = seg;
      const n = s.kind === 'data' ? s.bytes.length : 0;
      w.sched.at(at, to.proc, `peer ${s.kind}`, () => {
        to.receive(s);
        // The sender learns of the delivery one delay later (its ACK); nothing is lost after delivery.
        if (n > 0 && !from.destroyed)
          w.sched.after(net.delayUs(), from.proc, 'peer-ack', () => from.acked(n));
      });
    }
  }

  /** Both ends see a reset, each after a network delay (an end whose process died never sees it). */
  resetBoth(why: string): void {
    if (this.reset) return;
    this.reset = true;
    const net = this.net;
    net.stats.resets++;
    net.world.trace(`peer ${this.name} reset: ${why}`);
    for (const end of [this.dialer, this.listener]) {
      if (!end || end.destroyed || !end.proc.alive) continue;
      net.world.sched.after(net.delayUs(), end.proc, 'peer-rst', () => end.receive({ kind: 'rst', why }));
    }
  }

  /** The machine of `dead` lost power: the other end is told nothing (its next segment finds out). */
  halfOpen(dead: SimPeerSocket): void {
    if (this.reset) return;
    this.deadEnd = dead;
    this.net.stats.halfOpen++;
    this.net.world.trace(`peer ${this.name} half-open: ${dead.proc.name} lost power`);
  }

  /** Only `end` sees a reset (the other end is gone). */
  private resetOne(end: SimPeerSocket, why: string): void {
    this.reset = true;
    const net = this.net;
    net.stats.resets++;
    net.world.trace(`peer ${this.name} reset: ${why}`);
    if (!end.destroyed && end.proc.alive)
      net.world.sched.after(net.delayUs(), end.proc, 'peer-rst', () => end.receive({ kind: 'rst', why }));
  }

  ended(_end: SimPeerSocket): void {
    if (this.dialer.destroyed && (this.listener?.destroyed ?? true)) this.net.forget(this);
  }
}

interface ListenEntry {
  proc: SimProcess;
  nodeId: NodeId;
  onSocket: (s: PeerSocket) => void;
}

/** Connections between node processes, and their listeners. */
export class PeerNet {
  readonly stats: PeerNetStats = {
    connects: 0,
    refused: 0,
    synLost: 0,
    resets: 0,
    segments: 0,
    stalls: 0,
    corruptCaught: 0,
    corruptDelivered: 0,
    drains: 0,
    snapshotsDelivered: 0,
    snapshotsOk: 0,
    snapshotsFailed: 0,
    frameChecksumFailures: 0,
    halfOpen: 0,
    replacedInbound: 0,
  };
  readonly rng: Prng;
  /** Set when every fault ends: the network stops resetting connections. */
  healed = false;
  /** Each node's running transport (for the stranger oracles). */
  readonly transports = new Map<NodeId, { proc: SimProcess; transport: PeerTransport }>();
  /** Record members' handshake bytes for strangers to replay (seeds with peer strangers only). */
  recording = false;
  readonly recordedHandshakes: { listener: string; hello: Buffer; auth: Buffer }[] = [];
  private readonly partial = new Map<SimConn, Buffer>();
  private readonly listeners = new Map<string, ListenEntry>();
  private readonly conns = new Map<SimProcess, Set<SimConn>>();
  private nextPort = 50_000;

  constructor(
    readonly world: World,
    readonly vnet: VirtualNetwork,
    readonly cfg: PeerTransportConfig,
  ) {
    this.rng = world.rng('peer-net');
  }

  /** The first two segments a member dialler writes: its HELLO and its AUTH (at most 16 handshakes kept). */
  record(conn: SimConn, bytes: Buffer): void {
    conn.dialerSegments++;
    if (conn.dialerSegments === 1) this.partial.set(conn, Buffer.from(bytes));
    else if (conn.dialerSegments === 2) {
      const hello = this.partial.get(conn);
      this.partial.delete(conn);
      const addr = conn.name.slice(conn.name.indexOf('->') + 2);
      if (hello && this.recordedHandshakes.length < 16)
        this.recordedHandshakes.push({ listener: addr, hello, auth: Buffer.from(bytes) });
    }
  }

  /** A connection from a process that is not a member (peer-strangers.ts); `netId` names it on the network. */
  connectStranger(proc: SimProcess, netId: NodeId, addr: string, onReady: () => void): SimPeerSocket {
    return this.connect(netId, proc, addr, onReady);
  }

  conditions(): NetConditions {
    return this.vnet.conditions;
  }

  /** One-way delay of a segment: the run's delay, spikes, and a retransmission for each loss. */
  delayUs(): number {
    const c = this.vnet.conditions;
    let d = this.rng.range(c.delayUs[0], c.delayUs[1]);
    if (c.spike > 0 && this.rng.chance(c.spike)) d += this.rng.range(c.spikeUs[0], c.spikeUs[1]);
    for (let i = 0; i < 5 && c.drop > 0 && this.rng.chance(c.drop); i++) d += MIN_RTO_US;
    return d;
  }

  /**
   * Starts the production PeerTransport of node `id` in process `proc` and returns it as the node's
   * NodeTransport (wrapped so that the Raft observer sees what is sent and delivered, as with network.ts).
   */
  async start(id: NodeId, proc: SimProcess, sink: TransportSink, addr: string): Promise<NodeTransport> {
    const w = this.world;
    const vnet = this.vnet;
    const rng = w.rng(`peer-transport-${proc.name}`);
    const guard = (what: string, fn: () => void) => () => {
      try {
        fn();
      } catch (err) {
        w.fail(
          'process-crash',
          `${proc.name} threw from ${what}: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    };
    const [host, port] = splitAddr(addr);
    const log =
      (level: string) =>
      (obj: object, msg: string): void => {
        const text = JSON.stringify(obj);
        if (text.includes('frame checksum mismatch')) this.stats.frameChecksumFailures++;
        if (msg.includes('replaces a silent one')) this.stats.replacedInbound++;
        w.trace(`${proc.name} ${level}: ${msg} ${text.slice(0, 200)}`);
      };
    const t = await PeerTransport.start({
      nodeId: id,
      clusterId: 'sim',
      secret: 'sim-cluster-peer-secret',
      listen: { host, port },
      peers: new Map(),
      onMessage: (m) => {
        if (m.term === STRANGER_TERM) {
          w.fail(
            'peer-stranger',
            `${proc.name}'s transport delivered a stranger's ${m.type} (claiming n${m.from}) to Raft`,
          );
          return;
        }
        vnet.stats.delivered++;
        vnet.onDeliver?.(m.to);
        if (m.type === 'snap') this.stats.snapshotsDelivered++;
        sink.onMessage(m);
      },
      onUnreachable: (p) => sink.onUnreachable(p),
      onSnapshotStatus: (p, ok) => {
        if (ok) this.stats.snapshotsOk++;
        else this.stats.snapshotsFailed++;
        sink.onSnapshotStatus(p, ok);
      },
      removedAt: (p) => sink.removedAt?.(p),
      onRemoved: (p, removedAt) => sink.onRemoved?.(p, removedAt),
      logger: {
        info: (obj, msg) => w.detail?.(`${proc.name} info: ${msg} ${JSON.stringify(obj)}`),
        warn: log('warn'),
        error: log('error'),
      },
      snapshotChunkBytes: this.cfg.snapshotChunkBytes,
      ...(this.cfg.maxPendingHandshakes === undefined
        ? {}
        : { maxPendingHandshakes: this.cfg.maxPendingHandshakes }),
      random: () => rng.float(),
      now: () => proc.monoMs(),
      randomBytes: (n) => {
        const b = Buffer.allocUnsafe(n);
        for (let i = 0; i < n; i++) b[i] = rng.int(256);
        return b;
      },
      timers: {
        setTimeout: (fn, ms) => proc.setTimeout(guard('a transport timer', fn), ms, 'transport-timer'),
        clearTimeout: (h) => proc.clearTimer(h),
        setInterval: (fn, ms) => proc.setInterval(guard('the transport ticker', fn), ms, 'transport-tick'),
        clearInterval: (h) => proc.clearTimer(h),
      },
      socketFactory: this.factoryFor(id, proc),
    });
    this.transports.set(id, { proc, transport: t });
    return {
      send: (messages) => {
        if (!proc.alive) return;
        for (const m of messages) {
          vnet.stats.sent++;
          vnet.onSend?.(m);
        }
        t.send(messages);
      },
      addPeer: (peer, a) => t.addPeer(peer, a),
      removePeer: (peer) => t.removePeer(peer),
      close: () => t.close(),
    };
  }

  /** The sockets and the listener of one node process. */
  private factoryFor(nodeId: NodeId, proc: SimProcess): SocketFactory<PeerSocket, PeerServer> {
    this.watch(proc);
    return {
      connect: (target, onReady) => this.connect(nodeId, proc, `${target.host}:${target.port}`, onReady),
      createServer: (onSocket) => {
        let key: string | undefined;
        const entry: ListenEntry = { proc, nodeId, onSocket };
        return {
          listen: (o, cb) => {
            key = `${o.host}:${o.port}`;
            this.listeners.set(key, entry);
            process.nextTick(cb);
          },
          address: () => {
            const [address, port] = splitAddr(key ?? ':0');
            return { address, family: 'IPv4', port };
          },
          close: (cb) => {
            if (key !== undefined && this.listeners.get(key) === entry) this.listeners.delete(key);
            process.nextTick(cb);
          },
          on: () => undefined,
          once: () => undefined,
          off: () => undefined,
        };
      },
    };
  }

  private connect(fromId: NodeId, proc: SimProcess, addr: string, onReady: () => void): SimPeerSocket {
    const w = this.world;
    const port = this.nextPort++;
    const conn = new SimConn(this, `n${fromId}:${port}->${addr}`);
    const target = this.listeners.get(addr);
    const client = new SimPeerSocket(
      conn,
      proc,
      fromId,
      addr.split(':')[0] as string,
      Number(addr.split(':')[1]),
    );
    conn.dialer = client;
    this.track(proc, conn);
    let rtoUs = 1_000_000;
    const syn = () => {
      if (client.destroyed || !proc.alive) return;
      const l = this.listeners.get(addr);
      if (!l || l !== target || !l.proc.alive) {
        // Nobody listens there (any more): the kernel answers with a RST.
        this.stats.refused++;
        w.sched.after(this.delayUs(), proc, 'peer-refused', () => client.refused(addr));
        return;
      }
      if (
        this.vnet.isBlocked(fromId, l.nodeId) ||
        this.vnet.isBlocked(l.nodeId, fromId) ||
        l.proc.machine.clock.suspended
      ) {
        // The SYN or its answer is lost: the kernel tries again, 1 s, 2 s, 4 s ... later.
        this.stats.synLost++;
        w.sched.after(rtoUs, undefined, 'peer-syn', syn);
        rtoUs *= 2;
        return;
      }
      const server = new SimPeerSocket(conn, l.proc, l.nodeId, `n${fromId}`, port);
      conn.listener = server;
      this.track(l.proc, conn);
      this.stats.connects++;
      // The listening kernel accepts at once (a paused process accepts when it runs again).
      w.sched.after(0, l.proc, 'peer-accept', () => l.onSocket(server));
      w.sched.after(this.delayUs(), proc, 'peer-connected', () => {
        if (!client.destroyed) onReady();
      });
    };
    if (!target) {
      this.stats.refused++;
      w.sched.after(this.delayUs(), proc, 'peer-refused', () => client.refused(addr));
    } else {
      w.sched.at(proc.effectiveUs + this.delayUs(), undefined, 'peer-syn', syn);
    }
    return client;
  }

  /** A process of node `nodeId` runs and listens (its machine's kernel would answer a segment). */
  machineUp(nodeId: NodeId): boolean {
    for (const e of this.listeners.values()) if (e.nodeId === nodeId && e.proc.alive) return true;
    return false;
  }

  private track(proc: SimProcess, conn: SimConn): void {
    this.conns.get(proc)?.add(conn);
  }

  forget(conn: SimConn): void {
    this.conns.get(conn.dialer.proc)?.delete(conn);
    if (conn.listener) this.conns.get(conn.listener.proc)?.delete(conn);
  }

  /** When a node process dies, its kernel resets its connections. */
  private watch(proc: SimProcess): void {
    if (this.conns.has(proc)) return;
    const set = new Set<SimConn>();
    this.conns.set(proc, set);
    const kill = proc.kill.bind(proc);
    proc.kill = () => {
      kill();
      const silent = proc.lostPower && this.cfg.halfOpenOnPowerLoss === true;
      for (const c of set) {
        if (silent) c.halfOpen(c.dialer.proc === proc ? c.dialer : (c.listener as SimPeerSocket));
        else c.resetBoth(`${proc.name} died`);
      }
      set.clear();
      this.conns.delete(proc);
    };
  }
}

function splitAddr(addr: string): [string, number] {
  const i = addr.lastIndexOf(':');
  return [addr.slice(0, i), Number(addr.slice(i + 1))];
}

/** A copy of `bytes` with bit `bit` flipped. */
function flipBit(bytes: Buffer, bit: number): Buffer {
  const out = Buffer.from(bytes);
  out[bit >> 3] = (out[bit >> 3] as number) ^ (1 << (bit & 7));
  return out;
}
