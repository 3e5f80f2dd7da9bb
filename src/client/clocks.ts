import { readFileSync } from 'node:fs';

/** Monotonic time in ms. Never jumps; its origin is arbitrary. */
export type MonotonicClock = () => number;

/**
 * CLOCK_MONOTONIC in ms (`process.hrtime`). On Linux it is shared by every process of one boot, which lets a
 * restarted instance trust a cached monotonic deadline (same boot ID) and lets the chaos checker compare times
 * recorded by different processes.
 */
export const hrtimeMonotonic: MonotonicClock = () => {
  const [s, ns] = process.hrtime();
  return s * 1e3 + ns / 1e6;
};

/** This machine's boot ID (Linux), or undefined elsewhere: monotonic readings are comparable only within one boot. */
export function readBootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
