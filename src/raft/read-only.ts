// ReadIndex bookkeeping on the leader (Raft thesis §6.4): each read request remembers the commit index
// at the time it arrived; it is answered once a quorum has acknowledged a heartbeat sent after that,
// which proves this node was still the leader when the request arrived.

import type { NodeId, ReadIndexRequest } from './types.js';

export interface PendingRead {
  index: number;
  req: ReadIndexRequest;
  acks: Set<NodeId>;
}

/** Contexts are compared by content; a string key makes Map lookups work. */
export function contextKey(ctx: Uint8Array): string {
  let s = '';
  for (let i = 0; i < ctx.length; i++) s += String.fromCharCode(ctx[i] as number);
  return s;
}

export class ReadOnly {
  private readonly pending = new Map<string, PendingRead>();
  private queue: string[] = [];

  /** Registers a request; a context already pending is ignored (contexts must be unique per request). */
  addRequest(index: number, req: ReadIndexRequest): void {
    const key = contextKey(req.context);
    if (this.pending.has(key)) return;
    this.pending.set(key, { index, req, acks: new Set() });
    this.queue.push(key);
  }

  /** Records that `id` acknowledged the heartbeat round for ctx; returns the acks so far. */
  recvAck(id: NodeId, ctx: Uint8Array): ReadonlySet<NodeId> | undefined {
    const p = this.pending.get(contextKey(ctx));
    if (p === undefined) return undefined;
    p.acks.add(id);
    return p.acks;
  }

  /**
   * Releases the request for ctx and every request queued before it: a quorum acknowledging a later
   * heartbeat confirms leadership for all earlier ones as well.
   */
  advance(ctx: Uint8Array): PendingRead[] {
    const key = contextKey(ctx);
    const at = this.queue.indexOf(key);
    if (at < 0) return [];
    const released: PendingRead[] = [];
    for (let i = 0; i <= at; i++) {
      const k = this.queue[i] as string;
      const p = this.pending.get(k);
      if (p !== undefined) released.push(p);
      this.pending.delete(k);
    }
    this.queue = this.queue.slice(at + 1);
    return released;
  }

  lastPendingContext(): Uint8Array | undefined {
    const k = this.queue[this.queue.length - 1];
    return k === undefined ? undefined : this.pending.get(k)?.req.context;
  }

  get size(): number {
    return this.queue.length;
  }
}
