import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, type PasswordHash, SCRYPT_LIMITS } from './types.js';

/**
 * scrypt cost defaults: N = 2^15, r = 8, p = 1 (32 MiB, a few tens of ms per hash on a server
 * core), a 16-byte random salt per user and a 32-byte hash. Servers verify once per connection
 * (RESP AUTH) or cache a verified credential briefly (HTTP), not once per request.
 */
export const DEFAULT_SCRYPT = { N: 2 ** 15, r: 8, p: 1, saltBytes: 16, hashBytes: 32 } as const;

export interface HashOptions {
  /** CPU/memory cost, a power of two in 2^10..2^20. Default 2^15. Tests use 2^10. */
  N?: number;
  r?: number;
  p?: number;
}

/** Thrown by hashPassword for passwords or options out of range. */
export class PasswordPolicyError extends RangeError {
  constructor(message: string) {
    super(message);
    this.name = 'PasswordPolicyError';
  }
}

/**
 * Hashes a password with a fresh random salt. Call it on the node that received the request,
 * then propose the result: the log never carries the password, and apply stays deterministic.
 */
export async function hashPassword(password: string, opts: HashOptions = {}): Promise<PasswordHash> {
  if (
    typeof password !== 'string' ||
    password.length < MIN_PASSWORD_LENGTH ||
    password.length > MAX_PASSWORD_LENGTH
  ) {
    throw new PasswordPolicyError(
      `password must be a string of ${MIN_PASSWORD_LENGTH}..${MAX_PASSWORD_LENGTH} characters` +
        (typeof password === 'string' ? `, got ${password.length}` : ''),
    );
  }
  const N = opts.N ?? DEFAULT_SCRYPT.N;
  const r = opts.r ?? DEFAULT_SCRYPT.r;
  const p = opts.p ?? DEFAULT_SCRYPT.p;
  const problem = scryptParamsProblem(N, r, p);
  if (problem) throw new PasswordPolicyError(problem);
  const salt = randomBytes(DEFAULT_SCRYPT.saltBytes);
  const hash = await derive(password, salt, N, r, p, DEFAULT_SCRYPT.hashBytes);
  return { algorithm: 'scrypt', N, r, p, salt: new Uint8Array(salt), hash: new Uint8Array(hash) };
}

// A fixed dummy so that checking an unknown user costs as much as checking a known one.
const DUMMY: PasswordHash = {
  algorithm: 'scrypt',
  N: DEFAULT_SCRYPT.N,
  r: DEFAULT_SCRYPT.r,
  p: DEFAULT_SCRYPT.p,
  salt: new Uint8Array(DEFAULT_SCRYPT.saltBytes),
  hash: new Uint8Array(DEFAULT_SCRYPT.hashBytes),
};

/**
 * True when `password` matches the stored hash. With no stored hash (unknown user) it still
 * spends one scrypt run and returns false, so the answer time does not tell which users exist.
 * The comparison is constant-time (timingSafeEqual).
 */
export async function verifyPassword(stored: PasswordHash | undefined, password: string): Promise<boolean> {
  if (typeof password !== 'string' || password.length > MAX_PASSWORD_LENGTH) return false;
  const h = stored ?? DUMMY;
  if (h.algorithm !== 'scrypt' || scryptParamsProblem(h.N, h.r, h.p)) return false;
  const got = await derive(password, h.salt, h.N, h.r, h.p, h.hash.length);
  const ok = timingSafeEqual(got, h.hash);
  return ok && stored !== undefined;
}

/** Why scrypt parameters are unacceptable, or undefined when they are fine. */
export function scryptParamsProblem(N: unknown, r: unknown, p: unknown): string | undefined {
  const L = SCRYPT_LIMITS;
  if (
    typeof N !== 'number' ||
    !Number.isInteger(N) ||
    N < 2 ** L.minLogN ||
    N > 2 ** L.maxLogN ||
    (N & (N - 1)) !== 0
  ) {
    return `scrypt N must be a power of two in ${2 ** L.minLogN}..${2 ** L.maxLogN}, got ${String(N)}`;
  }
  if (typeof r !== 'number' || !Number.isInteger(r) || r < 1 || r > L.maxR) {
    return `scrypt r must be an integer in 1..${L.maxR}, got ${String(r)}`;
  }
  if (typeof p !== 'number' || !Number.isInteger(p) || p < 1 || p > L.maxP) {
    return `scrypt p must be an integer in 1..${L.maxP}, got ${String(p)}`;
  }
  if (128 * N * r > L.maxMemoryBytes) {
    return `scrypt memory 128*N*r = ${128 * N * r} bytes exceeds ${L.maxMemoryBytes}`;
  }
  return undefined;
}

function derive(
  password: string,
  salt: Uint8Array,
  N: number,
  r: number,
  p: number,
  len: number,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(
      password.normalize('NFC'),
      salt,
      len,
      { N, r, p, maxmem: 128 * N * r + 2 * 1024 * 1024 },
      (err, key) => (err ? reject(err) : resolve(key)),
    );
  });
}
