import { pack, unpack } from '../../node/envelope.js';
import {
  ADAPTIVE_MAX_FACTOR,
  DEFAULT_START,
  DEFAULT_STEP,
  MAX_ALLOC,
  MAX_KEY_BYTES,
  MAX_OWNER_LENGTH,
  MAX_REQUEST_ID_LENGTH,
  MAX_STEP,
  MAX_VALUE,
  MIN_STEP,
  SEQUENCE_NAMESPACE,
  type SequenceCommand,
  type SequenceError,
  type SequenceMode,
} from './types.js';

export function encodeSequenceCommand(cmd: SequenceCommand): Uint8Array {
  return pack({ ns: SEQUENCE_NAMESPACE, ...cmd });
}

export function sequenceError(code: SequenceError['code'], message: string): SequenceError {
  return { ok: false, code, message };
}

/** A key is 1..256 bytes of UTF-8 without control characters; returns what is wrong, if anything. */
export function checkKey(key: unknown): string | undefined {
  if (typeof key !== 'string' || key.length === 0) return 'key must be a non-empty string';
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) return `key is longer than ${MAX_KEY_BYTES} bytes`;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u001f\u007f]/.test(key)) return 'key must not contain control characters';
  return undefined;
}

/** Parses a decimal integer string in [min, max]; returns the value or a message naming `field`. */
export function parseBig(field: string, v: unknown, min: bigint, max: bigint): bigint | string {
  const s = typeof v === 'number' && Number.isSafeInteger(v) ? String(v) : v;
  if (typeof s !== 'string' || !/^-?\d{1,20}$/.test(s)) return `${field} must be an integer, got ${show(v)}`;
  const n = BigInt(s);
  if (n < min || n > max) return `${field} must be in [${min}, ${max}], got ${s}`;
  return n;
}

function intIn(field: string, v: unknown, min: number, max: number): string | undefined {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max)
    return `${field} must be an integer in [${min}, ${max}], got ${show(v)}`;
  return undefined;
}

function strIn(field: string, v: unknown, maxLen: number): string | undefined {
  if (typeof v !== 'string' || v.length === 0 || v.length > maxLen)
    return `${field} must be a string of 1..${maxLen} characters`;
  return undefined;
}

/** What a create needs, with defaults filled in; used by the servers before proposing. */
export interface CreateOptions {
  start?: bigint | string | number;
  max?: bigint | string | number;
  step?: number;
  minStep?: number;
  maxStep?: number;
  mode?: SequenceMode;
}

/**
 * Builds and checks a create command (defaults: start 1, max 2^63−1, step 1,000, minStep = step,
 * maxStep = min(100 × step, MAX_STEP), mode strict). Returns an error naming the field.
 */
export function buildCreate(key: string, o: CreateOptions): SequenceCommand | SequenceError {
  const cmd = {
    op: 'create' as const,
    key,
    start: String(o.start ?? DEFAULT_START),
    max: String(o.max ?? MAX_VALUE),
    step: o.step ?? DEFAULT_STEP,
    minStep: o.minStep ?? o.step ?? DEFAULT_STEP,
    maxStep: o.maxStep ?? Math.min((o.step ?? DEFAULT_STEP) * ADAPTIVE_MAX_FACTOR, MAX_STEP),
    mode: o.mode ?? 'strict',
  };
  const checked = parseSequenceCommand({ ns: SEQUENCE_NAMESPACE, ...cmd });
  return checked;
}

/**
 * Checks an unpacked command completely (shape, types, ranges that need no state), so nothing
 * invalid is ever proposed: the servers run this before proposing, apply runs it again.
 */
export function parseSequenceCommand(v: unknown): SequenceCommand | SequenceError {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return sequenceError('bad_command', 'sequence command must be a map');
  const c = v as Record<string, unknown>;
  if (c.ns !== SEQUENCE_NAMESPACE)
    return sequenceError('bad_command', `sequence command must carry ns '${SEQUENCE_NAMESPACE}'`);
  const bad = (m: string) => sequenceError('invalid_argument', m);
  const keyProblem = checkKey(c.key);
  if (keyProblem) return bad(keyProblem);
  const key = c.key as string;
  switch (c.op) {
    case 'create': {
      const max = parseBig('max', c.max, 0n, MAX_VALUE);
      if (typeof max === 'string') return bad(max);
      const start = parseBig('start', c.start, 0n, max);
      if (typeof start === 'string') return bad(start);
      const stepProblem =
        intIn('step', c.step, MIN_STEP, MAX_STEP) ??
        intIn('minStep', c.minStep, MIN_STEP, c.step as number) ??
        intIn('maxStep', c.maxStep, c.step as number, MAX_STEP);
      if (stepProblem) return bad(stepProblem);
      if (c.mode !== 'strict' && c.mode !== 'node')
        return bad(`mode must be 'strict' or 'node', got ${show(c.mode)}`);
      return {
        op: 'create',
        key,
        start: String(start),
        max: String(max),
        step: c.step as number,
        minStep: c.minStep as number,
        maxStep: c.maxStep as number,
        mode: c.mode,
      };
    }
    case 'delete':
      return { op: 'delete', key };
    case 'alloc': {
      const problem =
        intIn('count', c.count, 1, MAX_ALLOC) ??
        strIn('owner', c.owner, MAX_OWNER_LENGTH) ??
        strIn('requestId', c.requestId, MAX_REQUEST_ID_LENGTH);
      if (problem) return bad(problem);
      if (typeof c.exact !== 'boolean') return bad(`exact must be a boolean, got ${show(c.exact)}`);
      return {
        op: 'alloc',
        key,
        count: c.count as number,
        owner: c.owner as string,
        requestId: c.requestId as string,
        exact: c.exact,
      };
    }
    default:
      return sequenceError('bad_command', `unknown sequence op ${show(c.op)}`);
  }
}

export function decodeSequenceCommand(data: Uint8Array): SequenceCommand | SequenceError {
  let v: unknown;
  try {
    v = unpack<unknown>(data);
  } catch {
    return sequenceError('bad_command', 'sequence command is not valid msgpack');
  }
  return parseSequenceCommand(v);
}

function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === 'bigint') return String(v);
  try {
    return JSON.stringify(v)?.slice(0, 60) ?? String(v);
  } catch {
    return String(v);
  }
}
