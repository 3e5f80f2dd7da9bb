import { FloeRequestError, FloeUnavailableError } from './errors.js';

/** The subset of `fetch` the SDK uses; inject a fake in tests. */
export type FetchLike = (url: string, init: FetchInit) => Promise<FetchResponseLike>;
export interface FetchInit {
  method: string;
  headers: Record<string, string>;
  body?: string;
  redirect: 'manual';
  signal: AbortSignal;
}
export interface FetchResponseLike {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
}

export interface HttpTransportOptions {
  /** `host:port` or `http://host:port` of any nodes of the cluster (at least one). */
  endpoints: readonly string[];
  user?: string;
  password?: string;
  /** Per attempt. */
  requestTimeoutMs: number;
  fetch: FetchLike;
  /** Monotonic ms, used to time each attempt's send. */
  monotonic: () => number;
  /** Wall-clock ms, also read at each attempt's send (a lease's deadline counts on both clocks). */
  wall: () => number;
  sleep: (ms: number) => Promise<void>;
  /** [0, 1): jitters the backoff. */
  random: () => number;
}

export interface CallOptions {
  /** Give up (FloeUnavailableError) once this much time has gone by since the call started. */
  budgetMs: number;
}

/** A successful answer, with the monotonic and wall-clock times the successful attempt was sent. */
export interface CallResult<T> {
  body: T;
  sentAtMono: number;
  sentAtWall: number;
  endpoint: string;
}

// not_committed: the proposal's index went to another leader's entry, so it did not happen (docs/http-errors.md).
const RETRYABLE_CODES = new Set([
  'not_leader',
  'timeout',
  'overloaded',
  'stopped',
  'internal',
  'not_committed',
]);
/** A server's Retry-After is honoured up to this: a new leader is usually ready well within it. */
const MAX_RETRY_AFTER_MS = 1000;
const MAX_REDIRECTS_IN_A_ROW = 5;
/** Endpoints learned from the cluster's answers, kept besides the configured ones (the oldest goes first). */
export const MAX_LEARNED_ENDPOINTS = 32;

/**
 * JSON over HTTP to a Floe cluster: finds and follows the leader, retries what is safe to retry.
 *
 * - Followers answer writes with 307 and `{error: 'not_leader', leader: {httpAddr}}`. Redirects are never followed by
 *   `fetch` itself (it drops `Authorization` across origins): the transport goes to `leader.httpAddr` (or `Location`).
 * - 503 `not_leader` (no leader known), 503 `not_committed`, 504 (`timeout`, `outcome_unknown`), 429, network errors
 *   and per-attempt timeouts: try the next endpoint after a jittered backoff (at least the server's Retry-After, up to
 *   1 s), until the call's budget is spent.
 *   Every lease call is safe to repeat: acquire carries the same `requestId`, renew/release the same token.
 * - Anything else that is not 2xx is final: `FloeRequestError` with the server's code.
 * - Endpoints are learned from answers (finding FS-19): a leader named by a redirect or that answered, and the members
 *   a node without a leader lists in its 503 `not_leader` (`members[].httpAddr`). They join the configured endpoints
 *   in the rotation, so a client whose configured endpoints were all replaced (or reach only processes that are not
 *   members, behind a load balancer) still finds the leader. Only where requests go changes: each answer is still the
 *   one to the request sent, and every lease call stays safe to repeat wherever it lands.
 */
export class HttpTransport {
  private readonly endpoints: string[];
  /** Learned from answers, not among `endpoints`; at most MAX_LEARNED_ENDPOINTS, oldest first. */
  private readonly learned: string[] = [];
  private readonly auth: string | undefined;
  private leader: string | undefined;
  private next = 0;

  constructor(private readonly o: HttpTransportOptions) {
    this.endpoints = o.endpoints.map((e) => normalise(e));
    this.auth =
      o.user === undefined
        ? undefined
        : `Basic ${Buffer.from(`${o.user}:${o.password ?? ''}`).toString('base64')}`;
  }

  /** The node believed to lead (learned from redirects and answers), if any. */
  get leaderEndpoint(): string | undefined {
    return this.leader;
  }

  /** The endpoints learned from the cluster's answers so far (besides the configured ones), oldest first. */
  get learnedEndpoints(): readonly string[] {
    return this.learned;
  }

  async post<T>(path: string, body: unknown, call: CallOptions): Promise<CallResult<T>> {
    const started = this.o.monotonic();
    let attempts = 0;
    let redirects = 0;
    // Set by every attempt that neither returns nor throws: an Error made up front (a stack captured on every call,
    // the hot path of a busy client) was never seen.
    let lastError: unknown;
    let backoff = 25;
    for (;;) {
      const endpoint = this.leader ?? this.pick();
      attempts++;
      const sentAtMono = this.o.monotonic();
      const sentAtWall = this.o.wall();
      let retryAt: string | undefined;
      let retryAfterMs = 0;
      try {
        const res = await this.o.fetch(`${endpoint}${path}`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(this.auth === undefined ? {} : { authorization: this.auth }),
          },
          body: JSON.stringify(body),
          redirect: 'manual',
          signal: AbortSignal.timeout(this.o.requestTimeoutMs),
        });
        const text = await res.text();
        const parsed = parseJson(text);
        if (res.status >= 200 && res.status < 300) {
          this.leader = endpoint;
          this.learn(endpoint);
          return { body: parsed as T, sentAtMono, sentAtWall, endpoint };
        }
        const err = (parsed ?? {}) as {
          error?: unknown;
          message?: unknown;
          leader?: { httpAddr?: unknown };
          members?: unknown;
        };
        const code = typeof err.error === 'string' ? err.error : `http_${res.status}`;
        const message = typeof err.message === 'string' ? err.message : text.slice(0, 200);
        if (res.status === 307 || res.status === 308) {
          const addr =
            typeof err.leader?.httpAddr === 'string'
              ? err.leader.httpAddr
              : locationHost(res.headers.get('location'));
          if (addr !== undefined && redirects < MAX_REDIRECTS_IN_A_ROW) {
            redirects++;
            retryAt = normalise(addr, endpoint);
            this.learn(retryAt);
          }
          lastError = new FloeRequestError(res.status, code, message, path);
        } else if (
          res.status === 429 ||
          res.status === 504 ||
          (res.status >= 500 && RETRYABLE_CODES.has(code))
        ) {
          retryAfterMs = retryAfter(res.headers.get('retry-after'));
          if (code === 'not_leader' && Array.isArray(err.members))
            for (const m of err.members) {
              const addr = (m as { httpAddr?: unknown } | null)?.httpAddr;
              if (isHostPort(addr)) this.learn(normalise(addr, endpoint));
            }
          lastError = new FloeRequestError(res.status, code, message, path);
        } else {
          throw new FloeRequestError(res.status, code, message, path);
        }
      } catch (e) {
        if (e instanceof FloeRequestError && e.status !== 307 && e.status !== 308 && !isRetryable(e)) throw e;
        lastError = e; // network error or attempt timeout: outcome unknown, safe to repeat
      }
      if (retryAt !== undefined) {
        this.leader = retryAt; // follow the redirect at once
        continue;
      }
      redirects = 0;
      this.leader = undefined;
      const elapsed = this.o.monotonic() - started;
      if (elapsed >= call.budgetMs) throw new FloeUnavailableError(path, attempts, lastError);
      const wait = Math.min(
        Math.max(backoff * (0.5 + this.o.random()), retryAfterMs),
        call.budgetMs - elapsed,
      );
      backoff = Math.min(backoff * 2, 1000);
      await this.o.sleep(wait);
    }
  }

  /** The configured endpoints, then the learned ones, in turn. */
  private pick(): string {
    const n = this.endpoints.length + this.learned.length;
    const i = this.next % n;
    this.next = i + 1;
    return (
      i < this.endpoints.length ? this.endpoints[i] : this.learned[i - this.endpoints.length]
    ) as string;
  }

  private learn(endpoint: string): void {
    if (this.endpoints.includes(endpoint) || this.learned.includes(endpoint)) return;
    if (this.learned.length >= MAX_LEARNED_ENDPOINTS) this.learned.shift();
    this.learned.push(endpoint);
  }
}

function isRetryable(e: FloeRequestError): boolean {
  return e.status === 429 || e.status === 504 || (e.status >= 500 && RETRYABLE_CODES.has(e.serverCode));
}

/** Retry-After in seconds (the only form Floe sends), capped; anything else counts as absent. */
function retryAfter(header: string | null): number {
  if (header === null || !/^\d+$/.test(header.trim())) return 0;
  return Math.min(Number(header.trim()) * 1000, MAX_RETRY_AFTER_MS);
}

/** A bare `host:port` gets the scheme of `like` (a leader named by an https endpoint is https too), else http. */
function normalise(endpoint: string, like?: string): string {
  const e = endpoint.trim().replace(/\/+$/, '');
  if (/^https?:\/\//.test(e)) return e;
  return `${like?.startsWith('https://') ? 'https' : 'http'}://${e}`;
}

/** A member's address as a node publishes it: `host:port` (a name or an IPv4/IPv6 literal), nothing else. */
function isHostPort(v: unknown): v is string {
  return typeof v === 'string' && v.length <= 300 && /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):\d{1,5}$/.test(v);
}

function locationHost(location: string | null): string | undefined {
  if (!location) return undefined;
  try {
    return new URL(location).host;
  } catch {
    return undefined;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
