// The virtual network between nodes: FloeNode's NodeTransport seam, implemented on the scheduler.
//
// Every message goes through the production wire codec (src/transport/codec.ts) and a CRC-32C
// frame checksum, as bytes: a frame corrupted in flight fails its checksum and is dropped (what a
// TCP/TLS checksum does), and the receiver gets a freshly decoded object, never the sender's.
// Faults: drops, duplicates, reordering (per-link FIFO unless a message is picked to overtake),
// delay and delay spikes, corrupted frames, and any set of blocked directed links (symmetric,
// one-way and partial partitions). A snapshot's sender learns its fate (onSnapshotStatus), as the
// production transport reports the end of a snapshot stream.

import { crc32c } from '@node-rs/crc32';
import type { NodeTransport, TransportSink } from '../../node/seams.js';
import type { Message, NodeId } from '../../raft/types.js';
import { decodeMessage, encodeMessage } from '../../transport/codec.js';
import type { Prng } from '../prng.js';
import type { SimProcess } from './process.js';
import type { Scheduler } from './scheduler.js';

export interface NetConditions {
  /** One-way latency, µs, uniform in [min, max]. */
  delayUs: [number, number];
  drop: number;
  duplicate: number;
  /** Probability that a message ignores per-link FIFO order (it may overtake earlier ones). */
  reorder: number;
  corrupt: number;
  /**
   * Of the corrupted TCP segments (production peer transport only), the share that passes TCP's checksum and reaches
   * the transport: only during a `netNoise` fault (a bad NIC or middlebox episode); absent: none.
   */
  corruptPastTcp?: number;
  /** Probability of a delay spike, and its size range (µs). */
  spike: number;
  spikeUs: [number, number];
}

export const QUIET_NET: NetConditions = {
  delayUs: [200, 2_000],
  drop: 0,
  duplicate: 0,
  reorder: 0,
  corrupt: 0,
  spike: 0,
  spikeUs: [0, 0],
};

export interface NetStats {
  sent: number;
  delivered: number;
  dropped: number;
  duplicated: number;
  corrupted: number;
  blocked: number;
}

interface Endpoint {
  id: NodeId;
  proc: SimProcess;
  sink: TransportSink;
  peers: Set<NodeId>;
  closed: boolean;
  /** Latest delivery time to this endpoint per sending node (per-link FIFO order). */
  lastAt: Map<NodeId, number>;
}

/**
 * A frame in flight: the encoded message and its CRC-32C, kept apart (as bytes on the wire they are payload ++ crc,
 * big-endian: see withChecksum). A corrupted bit lands in either.
 */
interface Frame {
  payload: Buffer;
  /**
   * The checksum sent with the payload; undefined for a frame no fault has touched, whose checksum is crc32c(payload)
   * by construction (so neither end computes it: the check could not fail).
   */
  crc: number | undefined;
}

/** A dial, its handshake and the refusal: a fixed few round trips (no draw, see `dial`). */
const DIAL_VERDICT_US = 2_000;

export class VirtualNetwork {
  conditions: NetConditions;
  readonly stats: NetStats = { sent: 0, delivered: 0, dropped: 0, duplicated: 0, corrupted: 0, blocked: 0 };
  /** Directed links that deliver nothing: "from->to". */
  private readonly blocked = new Set<string>();
  /**
   * Stalled directed links ("from->to"), and until when (global µs): what they carry waits and is delivered, in order,
   * when the stall ends (`linkStall`). Only the time of a delivery changes, never a draw, so a run without stalls is
   * as before.
   */
  private readonly stalls = new Map<string, number>();
  private readonly endpoints = new Map<NodeId, Endpoint>();
  /** Sees every message a node sends, whatever its fate (the Raft checker's wire view). */
  onSend: ((m: Message) => void) | undefined;
  /** Told just before a message is handed to a node. */
  onDeliver: ((to: NodeId) => void) | undefined;

  constructor(
    private readonly sched: Scheduler,
    private readonly rng: Prng,
    conditions: NetConditions,
    private readonly trace: (line: string) => void,
  ) {
    this.conditions = conditions;
  }

  /** The transport of one node process. Messages to it go to the newest attached endpoint. */
  attach(id: NodeId, proc: SimProcess, sink: TransportSink): NodeTransport {
    const ep: Endpoint = { id, proc, sink, peers: new Set(), closed: false, lastAt: new Map() };
    this.endpoints.set(id, ep);
    return {
      send: (messages) => {
        for (const m of messages) this.send(ep, m);
      },
      addPeer: (peer) => {
        ep.peers.add(peer);
        this.dial(id, peer);
      },
      removePeer: (peer) => {
        ep.peers.delete(peer);
        // The production transport closes the connections; the peer, if it still counts this node, dials again.
        this.dial(peer, id);
      },
      close: async () => {
        ep.closed = true;
      },
    };
  }

  /** Blocks the directed links given (replacing any partition in force). */
  setBlocked(links: Iterable<[NodeId, NodeId]>): void {
    this.blocked.clear();
    for (const [a, b] of links) this.blocked.add(`${a}->${b}`);
    // The production transport keeps dialing its peers (with a backoff): a link that works again gets through.
    for (const [a, ep] of this.endpoints) for (const b of ep.peers) this.dial(a, b);
  }

  /**
   * The production transport dials every peer when it is added and again after a connection closes, whether the node
   * has anything to send or not, so a dialer the other side removed is told so in the handshake (FS-23) even if it
   * never sends (a learner; review of FS-23). Here: the verdict, when `to` refuses `from` and knows why. No draw from
   * the seed's stream and nothing scheduled otherwise, so runs without a verdict keep their traces.
   */
  private dial(from: NodeId, to: NodeId): void {
    const refused = (): number | undefined => {
      const a = this.endpoints.get(from);
      const b = this.endpoints.get(to);
      if (!this.live(a) || !a.peers.has(to) || !this.live(b) || b.peers.has(from)) return undefined;
      if (this.blocked.has(`${from}->${to}`) || this.blocked.has(`${to}->${from}`)) return undefined;
      return b.sink.removedAt?.(from);
    };
    if (refused() === undefined) return;
    const a = this.endpoints.get(from) as Endpoint;
    this.sched.after(DIAL_VERDICT_US, a.proc, 'removal verdict', () => {
      const removedAt = refused();
      if (removedAt === undefined || this.endpoints.get(from) !== a) return;
      this.trace(`net ${to}->${from} removal verdict on dial (removed at ${removedAt})`);
      a.sink.onRemoved?.(to, removedAt);
    });
  }

  get blockedLinks(): string[] {
    return [...this.blocked].sort();
  }

  /**
   * Whether the directed link delivers nothing now: blocked by a partition, or stalled (over the production transport
   * both are what TCP shows: the bytes wait for a retransmission after the link is back).
   */
  isBlocked(from: NodeId, to: NodeId): boolean {
    return this.blocked.has(`${from}->${to}`) || this.stalledUntil(from, to) !== undefined;
  }

  /** Stalls the directed links given until `untilUs` (global µs); what they carry meanwhile arrives after it. */
  stall(links: Iterable<[NodeId, NodeId]>, untilUs: number): void {
    for (const [a, b] of links) this.stalls.set(`${a}->${b}`, untilUs);
  }

  /** Ends every stall now (what they held keeps its delivery time). */
  clearStalls(): void {
    this.stalls.clear();
  }

  /** The end of the stall in force on a directed link, or undefined when it is not stalled. */
  private stalledUntil(from: NodeId, to: NodeId): number | undefined {
    if (this.stalls.size === 0) return undefined;
    const until = this.stalls.get(`${from}->${to}`);
    return until !== undefined && until > this.sched.nowUs ? until : undefined;
  }

  private live(ep: Endpoint | undefined): ep is Endpoint {
    return ep !== undefined && !ep.closed && ep.proc.alive;
  }

  private lost(from: Endpoint, m: Message, why: string): void {
    this.stats.dropped++;
    this.trace(`net ${m.from}->${m.to} ${m.type} t${m.term} lost (${why})`);
    if (m.type === 'snap') this.snapStatus(from, m.to, false);
  }

  private send(from: Endpoint, m: Message): void {
    if (!this.live(from)) return;
    this.stats.sent++;
    this.onSend?.(m);
    const c = this.conditions;
    const to = this.endpoints.get(m.to);
    if (!from.peers.has(m.to)) {
      this.lost(from, m, 'not a peer');
      return;
    }
    if (!this.live(to)) {
      this.lost(from, m, 'peer down');
      return;
    }
    if (this.blocked.size > 0 && this.blocked.has(`${m.from}->${m.to}`)) {
      this.stats.blocked++;
      // The production transport notices a dead connection and reports it now and then.
      if (this.rng.chance(0.05)) {
        this.sched.after(this.delay(), from.proc, 'unreachable', () =>
          this.sinkCall(from, 'unreachable', m.to),
        );
      }
      this.lost(from, m, 'partitioned');
      return;
    }
    // FS-23: a member that applied the sender's removal refuses it, and says so (the production handshake's
    // removal verdict; it needs the way back too). Other non-peers are still delivered here, unlike production.
    if (!to.peers.has(m.from)) {
      const removedAt = to.sink.removedAt?.(m.from);
      if (removedAt !== undefined) {
        if (!this.blocked.has(`${m.to}->${m.from}`)) {
          this.sched.after(this.delay(), from.proc, 'removal verdict', () => {
            if (!this.live(from)) return;
            this.trace(`net ${m.to}->${m.from} removal verdict (removed at ${removedAt})`);
            from.sink.onRemoved?.(m.to, removedAt);
          });
        }
        this.lost(from, m, 'refused: removed');
        return;
      }
    }
    if (this.rng.chance(c.drop)) {
      this.lost(from, m, 'dropped');
      return;
    }
    const payload = encodeMessage(m);
    let frame: Frame = { payload, crc: undefined };
    const copies = this.rng.chance(c.duplicate) ? 2 : 1;
    if (copies === 2) this.stats.duplicated++;
    for (let i = 0; i < copies; i++) {
      if (this.rng.chance(c.corrupt)) {
        frame = flipFrameBit(frame, this.rng.int((frame.payload.length + 4) * 8));
        this.stats.corrupted++;
      }
      let at = this.sched.nowUs + this.delay();
      const last = to.lastAt.get(m.from) ?? 0;
      if (!this.rng.chance(c.reorder)) at = Math.max(at, last);
      const stalled = this.stalledUntil(m.from, m.to);
      if (stalled !== undefined) at = Math.max(at, stalled);
      to.lastAt.set(m.from, Math.max(at, last));
      const sentFrame = frame;
      if (m.type === 'snap') {
        const state = { delivered: false };
        this.sched.at(at, to.proc, 'deliver snap', () => {
          state.delivered = true;
          this.deliver(from, to, sentFrame, m);
        });
        // A snapshot whose receiver dies before it arrives is never delivered (its process's events
        // go with it); the production transport sees the stream break and reports it (FS-7, swarm
        // seed 114266: the leader waited on that snapshot for ever). Watch from the sender's side.
        this.watchSnapshot(from, to, m.to, at, state);
      } else {
        this.sched.at(at, to.proc, deliverLabel(m.type), () => this.deliver(from, to, sentFrame, m));
      }
    }
  }

  private deliver(from: Endpoint, to: Endpoint, frame: Frame, sent: Message): void {
    if (!this.live(to)) {
      if (sent.type === 'snap') this.snapStatus(from, sent.to, false);
      return;
    }
    if (frame.crc !== undefined && crc32c(frame.payload) !== frame.crc) {
      this.trace(`net ${sent.from}->${sent.to} ${sent.type} frame failed its checksum: dropped`);
      if (sent.type === 'snap') this.snapStatus(from, sent.to, false);
      return;
    }
    const m = decodeMessage(frame.payload);
    this.stats.delivered++;
    this.onDeliver?.(m.to);
    this.sinkCall(to, 'message', m);
    if (m.type === 'snap') this.snapStatus(from, m.to, true);
  }

  private watchSnapshot(
    from: Endpoint,
    to: Endpoint,
    peer: NodeId,
    atUs: number,
    state: { delivered: boolean },
  ): void {
    this.sched.at(atUs + 1, from.proc, 'snapWatch', () => {
      if (state.delivered || !this.live(from)) return;
      if (!this.live(to)) {
        this.trace(`net ${from.id}->${peer} snap lost (receiver died before it arrived)`);
        this.snapStatus(from, peer, false);
        return;
      }
      // Held back by a paused receiver: look again later.
      this.watchSnapshot(from, to, peer, this.sched.nowUs + 100_000, state);
    });
  }

  private snapStatus(from: Endpoint, peer: NodeId, ok: boolean): void {
    this.sched.after(this.delay(), from.proc, 'snapStatus', () => {
      if (this.live(from)) this.sinkCall(from, 'snapStatus', peer, ok);
    });
  }

  private sinkCall(
    ep: Endpoint,
    what: 'message' | 'unreachable' | 'snapStatus',
    arg: unknown,
    ok?: boolean,
  ): void {
    if (!this.live(ep)) return;
    if (what === 'message') ep.sink.onMessage(arg as Message);
    else if (what === 'unreachable') ep.sink.onUnreachable(arg as NodeId);
    else ep.sink.onSnapshotStatus(arg as NodeId, ok as boolean);
  }

  private delay(): number {
    const c = this.conditions;
    let d = this.rng.range(c.delayUs[0], c.delayUs[1]);
    if (c.spike > 0 && this.rng.chance(c.spike)) d += this.rng.range(c.spikeUs[0], c.spikeUs[1]);
    return d;
  }
}

/** Event labels of deliveries, by message type (built once, not per message). */
const deliverLabels = new Map<string, string>();
function deliverLabel(type: string): string {
  let l = deliverLabels.get(type);
  if (l === undefined) deliverLabels.set(type, (l = `deliver ${type}`));
  return l;
}

/**
 * The frame with bit `bit` of its wire form (payload ++ crc32c, big-endian: withChecksum) flipped. The payload is
 * copied when the bit is in it (another copy of the message may be in flight).
 */
function flipFrameBit(f: Frame, bit: number): Frame {
  const byte = bit >> 3;
  const mask = 1 << (bit & 7);
  const crc = f.crc ?? crc32c(f.payload);
  if (byte < f.payload.length) {
    const payload = Buffer.from(f.payload);
    payload[byte] = (payload[byte] as number) ^ mask;
    return { payload, crc };
  }
  // Byte 0 of the checksum is its most significant one.
  const shift = 8 * (3 - (byte - f.payload.length));
  return { payload: f.payload, crc: (crc ^ (mask << shift)) >>> 0 };
}

/** payload ++ crc32c(payload) (4 bytes, big-endian). */
export function withChecksum(payload: Buffer): Buffer {
  const out = Buffer.allocUnsafe(payload.length + 4);
  payload.copy(out, 0);
  out.writeUInt32BE(crc32c(payload), payload.length);
  return out;
}

/** The payload of a frame whose checksum holds, else undefined. */
export function checkedPayload(frame: Buffer): Buffer | undefined {
  if (frame.length < 4) return undefined;
  const payload = frame.subarray(0, frame.length - 4);
  return crc32c(payload) === frame.readUInt32BE(frame.length - 4) ? payload : undefined;
}
