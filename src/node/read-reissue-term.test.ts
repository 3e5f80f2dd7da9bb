// Review of FS-14's fix, node side: a follower asks its pending reads again when its leader is elected again.
import { describe, expect, it } from 'vitest';
import type { Message } from '../raft/types.js';
import { type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import type { NodeClock, NodeTimers, NodeTransport } from './seams.js';

/** Virtual time: timers fire only in run()/advance(), in time order, then FIFO. */
class VirtualTimers implements NodeTimers {
  now = 0;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; every: number; fn: () => void }>();
  private immediates: Array<() => void> = [];

  setTimeout(fn: () => void, ms: number): unknown {
    this.timers.set(++this.seq, { at: this.now + ms, every: 0, fn });
    return this.seq;
  }
  clearTimeout(h: unknown): void {
    this.timers.delete(h as number);
  }
  setInterval(fn: () => void, ms: number): unknown {
    this.timers.set(++this.seq, { at: this.now + ms, every: ms, fn });
    return this.seq;
  }
  clearInterval(h: unknown): void {
    this.timers.delete(h as number);
  }
  setImmediate(fn: () => void): unknown {
    this.immediates.push(fn);
    return undefined;
  }
  get pendingTimers(): number {
    return this.timers.size;
  }

  /** Runs immediates (and the microtasks they cause) until none is left. */
  async settle(): Promise<void> {
    for (let i = 0; i < 10_000; i++) {
      for (let j = 0; j < 5; j++) await Promise.resolve();
      const next = this.immediates.shift();
      if (!next) {
        await new Promise((r) => setImmediate(r)); // let real I/O-free promise chains finish
        if (this.immediates.length === 0) return;
        continue;
      }
      next();
    }
    throw new Error('immediates did not settle');
  }

  /** Moves virtual time forward by ms, firing due timers in order. */
  async advance(ms: number): Promise<void> {
    const end = this.now + ms;
    for (;;) {
      let due: [number, { at: number; every: number; fn: () => void }] | undefined;
      for (const e of this.timers) if (e[1].at <= end && (!due || e[1].at < due[1].at)) due = e;
      if (!due) break;
      const [id, t] = due;
      this.now = t.at;
      if (t.every > 0) t.at += t.every;
      else this.timers.delete(id);
      t.fn();
      await this.settle();
    }
    this.now = end;
  }
}

describe('FloeNode: pending reads across a new term under the same leader', () => {
  it('a follower whose leader is re-elected in a later term (lead 1 -> 1) asks its pending read again', async () => {
    const vt = new VirtualTimers();
    const sent: Message[] = [];
    const transport: NodeTransport = {
      send: (ms) => sent.push(...ms),
      addPeer: () => {},
      removePeer: () => {},
      close: async () => {},
    };
    const clock: NodeClock = { monotonicMs: () => vt.now, wallMs: () => 1_800_000_000_000 + vt.now };
    const n = new FloeNode<KvResult>({
      id: 2,
      storage: new MemoryNodeStorage({ voters: [1, 2, 3], learners: [] }),
      transport,
      stateMachine: new KvStateMachine(),
      initialMembers: [1, 2, 3].map((id) => ({ id, peerAddr: `mem:${id}` })),
      tickMs: 10,
      electionTicks: 10,
      random: () => 0,
      clock,
      timers: vt,
      incarnation: new Uint8Array(8),
      proposalTimeoutMs: 1_000,
    });
    n.start();
    await vt.settle();
    const hb = (term: number): Message =>
      ({
        type: 'heartbeat',
        from: 1,
        to: 2,
        term,
        commit: 0,
        context: new Uint8Array(0),
        sentTick: 0,
      }) as Message;
    n.onMessage(hb(2));
    await vt.settle();
    expect(n.status().lead).toBe(1);
    const read = n.linearizableRead().then(
      () => 'ok',
      (e: unknown) => String(e),
    );
    await vt.settle();
    const asked = () => sent.filter((m) => m.type === 'readIndex').length;
    expect(asked()).toBe(1);
    // Node 1 loses its term (its ReadOnly is reset: the read is forgotten) and wins term 4 with node 3's vote.
    n.onMessage(hb(4));
    await vt.settle();
    expect(n.status().term).toBe(4);
    // A new leadership knows nothing of the read: it must be asked again.
    expect(asked()).toBe(2); // before: 1, and the read ended in ReadTimeoutError
    const again = sent.filter((m) => m.type === 'readIndex').at(-1) as Message & { context: Uint8Array };
    n.onMessage({
      type: 'readIndexResp',
      from: 1,
      to: 2,
      term: 4,
      index: 0,
      context: again.context,
    } as Message);
    await vt.settle();
    expect(await read).toBe('ok');
    await n.stop('test over');
  });
});
