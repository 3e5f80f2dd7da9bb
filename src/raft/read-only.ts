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
  /**
   * The highest round each node has acknowledged (this leader's own entry: the latest registered). An ack of round
   * k answers a heartbeat sent after requests 1..k registered, so it counts for every one of them.
   */
  private readonly acked = new Map<NodeId, number>();

  /** Registers a request; returns the context of the round that can confirm it (and every earlier one). */
  addRequest(index: number, req: ReadIndexRequest): Uint8Array {
    const seq = ++this.seq;
    this.queue.push({ seq, index, req });
    return roundContext(seq);
  }

  /** Records that `id` acknowledged the heartbeat of the round in ctx; false when it counts for nothing pending. */
  recvAck(id: NodeId, ctx: Uint8Array): boolean {
    const seq = roundOf(ctx);
    const first = this.queue[0];
    if (seq === undefined || first === undefined || seq < first.seq || seq > this.seq) return false;
    if (seq > (this.acked.get(id) ?? 0)) this.acked.set(id, seq);
    return true;
  }

  /**
   * Releases every pending request whose round a quorum has acknowledged (itself or a later one), oldest first;
   * `hasQuorum` decides for a set of voters under the current configuration.
   */
  release(hasQuorum: (ids: ReadonlySet<NodeId>) => boolean): PendingRead[] {
    // Try the rounds acknowledged, highest first: the first a quorum reached releases it and everything before.
    const rounds = [...new Set(this.acked.values())].sort((a, b) => b - a);
    for (const r of rounds) {
      if (r < (this.queue[0]?.seq ?? Number.POSITIVE_INFINITY)) break;
      const ids = new Set<NodeId>();
      for (const [id, k] of this.acked) if (k >= r) ids.add(id);
      if (hasQuorum(ids)) return this.releaseUpTo(r);
    }
    return [];
  }

  /** Releases every pending request, whatever the acks (a leader that is the only voter). */
  releaseAll(): PendingRead[] {
    return this.releaseUpTo(this.seq);
  }

  private releaseUpTo(seq: number): PendingRead[] {
    let n = 0;
    while (n < this.queue.length && (this.queue[n] as { seq: number }).seq <= seq) n++;
    const released = this.queue.slice(0, n).map(({ index, req }) => ({ index, req }));
    this.queue = this.queue.slice(n);
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
