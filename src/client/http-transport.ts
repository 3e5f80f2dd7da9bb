import { CLUSTER_UID_HEADER, ClusterPin } from './cluster-pin.js';
import { FloeRequestError, FloeUnavailableError, ReplyMismatchError } from './errors.js';

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
  /** The body as a stream (the global `fetch` has one): read up to MAX_RESPONSE_BYTES and no further. */
  body?: { getReader(): ReadableStreamDefaultReader<Uint8Array> } | null;
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
  /** The cluster this client talks to (`clusterUid`); default: pinned from the first result that names one. */
  cluster?: ClusterPin;
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
  // A node that does not know the cluster's UUID yet (docs/cluster-identity.md): its first leader is minting it.
  'not_ready',
  // The node's lease store (etcd) is unreachable for now, or the node is at its connection limit (Retry-After: 1).
  'store_unavailable',
  'too_many_connections',
]);
/**
 * A 502 or 503 is retried whatever it says (a balancer or proxy with no healthy backend, whose page is not Floe's; a
 * node whose HTTP server is closing, which fastify answers `{"error":"Service Unavailable"}` before any Floe code runs),
 * except these Floe answers, which a retry within the call's budget would not change (reviews of FS-21).
 */
const FINAL_UNAVAILABLE_CODES = new Set(['pool_exhausted']);
/** A server's Retry-After is honoured up to this: a new leader is usually ready well within it. */
const MAX_RETRY_AFTER_MS = 1000;
const MAX_REDIRECTS_IN_A_ROW = 5;
/** Endpoints learned from redirects and confirmed leaders, kept besides the configured ones. */
export const MAX_LEARNED_ENDPOINTS = 8;
/** A learned endpoint goes after this many failed attempts in a row. */
export const MAX_LEARNED_FAILURES = 2;
/** A learned endpoint goes when no redirect named it and it did not lead (a confirmed answer) for this long. */
export const LEARNED_ENDPOINT_TTL_MS = 10 * 60_000;
/** Learned endpoints tried by one call, and only once the leader and every configured endpoint failed in it. */
export const MAX_LEARNED_PER_CALL = 2;
/** Longest `host:port` accepted from a redirect. */
export const MAX_REDIRECT_ADDR_LENGTH = 255;
/** Longest answer read (every Floe answer to the SDK is far smaller). */
export const MAX_RESPONSE_BYTES = 1024 * 1024;
/**
 * The codes of a failed connect or name lookup (undici's `fetch`: `TypeError('fetch failed')` with the system error
 * as `cause`; the SDK's TLS fetch: the system error itself) whose request certainly reached no server: the host's name did not resolve, or the connection was never made. Never a
 * timeout (the connect's or the request's) nor a reset: a request that may have arrived (finding FS-21).
 */
export const NOT_SENT_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED', // nothing listens there (or a firewall rejects the connect)
  'ENOTFOUND', // the name does not resolve
  'EAI_AGAIN', // the name could not be resolved for now
  'EHOSTUNREACH', // no route to the host: the connect failed
  'ENETUNREACH', // no route to its network: the connect failed
]);

interface LearnedEndpoint {
  failures: number;
  /** Monotonic ms when a redirect last named it or it last answered as the leader (confirmed). */
  confirmedAt: number;
}

/**
 * JSON over HTTP to a Floe cluster: finds and follows the leader, retries what is safe to retry.
 *
 * - Followers answer writes with 307 and `{error: 'not_leader', leader: {httpAddr}}`. Redirects are never followed by
 *   `fetch` itself (it drops `Authorization` across origins): the transport goes to `leader.httpAddr` (or `Location`),
 *   a plain `host:port` only (redirectTarget), with the scheme of the endpoint that redirected.
 * - 503 `not_leader` (no leader known), 503 `not_committed`, 504 (`timeout`, `outcome_unknown`), 429, network errors
 *   and per-attempt timeouts: try the next endpoint after a jittered backoff (at least the server's Retry-After, up to
 *   1 s), until the call's budget is spent.
 *   Every lease call is safe to repeat: acquire carries the same `requestId`, renew/release the same token.
 * - A connection refused, or a host whose name does not resolve (`NOT_SENT_CODES`: the request reached no server), costs
 *   no backoff wait: the next endpoint is tried at once, unless it was already tried since the last wait (every
 *   endpoint of the round failed: then the backoff, grown per wait, as above), so a client whose every endpoint
 *   refuses does not spin (finding FS-21).
 * - Anything else that is not 2xx is final: `FloeRequestError` with the server's code.
 * - Endpoints are learned from redirects only (finding FS-19 and its review): the leader a follower redirected to. The
 *   `members` of a 503 `not_leader` are for operators and are never followed. A learned endpoint is tried only after
 *   the leader and every configured endpoint failed in a call (at most MAX_LEARNED_PER_CALL per call, its failures do
 *   not raise the backoff); it goes after MAX_LEARNED_FAILURES failures in a row or LEARNED_ENDPOINT_TTL_MS without a
 *   redirect naming it or a confirmed answer. A learned endpoint becomes the sticky leader only when the caller
 *   `confirm`s an answer of it (its reply passed the SDK's checks); a reply for another request makes the caller
 *   `forget` the endpoint.
 */
export class HttpTransport {
  private readonly endpoints: string[];
  /** Canonical `scheme://host` of each configured endpoint (compared with redirect targets). */
  private readonly configuredKeys: Map<string, string>;
  /** Learned from redirects, not among `endpoints`, by canonical URL; at most MAX_LEARNED_ENDPOINTS. */
  private readonly learned = new Map<string, LearnedEndpoint>();
  /** Redirects may name loopback addresses only when a configured endpoint is one (tests, single-host setups). */
  private readonly loopbackAllowed: boolean;
  private readonly auth: string | undefined;
  private leader: string | undefined;
  private next = 0;
  private nextLearned = 0;
  /** The cluster every answer must come from (src/client/cluster-pin.ts). */
  readonly cluster: ClusterPin;

  constructor(private readonly o: HttpTransportOptions) {
    this.cluster = o.cluster ?? new ClusterPin(undefined);
    this.endpoints = o.endpoints.map((e) => normalise(e));
    this.configuredKeys = new Map(this.endpoints.map((e) => [canonical(e), e]));
    this.loopbackAllowed = this.endpoints.some((e) => {
      try {
        return isLoopbackOrUnspecified(new URL(e).hostname);
      } catch {
        return false;
      }
    });
    this.auth =
      o.user === undefined
        ? undefined
        : `Basic ${Buffer.from(`${o.user}:${o.password ?? ''}`).toString('base64')}`;
  }

  /** The node believed to lead (a redirect's target, a configured endpoint that answered, or a confirmed one). */
  get leaderEndpoint(): string | undefined {
    return this.leader;
  }

  /** The endpoints learned from redirects (besides the configured ones). */
  get learnedEndpoints(): readonly string[] {
    return [...this.learned.keys()];
  }

  /**
   * The caller checked an answer `endpoint` gave (CallResult.endpoint) and it answered the request: a learned endpoint
   * is kept (for another LEARNED_ENDPOINT_TTL_MS) and becomes the leader if none is known.
   */
  confirm(endpoint: string): void {
    const l = this.learned.get(endpoint);
    if (l === undefined) return;
    l.failures = 0;
    l.confirmedAt = this.o.monotonic();
    this.leader ??= endpoint;
  }

  /** An answer of `endpoint` was not the answer to its request: it is no longer the leader, nor learned. */
  forget(endpoint: string): void {
    if (this.leader === endpoint) this.leader = undefined;
    this.learned.delete(endpoint);
  }

  async post<T>(path: string, body: unknown, call: CallOptions): Promise<CallResult<T>> {
    const started = this.o.monotonic();
    let attempts = 0;
    let redirects = 0;
    // Set by every attempt that neither returns nor throws: an Error made up front (a stack captured on every call,
    // the hot path of a busy client) was never seen.
    let lastError: unknown;
    let backoff = 25;
    /** A learned endpoint a redirect named: tried next (a configured one becomes `leader`, as before). */
    let follow: string | undefined;
    /** The configured endpoints tried since the call started or since its last learned endpoint. */
    const tried = new Set<string>();
    let learnedTries = 0;
    /** The endpoints tried since the call started or since its last backoff wait: the current round (FS-21). */
    const sinceWait = new Set<string>();
    /** Set when the round check below chose to go on at once: the pick must see the learned endpoints it saw. */
    let predicted = false;
    for (;;) {
      if (!predicted) this.expireLearned();
      predicted = false;
      let endpoint: string;
      /** One of the learned endpoints tried once the others failed (not a redirect's target, nor the leader). */
      let extra = false;
      if (follow !== undefined) {
        endpoint = follow;
        follow = undefined;
      } else if (this.leader !== undefined) {
        endpoint = this.leader;
      } else {
        const up = this.upNext(learnedTries, tried);
        endpoint = up.endpoint;
        if (up.learned) {
          this.nextLearned = (this.nextLearned % this.learned.size) + 1;
          extra = true;
          learnedTries++;
          tried.clear();
        } else {
          this.next = (this.next % this.endpoints.length) + 1;
        }
      }
      tried.add(endpoint);
      sinceWait.add(endpoint);
      const isLearned = this.learned.has(endpoint);
      attempts++;
      const sentAtMono = this.o.monotonic();
      const sentAtWall = this.o.wall();
      let retryAt: string | undefined;
      let retryAfterMs = 0;
      try {
        if (this.cluster.waitingForOwn)
          throw new ReplyMismatchError(
            path,
            'cluster',
            'this node’s own (not known yet: nothing sent)',
            'none',
          );
        const res = await this.o.fetch(`${endpoint}${path}`, {
          method: 'POST',
          headers: this.headers(),
          body: JSON.stringify(body),
          redirect: 'manual',
          signal: AbortSignal.timeout(this.o.requestTimeoutMs),
        });
        // Another cluster's answer is never a result, nor a redirect to follow: this endpoint reaches the wrong
        // cluster (review of FS-19). It is dropped as leader and learned endpoint; the call goes on elsewhere.
        const foreign = this.cluster.admit(
          path,
          res.headers.get(CLUSTER_UID_HEADER),
          res.status >= 200 && res.status < 300,
        );
        if (foreign !== undefined) {
          await res.body
            ?.getReader()
            .cancel()
            .catch(() => {});
          this.forget(endpoint);
          throw foreign;
        }
        // Checked inline (no extra await on the usual path): a reply's timing relative to other tasks stays as it was.
        const declared = Number(res.headers.get('content-length') ?? Number.NaN);
        if (Number.isFinite(declared) && declared > MAX_RESPONSE_BYTES) {
          await res.body
            ?.getReader()
            .cancel()
            .catch(() => {});
          throw tooLong(endpoint);
        }
        const text = res.body ? await readStream(res.body, endpoint) : await res.text();
        if (text.length > MAX_RESPONSE_BYTES) throw tooLong(endpoint);
        const parsed = parseJson(text);
        if (res.status >= 200 && res.status < 300) {
          // A learned endpoint leads only once the caller confirmed its answer (review of FS-19, F5).
          if (!isLearned) this.leader = endpoint;
          return { body: parsed as T, sentAtMono, sentAtWall, endpoint };
        }
        const err = (parsed ?? {}) as { error?: unknown; message?: unknown; leader?: { httpAddr?: unknown } };
        const code = typeof err.error === 'string' ? err.error : `http_${res.status}`;
        const message = typeof err.message === 'string' ? err.message : text.slice(0, 200);
        if (res.status === 307 || res.status === 308) {
          const named = err.leader?.httpAddr;
          const target =
            named !== undefined
              ? this.redirectTarget(named, endpoint)
              : this.redirectTarget(locationHostPort(res.headers.get('location')), endpoint);
          if (target !== undefined && redirects < MAX_REDIRECTS_IN_A_ROW) {
            redirects++;
            retryAt = target;
          }
          lastError = new FloeRequestError(
            res.status,
            code,
            target === undefined ? `${message} (redirect target refused: not a plain host:port)` : message,
            path,
          );
        } else if (retryableAnswer(res.status, code)) {
          retryAfterMs = retryAfter(res.headers.get('retry-after'));
          lastError = new FloeRequestError(res.status, code, message, path);
        } else if (code === 'cluster_mismatch') {
          // The node refused before acting: it belongs to another cluster than the one named in the request. Its
          // answer names that cluster, so admit() refused it above, unless something in between dropped the header.
          this.cluster.refused++;
          this.forget(endpoint);
          lastError = new ReplyMismatchError(
            path,
            'cluster',
            this.cluster.value ?? 'the pinned one',
            message.slice(0, 120),
          );
        } else {
          throw new FloeRequestError(res.status, code, message, path);
        }
      } catch (e) {
        if (e instanceof FloeRequestError && e.status !== 307 && e.status !== 308 && !isRetryable(e)) throw e;
        lastError = e; // network error or attempt timeout: outcome unknown, safe to repeat
      }
      if (retryAt !== undefined) {
        // Follow the redirect at once.
        if (this.configuredKeys.get(canonical(retryAt)) !== undefined) {
          this.leader = this.configuredKeys.get(canonical(retryAt));
        } else {
          this.learn(retryAt);
          this.leader = undefined;
          follow = retryAt;
        }
        continue;
      }
      redirects = 0;
      this.leader = undefined;
      if (isLearned) this.failedLearned(endpoint);
      const elapsed = this.o.monotonic() - started;
      if (elapsed >= call.budgetMs) throw new FloeUnavailableError(path, attempts, lastError);
      // The request reached no server (FS-21): the next endpoint at once, unless the round is over (it was tried since
      // the last wait). No other state changes here: the next iteration picks the endpoint upNext names, without
      // expiring learned endpoints again in between (one could expire and leave a refusing endpoint tried twice).
      if (notSent(lastError)) {
        this.expireLearned();
        if (!sinceWait.has(this.upNext(learnedTries, tried).endpoint)) {
          predicted = true;
          continue;
        }
      }
      sinceWait.clear();
      // A Retry-After is one node's advice, honoured up to half of what the call has left: a renewal may have well
      // under its 1 s left (TTL less margin), and sleeping all of it lost the lease (nodes seed 211328).
      const left = call.budgetMs - elapsed;
      const wait = Math.min(
        Math.max(backoff * (0.5 + this.o.random()), Math.min(retryAfterMs, left / 2)),
        left,
      );
      // Learned endpoints tried besides may be long gone: their failures do not slow down the others (review F2). A
      // redirect's target or the leader that fails does, as ever (a redirect to a dead node must not loop fast).
      if (!extra) backoff = Math.min(backoff * 2, 1000);
      await this.o.sleep(wait);
    }
  }

  /**
   * Every request names the pinned cluster (`floe-cluster`), so a node of another cluster refuses it (421) before
   * acting: an endpoint, balancer or redirect that reaches the wrong cluster changes nothing there. Nothing pinned
   * yet (no `clusterUid`, no cache, no result so far): nothing to name.
   */
  private headers(): Record<string, string> {
    const h: Record<string, string> = { 'content-type': 'application/json' };
    if (this.auth !== undefined) h.authorization = this.auth;
    const uid = this.cluster.value;
    if (uid !== undefined) h[CLUSTER_UID_HEADER] = uid;
    return h;
  }

  /**
   * The endpoint a call tries next when it follows no redirect and knows no leader, without taking its turn: a learned
   * one (in turn) once every configured endpoint failed in the call (`tried`) and fewer than MAX_LEARNED_PER_CALL were
   * tried, else the configured endpoints in turn.
   */
  private upNext(learnedTries: number, tried: ReadonlySet<string>): { endpoint: string; learned: boolean } {
    if (
      learnedTries < MAX_LEARNED_PER_CALL &&
      this.learned.size > 0 &&
      this.endpoints.every((e) => tried.has(e))
    ) {
      const all = [...this.learned.keys()];
      return { endpoint: all[this.nextLearned % all.length] as string, learned: true };
    }
    return { endpoint: this.endpoints[this.next % this.endpoints.length] as string, learned: false };
  }

  /** A redirect named `endpoint` (canonical, not configured): keep it, or note that it was named again. */
  private learn(endpoint: string): void {
    const now = this.o.monotonic();
    const l = this.learned.get(endpoint);
    if (l !== undefined) {
      l.confirmedAt = now;
      return;
    }
    if (this.learned.size >= MAX_LEARNED_ENDPOINTS) {
      let oldest: string | undefined;
      let at = Number.POSITIVE_INFINITY;
      for (const [k, v] of this.learned)
        if (v.confirmedAt < at) {
          oldest = k;
          at = v.confirmedAt;
        }
      if (oldest !== undefined) this.forget(oldest);
    }
    this.learned.set(endpoint, { failures: 0, confirmedAt: now });
  }

  private failedLearned(endpoint: string): void {
    const l = this.learned.get(endpoint);
    if (l === undefined) return;
    l.failures++;
    if (l.failures >= MAX_LEARNED_FAILURES) this.forget(endpoint);
  }

  private expireLearned(): void {
    if (this.learned.size === 0) return;
    const now = this.o.monotonic();
    for (const [k, v] of this.learned) if (now - v.confirmedAt > LEARNED_ENDPOINT_TTL_MS) this.forget(k);
  }

  /**
   * Where a redirect from `from` may send the request: `addr` must be a plain `host:port` (no scheme, path, user or
   * query; port 1..65535; at most MAX_REDIRECT_ADDR_LENGTH characters), not loopback or unspecified unless a configured
   * endpoint is. The scheme is always `from`'s own (never https -> http). Canonical `scheme://host` (lower-cased, as
   * `new URL(...).host` gives it), or undefined when refused.
   */
  private redirectTarget(addr: unknown, from: string): string | undefined {
    if (typeof addr !== 'string' || addr.length > MAX_REDIRECT_ADDR_LENGTH) return undefined;
    const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/.exec(addr);
    if (m === null) return undefined;
    const port = Number(m[2]);
    if (port < 1 || port > 65535) return undefined;
    const scheme = from.startsWith('https://') ? 'https' : 'http';
    let u: URL;
    try {
      u = new URL(`${scheme}://${addr}`);
    } catch {
      return undefined;
    }
    if (u.username !== '' || u.password !== '' || u.pathname !== '/' || u.search !== '' || u.hash !== '')
      return undefined;
    if (!this.loopbackAllowed && isLoopbackOrUnspecified(u.hostname)) return undefined;
    return `${scheme}://${u.host}`;
  }
}

/** `scheme://host` as `new URL` gives it (lower-cased host, canonical IP literals); the string itself if no URL. */
function canonical(endpoint: string): string {
  try {
    const u = new URL(endpoint);
    return `${u.protocol}//${u.host}`;
  } catch {
    return endpoint;
  }
}

/** Loopback or unspecified, as `new URL(...).hostname` writes it (127.1, 0x7f.1 and 0 are already dotted quads). */
function isLoopbackOrUnspecified(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  if (/^127\./.test(h) || h === '0.0.0.0') return true;
  if (h === '[::]' || h === '[::1]') return true;
  // IPv4-mapped IPv6 of 127/8 or 0.0.0.0 (the URL parser writes them in hex).
  return /^\[::ffff:(7f[0-9a-f]{2}:[0-9a-f]{1,4}|0:0)\]$/.test(h);
}

function tooLong(endpoint: string): Error {
  return new Error(
    `the answer from ${endpoint} exceeds ${MAX_RESPONSE_BYTES} bytes (the SDK's limit on a Floe answer)`,
  );
}

/** Reads a streamed answer, refusing one longer than MAX_RESPONSE_BYTES (the attempt then counts as failed). */
async function readStream(
  body: { getReader(): ReadableStreamDefaultReader<Uint8Array> },
  endpoint: string,
): Promise<string> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_RESPONSE_BYTES) {
      await reader.cancel().catch(() => {});
      throw tooLong(endpoint);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Whether a failed attempt's request certainly reached no server: `fetch` failed while connecting. Its `cause` is the
 * system error of the connect (`syscall` `connect`) or of the name lookup (`getaddrinfo`) with a `code` of
 * NOT_SENT_CODES. The same codes also end a connection that was already open (`syscall` `read` or `write`: a
 * retransmission timed out after an ICMP error, a body cut mid-read), where the node may have the request: those
 * wait, as any other failure (review of FS-21). An AggregateError of several addresses' connects (happy eyeballs)
 * counts when every one of its errors is a failed connect and one of them has such a code (the others may have timed
 * out or been invalid: no connection was made either way). With the SDK's TLS fetch the error comes bare, no `cause`.
 */
function notSent(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  // Global fetch (undici) wraps the system error as `cause`; the SDK's TLS fetch (node:https) rejects with it bare.
  const cause = (e as { cause?: unknown }).cause;
  const err = typeof cause === 'object' && cause !== null ? cause : e;
  const errors = (err as { errors?: unknown }).errors;
  // Several addresses (happy eyeballs): none connected. One refused, the others may have timed out or been invalid.
  if (Array.isArray(errors))
    return errors.length > 0 && errors.every(connectFailed) && errors.some(failedToConnect);
  return failedToConnect(err);
}

/** A system error of a connect or name lookup with one of NOT_SENT_CODES. */
function failedToConnect(x: unknown): boolean {
  if (typeof x !== 'object' || x === null) return false;
  const { code, syscall } = x as { code?: unknown; syscall?: unknown };
  return (
    typeof code === 'string' &&
    NOT_SENT_CODES.has(code) &&
    (syscall === 'connect' || syscall === 'getaddrinfo')
  );
}

/** Any system error of a connect: the connection was never made. */
function connectFailed(x: unknown): boolean {
  return (
    typeof x === 'object' &&
    x !== null &&
    (x as { syscall?: unknown }).syscall === 'connect' &&
    typeof (x as { code?: unknown }).code === 'string'
  );
}

function isRetryable(e: FloeRequestError): boolean {
  return retryableAnswer(e.status, e.serverCode);
}

function retryableAnswer(status: number, code: string): boolean {
  if (status === 429 || status === 504) return true;
  if (status === 502 || status === 503) return !FINAL_UNAVAILABLE_CODES.has(code);
  return status >= 500 && RETRYABLE_CODES.has(code);
}

/** Retry-After in seconds (the only form Floe sends), capped; anything else counts as absent. */
function retryAfter(header: string | null): number {
  if (header === null || !/^\d+$/.test(header.trim())) return 0;
  return Math.min(Number(header.trim()) * 1000, MAX_RETRY_AFTER_MS);
}

/** A configured endpoint: a bare `host:port` gets http. */
function normalise(endpoint: string): string {
  const e = endpoint.trim().replace(/\/+$/, '');
  if (/^https?:\/\//.test(e)) return e;
  return `http://${e}`;
}

/** The `host:port` of a redirect's Location (its default port made explicit), if it names no user. */
function locationHostPort(location: string | null): string | undefined {
  if (!location) return undefined;
  try {
    const u = new URL(location);
    if (u.username !== '' || u.password !== '') return undefined;
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
    return u.port === '' ? `${u.hostname}:${u.protocol === 'https:' ? 443 : 80}` : u.host;
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
