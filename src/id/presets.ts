import { UnknownLayoutError } from './errors.js';
import { asLayout, defineLayout, type Layout, type LayoutSpec } from './layout.js';

/**
 * Named layouts.
 * - `floe` (default): 41-bit ms timestamp from 2026-01-01T00:00:00Z, no datacenter bits, 10-bit worker (1024 leases
 *   per app), 12-bit sequence (4,096,000 IDs/s per worker); runs out in 2095.
 * - `twitter`: the original Snowflake, 41/5/5/12, 1 ms, epoch 1288834974657 (2010-11-04T01:42:54.657Z).
 * - `sonyflake`: 39-bit time in 10 ms units from 2014-09-01T00:00:00Z, then an 8-bit sequence, then a 16-bit machine
 *   id (order `sequence-node`, as Sonyflake lays it out); 25,600 IDs/s per machine, 174 years.
 * - `baidu`: Baidu uid-generator's default: 28-bit seconds from 2016-05-20, 22-bit worker, 13-bit sequence
 *   (uid-generator parses "2016-05-20" in the JVM's zone; Floe fixes it at 00:00:00Z). 8.5 years: it ran out in 2024,
 *   so it is useful for decoding old IDs only.
 */
export const PRESET_SPECS = {
  floe: {
    name: 'floe',
    epochMs: Date.UTC(2026, 0, 1),
    unitMs: 1,
    timestampBits: 41,
    datacenterBits: 0,
    workerBits: 10,
    sequenceBits: 12,
  },
  twitter: {
    name: 'twitter',
    epochMs: 1288834974657,
    unitMs: 1,
    timestampBits: 41,
    datacenterBits: 5,
    workerBits: 5,
    sequenceBits: 12,
  },
  sonyflake: {
    name: 'sonyflake',
    epochMs: Date.UTC(2014, 8, 1),
    unitMs: 10,
    timestampBits: 39,
    datacenterBits: 0,
    workerBits: 16,
    sequenceBits: 8,
    order: 'sequence-node',
  },
  baidu: {
    name: 'baidu',
    epochMs: Date.UTC(2016, 4, 20),
    unitMs: 1000,
    timestampBits: 28,
    datacenterBits: 0,
    workerBits: 22,
    sequenceBits: 13,
  },
} as const satisfies Record<string, LayoutSpec>;

export type PresetName = keyof typeof PRESET_SPECS;

export const DEFAULT_LAYOUT_NAME: PresetName = 'floe';

export const PRESETS: Readonly<Record<PresetName, Layout>> = Object.freeze({
  floe: defineLayout(PRESET_SPECS.floe),
  twitter: defineLayout(PRESET_SPECS.twitter),
  sonyflake: defineLayout(PRESET_SPECS.sonyflake),
  baidu: defineLayout(PRESET_SPECS.baidu),
});

export const PRESET_NAMES = Object.freeze(Object.keys(PRESETS) as PresetName[]);

/** Look a preset up by name (case-insensitive). Throws `UnknownLayoutError` listing the known names. */
export function getLayout(name: string): Layout {
  const key = String(name).toLowerCase();
  if (Object.hasOwn(PRESETS, key)) return PRESETS[key as PresetName];
  throw new UnknownLayoutError(String(name), PRESET_NAMES);
}

/** A layout given by preset name, by a `defineLayout` result, or by a spec (validated here). */
export function resolveLayout(layout: Layout | LayoutSpec | string): Layout {
  return typeof layout === 'string' ? getLayout(layout) : asLayout(layout);
}
