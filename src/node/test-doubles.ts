// Test doubles for the node runtime's seams.
import type { NodeTimers } from './seams.js';

/** Virtual time: timers fire only in run()/advance(), in time order, then FIFO. */
export class VirtualTimers implements NodeTimers {
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

/** A seeded `random(n)` for the node's `random` option (an LCG: deterministic elections in tests). */
export function seeded(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}
