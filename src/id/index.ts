/**
 * Floe's ID core: Snowflake layouts and generation, decoding, segment double buffers, and reversible obfuscation.
 * Performs no I/O; time comes from an injected `Clock` (`systemClock` is the wall clock).
 */
export { systemClock } from './clock.js';
export { type ComposeParts, compose, decode, type IdParts, MAX_ID, toHex, toId } from './codec.js';
export {
  BoundError,
  CeilingReachedError,
  ClockMovedBackwardsError,
  DatacenterIdRangeError,
  EpochInFutureError,
  FloeIdError,
  IdPartRangeError,
  InvalidIdError,
  InvalidShortCodeError,
  LayoutError,
  OptionError,
  SegmentRangeError,
  SegmentUnavailableError,
  TimestampOverflowError,
  UnknownLayoutError,
  WorkerIdRangeError,
} from './errors.js';
export {
  defineLayout,
  type FieldOrder,
  type Layout,
  type LayoutSpec,
  layoutFingerprint,
  MAX_DATE_MS,
} from './layout.js';
export { IdPermutation, type PermutationOptions } from './permutation.js';
export {
  DEFAULT_LAYOUT_NAME,
  getLayout,
  PRESET_NAMES,
  PRESET_SPECS,
  PRESETS,
  type PresetName,
  resolveLayout,
} from './presets.js';
export {
  SegmentBuffer,
  type SegmentBufferOptions,
  type SegmentBufferStats,
  type SegmentFetch,
  type SegmentRange,
} from './segment-buffer.js';
export { SHORT_CODE_ALPHABET, ShortCodec, type ShortCodecOptions } from './short-codec.js';
export {
  type BackwardsMode,
  DEFAULT_BACKWARDS_TOLERANCE_MS,
  DEFAULT_MAX_LEAD_MS,
  type ExhaustedMode,
  Snowflake,
  type SnowflakeOptions,
} from './snowflake.js';
export { type Clock, ManualClock } from './time-source.js';
