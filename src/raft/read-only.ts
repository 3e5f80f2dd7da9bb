// ReadIndex bookkeeping on the leader (Raft thesis §6.4): each read request remembers the commit index
// at the time it arrived; it is answered once a quorum has acknowledged a heartbeat sent after that,
// which proves this node was still the leader when the request arrived.
//
// Heartbeats carry a round context of the leader's own, never the request's: requests are numbered as they
// register (unique within the leader's term), and a heartbeat carries the number of the latest one. An
// acknowledgement of round k was sent for a heartbeat sent after request k registered, so it confirms requests
// 1..k. A request's own context can come twice (the network duplicates a forwarded read, a follower asks again):
// were it the heartbeat context, an acknowledgement of a heartbeat sent for the first copy, answered before the
// leader lost its term and delivered late, would confirm the second copy, and every request queued before it,
// with no proof of leadership after they arrived (full simulator, swarm seed 483645: stale reads after a
// machine suspend).

import type { NodeId, ReadIndexRequest } from './types.js';

export interface PendingRead {
  index: number;
  req: ReadIndexRequest;
}

/** First byte of a round context: tells it from anything else a heartbeat response may echo. */
const ROUND_TAG = 0xfe;

/** The context of round `seq`: the tag and the number, big-endian in 8 bytes. */
export function roundContext(seq: number): Uint8Array {
  const b = new Uint8Array(9);
  b[0] = ROUND_TAG;
  new DataView(b.buffer).setBigUint64(1, BigInt(seq));
  return b;
}

/** The round number in a context, or undefined when it is not a round context. */
export function roundOf(ctx: Uint8Array): number | undefined {
  if (ctx.length !== 9 || ctx[0] !== ROUND_TAG) return undefined;
  const n = new DataView(ctx.buffer, ctx.byteOffset, ctx.byteLength).getBigUint64(1);
  return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : undefined;
}

export class ReadOnly {
  /** Pending requests in the order they registered, each with its round number. */
  private queue: Array<PendingRead & { seq: number }> = [];
  private seq = 0;
  /** Acknowledgements per round, for rounds with requests still pending. */
  private readonly acks = new Map<number, Set<NodeId>>();

  /** Registers a request; returns the context of the round that can confirm it (and every earlier one). */
  addRequest(index: number, req: ReadIndexRequest): Uint8Array {
    const seq = ++this.seq;
    this.queue.push({ seq, index, req });
    return roundContext(seq);
  }

  /** Records that `id` acknowledged the heartbeat of the round in ctx; returns the acks so far. */
  recvAck(id: NodeId, ctx: Uint8Array): ReadonlySet<NodeId> | undefined {
    const seq = roundOf(ctx);
    const first = this.queue[0];
    if (seq === undefined || first === undefined || seq < first.seq || seq > this.seq) return undefined;
    let s = this.acks.get(seq);
    if (s === undefined) {
      s = new Set();
      this.acks.set(seq, s);
    }
    s.add(id);
    return s;
  }

  /**
   * Releases every request of the round in ctx and before it: a quorum acknowledging a heartbeat sent after
   * they registered confirms leadership for all of them.
   */
  advance(ctx: Uint8Array): PendingRead[] {
    const seq = roundOf(ctx);
    if (seq === undefined) return [];
    let n = 0;
    while (n < this.queue.length && (this.queue[n] as { seq: number }).seq <= seq) n++;
    const released = this.queue.slice(0, n).map(({ index, req }) => ({ index, req }));
    this.queue = this.queue.slice(n);
    for (const k of this.acks.keys()) if (k <= seq) this.acks.delete(k);
    return released;
  }

  /** The context of the round that covers every pending request (undefined when none is pending). */
  lastPendingContext(): Uint8Array | undefined {
    const last = this.queue[this.queue.length - 1];
    return last === undefined ? undefined : roundContext(last.seq);
  }

  get size(): number {
    return this.queue.length;
  }
}
