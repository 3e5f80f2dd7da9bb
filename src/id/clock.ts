import type { Clock } from './time-source.js';

// A private cell for Atomics.wait: the only portable way to block the main thread without burning CPU.
const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/**
 * The wall clock (`Date.now()`), for production, the CLI and benchmarks. `waitUntil` sleeps through waits longer
 * than 2 ms (Atomics.wait) and returns at once for shorter ones, so the generator spins on `now()` for the last
 * stretch: a tick boundary is reached within microseconds instead of a scheduler quantum.
 */
export const systemClock: Clock = Object.freeze({
  now: Date.now,
  waitUntil(ms: number): void {
    const remaining = ms - Date.now();
    if (remaining > 2) Atomics.wait(sleepCell, 0, 0, remaining - 1);
  },
});
