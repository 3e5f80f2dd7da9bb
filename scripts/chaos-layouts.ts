import { defineLayout, type Layout, PRESETS } from '../src/id/index.js';

/**
 * The layouts chaos clients use. `coarse` has the floe layout's bit positions with 100 ms ticks, so
 * one fast decoder (shifts) serves both and only the unit differs.
 */
export const CHAOS_LAYOUTS = {
  floe: PRESETS.floe,
  coarse: defineLayout({
    name: 'coarse-100ms',
    epochMs: PRESETS.floe.epochMs,
    unitMs: 100,
    timestampBits: PRESETS.floe.timestampBits,
    datacenterBits: 0,
    workerBits: PRESETS.floe.workerBits,
    sequenceBits: PRESETS.floe.sequenceBits,
  }),
} satisfies Record<string, Layout>;

export type ChaosLayoutName = keyof typeof CHAOS_LAYOUTS;
