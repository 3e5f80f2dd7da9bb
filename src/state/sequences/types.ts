/**
 * Commands, results, limits and defaults of the replicated sequence state (issue 11, seed 003's
 * "sequence type"; Leaf and Tinyid segments).
 *
 * A sequence is a named key with a configuration (start, step, max, mode, adaptive step bounds) and
 * a high-water mark `next`: the first value no segment has been allocated from. Values are 64-bit
 * signed integers, carried as decimal strings on the wire and in snapshots (msgpack and JSON lose
 * precision above 2^53) and as bigint in memory.
 *
 * Limits (every violation is an `invalid_argument` result naming the field and the allowed range):
 * - key: 1..MAX_KEY_BYTES (256) bytes of UTF-8, no control characters.
 * - start: 0 .. max; default 1 (as Redis INCR on a missing key returns 1).
 * - max: start .. 2^63 − 1; default 2^63 − 1.
 * - step (segment size): MIN_STEP .. MAX_STEP; default 1,000. minStep ≤ step ≤ maxStep bound the
 *   adaptive step (defaults: step and 100 × step, capped at MAX_STEP).
 * - mode: 'strict' (the leader serves, values strictly increase across the cluster) or 'node'
 *   (every node serves from its own segments; unique, increasing per node).
 * - alloc count: 1 .. MAX_ALLOC (2^31 − 1, bounded so a single request cannot exhaust a sequence in
 *   one go by mistake); owner: 1..256 characters; requestId: 1..128 characters.
 * - sequences: at most MAX_SEQUENCES live ones.
 */

export const SEQUENCE_NAMESPACE = 'seq';

export const MAX_KEY_BYTES = 256;
export const MAX_VALUE = (1n << 63n) - 1n;
export const DEFAULT_START = 1n;
export const DEFAULT_STEP = 1_000;
export const MIN_STEP = 1;
export const MAX_STEP = 100_000_000;
export const ADAPTIVE_MAX_FACTOR = 100;
export const MAX_ALLOC = 2_147_483_647;
export const MAX_OWNER_LENGTH = 256;
export const MAX_REQUEST_ID_LENGTH = 128;
export const MAX_SEQUENCES = 4_000_000;

export type SequenceMode = 'strict' | 'node';

export interface SequenceConfig {
  start: bigint;
  max: bigint;
  step: number;
  minStep: number;
  maxStep: number;
  mode: SequenceMode;
}

export type SequenceCommand =
  /**
   * Creates a sequence. Creating one that exists with the same configuration answers `created:
   * false` (a retried create is harmless); with another configuration it is refused (`exists`).
   * A key that was deleted keeps its high-water mark: re-creating it starts above every value it
   * ever allocated, so a delete can never make a value repeat.
   */
  | {
      op: 'create';
      key: string;
      start: string;
      max: string;
      step: number;
      minStep: number;
      maxStep: number;
      mode: SequenceMode;
    }
  /** Deletes a sequence (its high-water mark is kept, see create). */
  | { op: 'delete'; key: string }
  /**
   * Allocates the segment [next, next + count) (cut at max + 1 unless `exact`, which refuses
   * instead) to `owner` (a node ID for server-side segments, a client name for SEQ.ALLOC).
   * `requestId` is echoed so the caller can check the reply is its own. Retrying an alloc whose
   * outcome is unknown is safe: at worst it leaves a gap, never a repeat.
   */
  | { op: 'alloc'; key: string; count: number; owner: string; requestId: string; exact: boolean };

export type SequenceOp = SequenceCommand['op'];

export type SequenceErrorCode =
  | 'bad_command'
  | 'invalid_argument'
  /** No sequence with that key. */
  | 'not_found'
  /** create: the key exists with another configuration. */
  | 'exists'
  /** alloc: no value (or, with exact, not enough values) is left below max. */
  | 'exhausted'
  /** create: MAX_SEQUENCES live sequences exist. */
  | 'too_many_sequences';

export interface SequenceError {
  ok: false;
  code: SequenceErrorCode;
  message: string;
}

/** A sequence as replies and listings describe it (values as decimal strings). */
export interface SequenceInfo {
  key: string;
  start: string;
  max: string;
  step: number;
  minStep: number;
  maxStep: number;
  mode: SequenceMode;
  /** High-water mark: the first value not yet allocated to any segment. */
  next: string;
  /** Segments allocated so far. */
  allocations: number;
}

export interface CreateOk {
  ok: true;
  op: 'create';
  key: string;
  created: boolean;
  info: SequenceInfo;
}

export interface DeleteOk {
  ok: true;
  op: 'delete';
  key: string;
}

export interface AllocOk {
  ok: true;
  op: 'alloc';
  key: string;
  owner: string;
  requestId: string;
  /** First value of the segment. */
  start: string;
  /** One past the last value of the segment (the new high-water mark). */
  end: string;
  mode: SequenceMode;
  /** The configured step (the service adapts its own request size within [minStep, maxStep]). */
  step: number;
  minStep: number;
  maxStep: number;
}

export type SequenceResult = CreateOk | DeleteOk | AllocOk | SequenceError;
