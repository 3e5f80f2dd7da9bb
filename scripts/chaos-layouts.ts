import { defineLayout, type Layout, PRESETS } from '../src/id/index.js';

/**
 * The layouts chaos clients use. `coarse` has 1 s ticks (issue 9 item 3's scenario: a coarse tick must not outlive
 * the lease); with the chaos TTL of 3 s the SDK accepts it (tick + borrow lead < TTL - margin - renewal period =
 * 3000 - 400 - 1000 ms). Its clients lease from an app of their own: one app, one layout.
 */
export const CHAOS_LAYOUTS = {
  floe: PRESETS.floe,
  coarse: defineLayout({
    name: 'coarse-1s',
    epochMs: PRESETS.floe.epochMs,
    unitMs: 1000,
    timestampBits: 37,
    datacenterBits: 0,
    workerBits: 10,
    sequenceBits: 16,
  }),
} satisfies Record<string, Layout>;

export type ChaosLayoutName = keyof typeof CHAOS_LAYOUTS;
