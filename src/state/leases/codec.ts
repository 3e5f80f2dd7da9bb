import { pack, unpack } from '../../node/envelope.js';
import {
  APP_NAME_PATTERN,
  type ExpireItem,
  LEASE_NAMESPACE,
  type LeaseCommand,
  type LeaseError,
  MAX_APP_LENGTH,
  MAX_EXPIRE_BATCH,
  MAX_INCARNATION_LENGTH,
  MAX_LAYOUT_LENGTH,
  MAX_NODE_ID_LENGTH,
  MAX_POOL_BITS,
  MAX_REQUEST_ID_LENGTH,
  MAX_TTL_MS,
  MIN_POOL_BITS,
  MIN_TTL_MS,
} from './types.js';

/**
 * Wire form of a lease command: a msgpack map `{ ns: 'lease', op, ...fields }`. The `ns` tag lets
 * a composed state machine route a log entry without knowing lease commands.
 */
export function encodeLeaseCommand(cmd: LeaseCommand): Uint8Array {
  return pack({ ns: LEASE_NAMESPACE, ...cmd });
}

/** True when an unpacked log payload carries the lease namespace tag. */
export function isLeaseCommand(value: unknown): boolean {
  return typeof value === 'object' && value !== null && (value as { ns?: unknown }).ns === LEASE_NAMESPACE;
}

export function leaseError(code: LeaseError['code'], message: string): LeaseError {
  return { ok: false, code, message };
}

/** Decodes bytes into a checked command, or a `bad_command` / `invalid_argument` error. Never throws. */
export function decodeLeaseCommand(data: Uint8Array): LeaseCommand | LeaseError {
  let v: unknown;
  try {
    v = unpack<unknown>(data);
  } catch {
    return leaseError('bad_command', 'lease command is not valid msgpack');
  }
  return parseLeaseCommand(v);
}

/**
 * Checks an already-unpacked command: shape, types and the ranges that need no state
 * (ranges relative to the leader's clock or the pool size are checked when applying).
 */
export function parseLeaseCommand(v: unknown): LeaseCommand | LeaseError {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    return leaseError('bad_command', 'lease command must be a map');
  }
  const c = v as Record<string, unknown>;
  if (c.ns !== LEASE_NAMESPACE) {
    return leaseError('bad_command', `lease command must carry ns '${LEASE_NAMESPACE}', got ${show(c.ns)}`);
  }
  switch (c.op) {
    case 'configurePool': {
      const err =
        checkApp(c.app) ??
        checkInt('bits', c.bits, MIN_POOL_BITS, MAX_POOL_BITS) ??
        checkInt('datacenterBits', c.datacenterBits, 0, typeof c.bits === 'number' ? c.bits : MAX_POOL_BITS);
      if (err) return err;
      return {
        op: 'configurePool',
        app: c.app as string,
        bits: c.bits as number,
        datacenterBits: c.datacenterBits as number,
      };
    }
    case 'acquire': {
      const err =
        checkApp(c.app) ??
        checkString('nodeId', c.nodeId, MAX_NODE_ID_LENGTH) ??
        checkInt('ttlMs', c.ttlMs, MIN_TTL_MS, MAX_TTL_MS) ??
        checkString('requestId', c.requestId, MAX_REQUEST_ID_LENGTH) ??
        (c.boundMs === undefined || c.boundMs === null ? undefined : checkTimestamp('boundMs', c.boundMs)) ??
        (c.incarnation === undefined || c.incarnation === null
          ? undefined
          : checkString('incarnation', c.incarnation, MAX_INCARNATION_LENGTH)) ??
        (c.layout === undefined || c.layout === null
          ? undefined
          : checkString('layout', c.layout, MAX_LAYOUT_LENGTH));
      if (err) return err;
      const cmd: LeaseCommand = {
        op: 'acquire',
        app: c.app as string,
        nodeId: c.nodeId as string,
        ttlMs: c.ttlMs as number,
        requestId: c.requestId as string,
      };
      if (typeof c.boundMs === 'number') cmd.boundMs = c.boundMs;
      if (typeof c.incarnation === 'string') cmd.incarnation = c.incarnation;
      if (typeof c.layout === 'string') cmd.layout = c.layout;
      return cmd;
    }
    case 'renew': {
      const err =
        checkApp(c.app) ??
        checkWorkerId(c.workerId) ??
        checkToken(c.token) ??
        checkTimestamp('boundMs', c.boundMs);
      if (err) return err;
      return {
        op: 'renew',
        app: c.app as string,
        workerId: c.workerId as number,
        token: c.token as number,
        boundMs: c.boundMs as number,
      };
    }
    case 'release': {
      const err =
        checkApp(c.app) ??
        checkWorkerId(c.workerId) ??
        checkToken(c.token) ??
        checkTimestamp('lastTimestampMs', c.lastTimestampMs);
      if (err) return err;
      return {
        op: 'release',
        app: c.app as string,
        workerId: c.workerId as number,
        token: c.token as number,
        lastTimestampMs: c.lastTimestampMs as number,
      };
    }
    case 'expire': {
      if (!Array.isArray(c.items) || c.items.length === 0 || c.items.length > MAX_EXPIRE_BATCH) {
        return leaseError(
          'invalid_argument',
          `expire needs 1..${MAX_EXPIRE_BATCH} items of [app, workerId, token], got ${
            Array.isArray(c.items) ? `${c.items.length} items` : show(c.items)
          }`,
        );
      }
      const items: ExpireItem[] = [];
      for (const it of c.items as unknown[]) {
        if (!Array.isArray(it) || it.length !== 3) {
          return leaseError('bad_command', `expire item must be [app, workerId, token], got ${show(it)}`);
        }
        const err = checkApp(it[0]) ?? checkWorkerId(it[1]) ?? checkToken(it[2]);
        if (err) return err;
        items.push([it[0] as string, it[1] as number, it[2] as number]);
      }
      return { op: 'expire', items };
    }
    default:
      return leaseError(
        'bad_command',
        `unknown lease op ${show(c.op)}; expected configurePool, acquire, renew, release or expire`,
      );
  }
}

// ---- field checks (each returns an error naming the field and its allowed range) ----------------

export function checkApp(app: unknown): LeaseError | undefined {
  if (typeof app !== 'string' || !APP_NAME_PATTERN.test(app)) {
    return leaseError(
      'invalid_argument',
      `app must be 1..${MAX_APP_LENGTH} characters from A-Z a-z 0-9 . _ : / - starting with a letter or digit, got ${show(app)}`,
    );
  }
  return undefined;
}

export function checkString(field: string, v: unknown, max: number): LeaseError | undefined {
  if (typeof v !== 'string' || v.length < 1 || v.length > max) {
    return leaseError(
      'invalid_argument',
      `${field} must be a string of 1..${max} characters, got ${show(v)}`,
    );
  }
  return undefined;
}

export function checkInt(field: string, v: unknown, min: number, max: number): LeaseError | undefined {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    return leaseError('invalid_argument', `${field} must be an integer in ${min}..${max}, got ${show(v)}`);
  }
  return undefined;
}

function checkWorkerId(v: unknown): LeaseError | undefined {
  return checkInt('workerId', v, 0, 2 ** MAX_POOL_BITS - 1);
}

function checkToken(v: unknown): LeaseError | undefined {
  return checkInt('token', v, 1, Number.MAX_SAFE_INTEGER);
}

function checkTimestamp(field: string, v: unknown): LeaseError | undefined {
  return checkInt(field, v, 0, Number.MAX_SAFE_INTEGER);
}

/** A short, safe rendering of a bad value for error messages. */
export function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === 'number' || typeof v === 'boolean' || v === null || v === undefined) return String(v);
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (v instanceof Uint8Array) return `${v.length} bytes`;
  return typeof v;
}
