import { createHash, timingSafeEqual } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { type PasswordHash, scryptParamsProblem } from '../../state/auth/index.js';

// scrypt runs on a thread of its own, never on libuv's pool, which the WAL's fsyncs share: a flood
// of wrong passwords must not delay storage I/O (issue 15 item 1). Inline (eval) so that it loads
// the same from dist/ and from the TypeScript sources under test.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { scryptSync } = require('node:crypto');
parentPort.on('message', (job) => {
  try {
    const hash = scryptSync(job.password, Buffer.from(job.salt), job.keylen,
      { N: job.N, r: job.r, p: job.p, maxmem: 256 * job.N * job.r + 1048576 });
    parentPort.postMessage({ id: job.id, hash: new Uint8Array(hash) });
  } catch (err) {
    parentPort.postMessage({ id: job.id, error: String(err && err.message || err) });
  }
});
`;

export interface PasswordVerifierOptions {
  /** The stored hash of a user (undefined: unknown user). */
  lookup(user: string): PasswordHash | undefined;
  /** Changes whenever users or passwords change: cached successes are kept only for one revision. */
  revision(): number;
  /** Verifications waiting for the hashing thread; beyond it a check is refused at once. Default 64. */
  maxQueued?: number;
  /** Failures per client address or per user before backing off. Default 5. */
  failuresBeforeBackoff?: number;
  /** First back-off; doubles with every further failure, up to maxBackoffMs. Default 1,000 / 60,000. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** How long a verified credential is trusted without hashing again (same revision). Default 60,000. */
  cacheMs?: number;
  /** Bounded caches (entries). Default 10,000. */
  maxEntries?: number;
  now?: () => number;
}

export type VerifyOutcome =
  | { ok: true }
  | { ok: false; reason: 'wrong' }
  /** Refused without checking: too many failures from this address or for this user; retry after. */
  | { ok: false; reason: 'backoff'; retryAfterMs: number }
  /** Refused without checking: the hashing thread's queue is full. */
  | { ok: false; reason: 'busy' };

interface Failures {
  count: number;
  until: number;
}

/**
 * Password checks for the servers: on a thread of their own, one at a time, single-flight per
 * credential, successes cached until the users change, failures backed off per client address and
 * per user (a fast refusal: HTTP 429, RESP -ERR ... retry in N s). docs/security.md.
 */
export class PasswordVerifier {
  private worker: Worker | undefined;
  private seq = 0;
  private readonly jobs = new Map<number, { resolve(h: Uint8Array): void; reject(e: Error): void }>();
  private readonly inFlight = new Map<string, Promise<boolean>>();
  private readonly verified = new Map<string, { revision: number; until: number }>();
  private readonly failuresByAddr = new Map<string, Failures>();
  private readonly failuresByUser = new Map<string, Failures>();
  private readonly now: () => number;
  readonly stats = { hashed: 0, cached: 0, backoff: 0, busy: 0, wrong: 0 };

  constructor(private readonly o: PasswordVerifierOptions) {
    this.now = o.now ?? Date.now;
  }

  async verify(user: string, password: string, clientAddr = ''): Promise<VerifyOutcome> {
    const now = this.now();
    // A credential verified before (same users' revision) passes even during a back-off: only the
    // right password can hit the cache, so someone failing on purpose cannot lock its owner out.
    const key = credentialKey(user, password);
    const revision = this.o.revision();
    const hit = this.verified.get(key);
    if (hit && hit.revision === revision && hit.until > now) {
      this.stats.cached++;
      return { ok: true };
    }
    const wait = Math.max(
      this.blockedFor(this.failuresByAddr, clientAddr, now),
      this.blockedFor(this.failuresByUser, user, now),
    );
    if (wait > 0) {
      this.stats.backoff++;
      return { ok: false, reason: 'backoff', retryAfterMs: wait };
    }
    let p = this.inFlight.get(key);
    if (!p) {
      if (this.jobs.size >= (this.o.maxQueued ?? 64)) {
        this.stats.busy++;
        return { ok: false, reason: 'busy' };
      }
      p = this.check(user, password).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, p);
    }
    const ok = await p;
    if (ok) {
      this.forget(this.failuresByAddr, clientAddr);
      this.forget(this.failuresByUser, user);
      if (this.o.revision() === revision)
        this.remember(this.verified, key, { revision, until: this.now() + (this.o.cacheMs ?? 60_000) });
      return { ok: true };
    }
    this.stats.wrong++;
    this.fail(this.failuresByAddr, clientAddr);
    this.fail(this.failuresByUser, user);
    return { ok: false, reason: 'wrong' };
  }

  close(): void {
    void this.worker?.terminate();
    this.worker = undefined;
    for (const j of this.jobs.values()) j.reject(new Error('password verifier closed'));
    this.jobs.clear();
  }

  private async check(user: string, password: string): Promise<boolean> {
    if (typeof password !== 'string' || password.length > 1024) return false;
    const stored = this.o.lookup(user) ?? DUMMY;
    if (stored.algorithm !== 'scrypt' || scryptParamsProblem(stored.N, stored.r, stored.p)) return false;
    this.stats.hashed++;
    const got = await this.hash(password, stored);
    return (
      got.length === stored.hash.length &&
      timingSafeEqual(got, stored.hash) &&
      this.o.lookup(user) !== undefined
    );
  }

  private hash(password: string, h: PasswordHash): Promise<Uint8Array> {
    if (!this.worker) {
      this.worker = new Worker(WORKER_SOURCE, { eval: true });
      this.worker.unref();
      this.worker.on('message', (m: { id: number; hash?: Uint8Array; error?: string }) => {
        const j = this.jobs.get(m.id);
        if (!j) return;
        this.jobs.delete(m.id);
        if (m.hash) j.resolve(m.hash);
        else j.reject(new Error(m.error ?? 'scrypt failed'));
      });
      this.worker.on('error', (err) => {
        for (const j of this.jobs.values()) j.reject(err);
        this.jobs.clear();
        this.worker = undefined;
      });
    }
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      this.jobs.set(id, { resolve, reject });
      this.worker!.postMessage({ id, password, salt: h.salt, N: h.N, r: h.r, p: h.p, keylen: h.hash.length });
    });
  }

  private blockedFor(m: Map<string, Failures>, k: string, now: number): number {
    const f = m.get(k);
    return f && f.until > now ? f.until - now : 0;
  }

  private fail(m: Map<string, Failures>, k: string): void {
    const f = m.get(k) ?? { count: 0, until: 0 };
    f.count++;
    const free = this.o.failuresBeforeBackoff ?? 5;
    if (f.count >= free) {
      const backoff = Math.min(
        (this.o.backoffMs ?? 1000) * 2 ** (f.count - free),
        this.o.maxBackoffMs ?? 60_000,
      );
      f.until = this.now() + backoff;
    }
    this.remember(m, k, f);
  }

  private forget(m: Map<string, Failures>, k: string): void {
    m.delete(k);
  }

  /** Bounded maps: the oldest entry goes first. */
  private remember<V>(m: Map<string, V>, k: string, v: V): void {
    m.delete(k);
    m.set(k, v);
    if (m.size > (this.o.maxEntries ?? 10_000)) m.delete(m.keys().next().value as string);
  }
}

/** A credential's cache key: never the password itself. */
function credentialKey(user: string, password: string): string {
  return createHash('sha256').update(user).update('\0').update(password).digest('base64');
}

// An unknown user costs one scrypt run like a known one, so the answer time does not tell which users exist.
const DUMMY: PasswordHash = {
  algorithm: 'scrypt',
  N: 2 ** 15,
  r: 8,
  p: 1,
  salt: new Uint8Array(16),
  hash: new Uint8Array(32),
};
