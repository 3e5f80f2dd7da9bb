// The full-stack simulator's one source of time: a virtual clock and a queue of macrotasks
// (timers, disk completions, message and HTTP deliveries). The loop takes one event, runs it, then
// lets every setImmediate and microtask it caused run to completion before the next event: the
// production code is async, and real setImmediate is a deterministic FIFO as long as nothing does
// real I/O or waits on a real timer. So one seed gives one interleaving, always.
//
// Every event belongs to a simulated process (or to the simulator itself). A crashed process's
// events are dropped; a paused one's are held back and run, in order, when it resumes.

import { EventQueue } from '../event-queue.js';
import type { SimProcess } from './process.js';

export interface SimEvent {
  at: number;
  /** The process whose code this event runs; undefined for the simulator's own events. */
  proc: SimProcess | undefined;
  label: string;
  fn: () => void;
  cancelled: boolean;
}

/** Thrown into the run when production code did something the simulation cannot make deterministic. */
export class DeterminismError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DeterminismError';
  }
}

const realSetImmediate = globalThis.setImmediate;
const realClearImmediate = globalThis.clearImmediate;

/**
 * Counts the immediates queued while a simulation runs, so the loop knows when the work an event
 * caused is done. Installed for the duration of a run (one run at a time per thread).
 */
class ImmediateTracker {
  readonly pending = new Set<NodeJS.Immediate>();
  private installs = 0;
  /** Errors thrown by immediate callbacks (a real process would die of them). */
  onError: ((err: unknown) => void) | undefined;

  install(): void {
    if (this.installs++ > 0) return;
    const pending = this.pending;
    const patched = ((fn: (...args: unknown[]) => void, ...args: unknown[]) => {
      const h: NodeJS.Immediate = realSetImmediate(() => {
        pending.delete(h);
        try {
          fn(...args);
        } catch (err) {
          if (this.onError) this.onError(err);
          else throw err;
        }
      });
      pending.add(h);
      return h;
    }) as unknown as typeof setImmediate;
    globalThis.setImmediate = patched;
    globalThis.clearImmediate = ((h: NodeJS.Immediate | undefined) => {
      if (h) pending.delete(h);
      realClearImmediate(h);
    }) as typeof clearImmediate;
  }

  uninstall(): void {
    if (--this.installs > 0) return;
    globalThis.setImmediate = realSetImmediate;
    globalThis.clearImmediate = realClearImmediate;
  }
}

export const immediates = new ImmediateTracker();

/** One real event-loop turn: every microtask queued before it has run when it resolves. */
export function turn(): Promise<void> {
  return new Promise(resolveNextTurn);
}

/** One executor for every turn's promise (no closure made per event). */
const resolveNextTurn = (r: () => void): void => {
  realSetImmediate(r);
};

/**
 * Most event-loop turns one event may take to settle. Code that polls with setImmediate until some
 * I/O completes (FloeNode.stop waits so for an in-flight save) would otherwise spin forever, since
 * virtual time cannot pass inside one event: past this many turns the loop moves on to the next
 * event and the remaining immediates run interleaved with it (deterministically: a fixed count).
 */
export const MAX_TURNS_PER_EVENT = 100;

/** Waits until no immediate is queued and every microtask has run; false if it gave up (see above). */
export async function settle(): Promise<boolean> {
  let turns = 0;
  do {
    await turn();
    if (++turns >= MAX_TURNS_PER_EVENT) return immediates.pending.size === 0;
  } while (immediates.pending.size > 0);
  return true;
}

export class Scheduler {
  /** Virtual time, integer microseconds since the start of the run. */
  nowUs = 0;
  /** The process whose event is running (and whose microtasks are draining). */
  current: SimProcess | undefined;
  /** Events run so far. */
  events = 0;
  /** Events after which immediates were still queued (something polls with setImmediate). */
  unsettled = 0;
  private readonly queue = new EventQueue<SimEvent>();

  get pendingEvents(): number {
    return this.queue.size;
  }

  /** Schedules `fn` to run as `proc` after `delayUs` (rounded up to a whole microsecond, >= 0). */
  after(delayUs: number, proc: SimProcess | undefined, label: string, fn: () => void): SimEvent {
    if (!(delayUs >= 0)) throw new RangeError(`scheduler: delay must be >= 0 µs, got ${delayUs}`);
    return this.at(this.nowUs + Math.ceil(delayUs), proc, label, fn);
  }

  at(atUs: number, proc: SimProcess | undefined, label: string, fn: () => void): SimEvent {
    const ev: SimEvent = { at: Math.max(atUs, this.nowUs), proc, label, fn, cancelled: false };
    this.queue.push(ev.at, ev);
    return ev;
  }

  /** Puts an event that was held back in the queue again, to run now (or at `atUs`). */
  requeue(ev: SimEvent, atUs = this.nowUs): void {
    ev.at = Math.max(atUs, this.nowUs);
    this.queue.push(ev.at, ev);
  }

  /**
   * Runs events until virtual time `untilUs` (events at exactly that time included), or until
   * `stop()` says so (checked after every event). Returns false when stopped early.
   */
  async runUntil(untilUs: number, stop?: () => boolean): Promise<boolean> {
    immediates.install();
    try {
      return await this.loop(untilUs, stop);
    } finally {
      immediates.uninstall();
    }
  }

  private async loop(untilUs: number, stop?: () => boolean): Promise<boolean> {
    for (;;) {
      const t = this.queue.peekTime();
      if (t === undefined || t > untilUs) break;
      const slot = this.queue.pop()!;
      const ev = slot.event;
      if (ev.cancelled) continue;
      this.nowUs = slot.at;
      const p = ev.proc;
      if (p !== undefined) {
        if (!p.alive) continue;
        if (p.heldBack(ev)) continue;
      }
      this.events++;
      this.current = p;
      try {
        ev.fn();
        // settle(), inline: one async call and its promise fewer per event.
        let turns = 0;
        do {
          await turn();
          if (++turns >= MAX_TURNS_PER_EVENT) {
            if (immediates.pending.size > 0) this.unsettled++;
            break;
          }
        } while (immediates.pending.size > 0);
      } finally {
        this.current = undefined;
      }
      if (stop?.()) return false;
    }
    if (this.nowUs < untilUs) this.nowUs = untilUs;
    return true;
  }
}
