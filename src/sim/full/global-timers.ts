// A stopgap for production code that has no timer seam yet (FloeNode calls the global setTimeout
// and setInterval): while a simulation runs, the globals are routed to the virtual timers of the
// process whose event is running. The loop runs one process's code per event (deliveries, timers
// and disk completions each belong to one process), so "the running process" is well defined.
// A timer set outside any process (library code at load time) goes to the real clock and is
// counted: the run's report shows it, since it is a determinism hazard.

import { SimTimer } from './process.js';
import type { Scheduler } from './scheduler.js';

const real = {
  abortSignalTimeout: AbortSignal.timeout,
  setTimeout: globalThis.setTimeout,
  setInterval: globalThis.setInterval,
  clearTimeout: globalThis.clearTimeout,
  clearInterval: globalThis.clearInterval,
};

let active: { sched: Scheduler; unattributed: number } | undefined;

/** Routes the global timer functions to `sched`'s running process until the returned undo is called. */
export function routeGlobalTimers(sched: Scheduler): { undo(): void; unattributed(): number } {
  if (active) throw new Error('routeGlobalTimers: another simulation already routes the global timers');
  const state = { sched, unattributed: 0 };
  active = state;
  const make =
    (repeat: boolean) =>
    (fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]): unknown => {
      const p = state.sched.current;
      if (p === undefined) {
        state.unattributed++;
        return (repeat ? real.setInterval : real.setTimeout)(fn, ms, ...args);
      }
      // Most callers pass no arguments: then the callback itself is armed (no wrapper per timer).
      const cb = args.length === 0 ? (fn as () => void) : () => fn(...args);
      return repeat ? p.setInterval(cb, ms ?? 1, 'setInterval') : p.setTimeout(cb, ms ?? 1, 'setTimeout');
    };
  const clear = (h: unknown) => {
    if (h instanceof SimTimer) h.proc.clearTimer(h);
    else real.clearTimeout(h as NodeJS.Timeout);
  };
  globalThis.setTimeout = make(false) as unknown as typeof setTimeout;
  globalThis.setInterval = make(true) as unknown as typeof setInterval;
  globalThis.clearTimeout = clear as typeof clearTimeout;
  globalThis.clearInterval = clear as typeof clearInterval;
  // AbortSignal.timeout arms a real timer. The only code that takes these signals in a run (the SDK's transport, a
  // node's segment allocation through the leader) hands them to the simulated fetch, which ignores them: it ends an
  // attempt at the caller's timeout on the virtual clock (http-router.ts). The real timers fired in real time, in a
  // later seed, each with a DOMException, and kept a WeakRef and a finalizer per signal (a few percent of a run, GC
  // included). A run's AbortSignal.timeout gives a signal that does not abort; a delay the real one refuses (not an
  // integer in [0, 2^32 - 1]) still goes to it, so that it throws as before. One such signal serves the whole run:
  // making one per call was 1% of a run (an AbortSignal is an EventTarget), and nothing listens on it.
  const neverAborts = new AbortController().signal;
  AbortSignal.timeout = (ms: number) =>
    Number.isInteger(ms) && ms >= 0 && ms <= 0xffff_ffff ? neverAborts : real.abortSignalTimeout(ms);
  return {
    undo() {
      globalThis.setTimeout = real.setTimeout;
      globalThis.setInterval = real.setInterval;
      globalThis.clearTimeout = real.clearTimeout;
      globalThis.clearInterval = real.clearInterval;
      AbortSignal.timeout = real.abortSignalTimeout;
      active = undefined;
    },
    unattributed: () => state.unattributed,
  };
}
