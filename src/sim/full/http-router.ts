// HTTP between simulated clients and nodes: an implementation of the SDK's FetchLike seam that
// carries each request over the virtual network to the node's Fastify app (inject(): the real
// routes, no socket) and the reply back. A request to a node that is down is refused after one
// network delay (a TCP RST); one lost on the way, or to a node that dies or stalls, ends at the
// caller's own timeout on its virtual clock, as an AbortSignal.timeout would.

import { CLUSTER_UID_HEADER } from '../../client/cluster-pin.js';
import type { FetchInit, FetchLike, FetchResponseLike } from '../../client/http-transport.js';
import type { Prng } from '../prng.js';
import type { LeaseLedger } from './lease-ledger.js';
import type { NetConditions } from './network.js';
import type { NodeHost } from './node-host.js';
import type { SimProcess } from './process.js';
import { uuidOf } from './uuid.js';
import type { World } from './world.js';

/** A name that reaches any running node (a load balancer or round-robin DNS in front of the cluster). */
export const LB_HOST = 'floe-lb:8080';

export interface HttpStats {
  requests: number;
  replies: number;
  refused: number;
  lost: number;
  timeouts: number;
  /** Lease replies delivered to another client's request (the `replyMixup` fault). */
  mixedUp: number;
  /** Acquire answers replaced by another cluster's grant (the `foreignCluster` fault). */
  foreign: number;
}

interface HeldReply {
  client: string;
  status: number;
  body: string;
  headers: Record<string, string | string[] | number | undefined>;
}

export class HttpRouter {
  readonly stats: HttpStats = {
    requests: 0,
    replies: 0,
    refused: 0,
    lost: 0,
    timeouts: 0,
    mixedUp: 0,
    foreign: 0,
  };
  /** Client-to-node links that deliver nothing ("client->nodeId" or "nodeId->client"). */
  readonly blocked = new Set<string>();
  /**
   * Probability that a successful lease reply to an SDK client is swapped for a recent reply of the same kind
   * (acquire, renew, release) that another client's request got (the `replyMixup` fault; 0: off). The request itself
   * was executed as sent; its own answer is lost.
   */
  mixup = 0;
  /**
   * Probability that a successful acquire answer to an SDK client is replaced by another cluster's grant: another
   * client's recent grant (its worker ID, token and marks) echoing this request, named by another cluster's UUID (the
   * `foreignCluster` fault; 0: off). The request itself was executed here as sent; its own answer is lost.
   */
  foreign = 0;
  private foreignUid: string | undefined;
  /**
   * Client processes that were given a successful answer naming this cluster: their SDK has pinned it. A client with
   * no pin yet takes the first cluster that answers (docs/cluster-identity.md: hence the `clusterUid` option), so
   * another cluster's grant goes only to pinned ones: the claim the fault checks.
   */
  private readonly pinned = new WeakSet<SimProcess>();
  private readonly recentReplies = new Map<string, HeldReply[]>();
  /** Whether node-to-node links are cut (members' own HTTP calls, e.g. a follower's segment allocation). */
  nodeLinkBlocked: (from: number, to: number) => boolean = () => false;
  /** What the replicated lease state committed: every successful lease reply a node gives is checked against it. */
  ledger: LeaseLedger | undefined;
  private readonly byHost = new Map<string, NodeHost>();
  private readonly rng: Prng;

  constructor(
    private readonly world: World,
    private readonly conditions: () => NetConditions,
  ) {
    this.rng = world.rng('http');
  }

  addHost(h: NodeHost): void {
    this.byHost.set(h.httpAddr, h);
  }

  /** A running node, as a load balancer in front of the cluster would pick one. */
  private anyUp(): NodeHost | undefined {
    const up = [...this.byHost.values()].filter((h) => h.up && !h.removed);
    return up.length === 0 ? undefined : (this.rng.pick(up) as NodeHost);
  }

  /** A fetch for one client process; `timeoutMs` is that client's per-attempt timeout. */
  /** `client` was configured with the cluster's UUID (`clusterUid`): pinned before its first answer. */
  pinnedBy(client: SimProcess): void {
    this.pinned.add(client);
  }

  fetchFor(client: SimProcess, clientName: string, timeoutMs: number): FetchLike {
    return (url, init) => this.request(client, clientName, timeoutMs, url, init);
  }

  private delay(): number {
    const c = this.conditions();
    let d = this.rng.range(c.delayUs[0], c.delayUs[1]);
    if (c.spike > 0 && this.rng.chance(c.spike)) d += this.rng.range(c.spikeUs[0], c.spikeUs[1]);
    return d;
  }

  private request(
    client: SimProcess,
    clientName: string,
    timeoutMs: number,
    url: string,
    init: FetchInit,
  ): Promise<FetchResponseLike> {
    const w = this.world;
    this.stats.requests++;
    const u = splitUrl(url);
    const host = u.host === LB_HOST ? this.anyUp() : this.byHost.get(u.host);
    const path = u.path;
    if (this.ledger && init.method === 'POST' && path.endsWith('/workers/acquire'))
      this.ledger.acquireSent(client.name, init.body);
    return new Promise<FetchResponseLike>((resolve, reject) => {
      let settled = false;
      const timer = client.setTimeout(
        () => {
          if (settled) return;
          settled = true;
          this.stats.timeouts++;
          reject(
            Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' }),
          );
        },
        timeoutMs,
        'http-timeout',
      );
      const answer = (fn: () => void) => {
        if (settled) return;
        settled = true;
        client.clearTimer(timer);
        fn();
      };
      if (host === undefined) {
        w.sched.after(this.delay(), client, 'http-refused', () =>
          answer(() => reject(fetchFailed('getaddrinfo', 'ENOTFOUND', u.host))),
        );
        return;
      }
      const nodeProc = host.up ? host.proc : undefined;
      const fromNode = /^n(\d+)$/.exec(clientName);
      const cut = (a: number, b: number) => fromNode !== null && this.nodeLinkBlocked(a, b);
      // Across a cut link the SYN, or the RST that answers it, is lost: no refusal, the caller's timeout ends it
      // (review of FS-21; before, a cut client was refused at once by a down node and moved on without a wait).
      const linkCut = () =>
        this.blocked.has(`${clientName}->${host.id}`) ||
        this.blocked.has(`${host.id}->${clientName}`) ||
        cut(Number(fromNode?.[1]), host.id) ||
        cut(host.id, Number(fromNode?.[1]));
      if ((nodeProc === undefined || !host.app) && linkCut()) {
        this.stats.lost++;
        return;
      }
      if (nodeProc === undefined || !host.app) {
        this.stats.refused++;
        w.sched.after(this.delay(), client, 'http-refused', () =>
          answer(() => reject(fetchFailed('connect', 'ECONNREFUSED', u.host))),
        );
        return;
      }
      const c = this.conditions();
      if (
        this.blocked.has(`${clientName}->${host.id}`) ||
        cut(Number(fromNode?.[1]), host.id) ||
        this.rng.chance(c.drop)
      ) {
        this.stats.lost++;
        return; // the caller's timeout ends it
      }
      const app = host.app;
      // A busy-waiting client sends when its wait is over, not before.
      w.sched.at(client.effectiveUs + this.delay(), nodeProc, `http ${init.method} ${path}`, () => {
        app.inject(
          {
            method: init.method as 'GET',
            url: path,
            headers: init.headers,
            // The options are the router's own, always well-formed: light-my-request need not check them.
            validate: false,
            ...(init.body === undefined ? {} : { payload: init.body }),
          },
          (err, res) => {
            if (err || res === undefined) {
              w.fail('harness', `inject of ${init.method} ${path} on n${host.id} failed: ${String(err)}`);
              return;
            }
            if (!nodeProc.alive) return;
            if (
              this.blocked.has(`${host.id}->${clientName}`) ||
              cut(host.id, Number(fromNode?.[1])) ||
              this.rng.chance(this.conditions().drop)
            ) {
              this.stats.lost++;
              return;
            }
            let status = res.statusCode;
            let body = res.body;
            let headers = res.headers;
            const kind = status === 200 ? LEASE_PATH.exec(path) : null;
            const mismatch = kind ? leaseReplyMismatch(path, init.body, body, kind, this.ledger) : undefined;
            if (mismatch)
              w.fail('reply-mismatch', `n${host.id} answered ${init.method} ${path}: ${mismatch}`);
            if (kind) {
              const k = kind[2] ?? (kind[4] as string);
              const held = this.recentReplies.get(k) ?? [];
              const other =
                this.mixup > 0 && this.rng.chance(this.mixup)
                  ? held.find((r) => r.client !== clientName)
                  : undefined;
              held.unshift({ client: clientName, status, body, headers });
              if (held.length > 4) held.pop();
              this.recentReplies.set(k, held);
              if (other) {
                this.stats.mixedUp++;
                w.trace(
                  `http mixup: ${clientName}'s ${init.method} ${path} gets ${other.client}'s reply ${other.body.slice(0, 120)}`,
                );
                ({ status, body, headers } = other);
              } else if (
                kind[2] === 'acquire' &&
                this.foreign > 0 &&
                this.pinned.has(client) &&
                this.rng.chance(this.foreign)
              ) {
                const donor = held.find((r) => r.client !== clientName);
                const forged = donor ? foreignGrant(body, donor.body) : undefined;
                if (forged !== undefined) {
                  this.stats.foreign++;
                  this.foreignUid ??= uuidOf(w.rng('foreign-cluster'));
                  w.trace(
                    `http foreign: ${clientName}'s ${init.method} ${path} gets another cluster's grant ${forged.slice(0, 120)}`,
                  );
                  body = forged;
                  headers = { ...headers, [CLUSTER_UID_HEADER]: this.foreignUid };
                }
              }
            }
            const pins = status >= 200 && status < 300 && headers[CLUSTER_UID_HEADER] !== undefined;
            w.sched.after(this.delay(), client, 'http-reply', () =>
              answer(() => {
                this.stats.replies++;
                if (pins && headers[CLUSTER_UID_HEADER] !== this.foreignUid) this.pinned.add(client);
                resolve({
                  status,
                  headers: {
                    get: (name: string) => {
                      const v = headers[name.toLowerCase()];
                      return v === undefined ? null : Array.isArray(v) ? v.join(', ') : String(v);
                    },
                  },
                  text: async () => body,
                });
              }),
            );
          },
        );
      });
    });
  }
}

export interface HttpAnswer {
  status: number;
  body: Record<string, unknown>;
}

/**
 * One request from a simulated client, following the leader's redirects (307) but never retrying
 * anything else. 'refused': nothing was sent or nothing was done (connection refused, no leader to
 * redirect to); 'lost': no answer (timeout), so the outcome is unknown.
 */
export async function callLeader(
  fetch: FetchLike,
  endpoint: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<HttpAnswer | 'refused' | 'lost'> {
  let base = endpoint;
  for (let hop = 0; hop < 4; hop++) {
    let res: FetchResponseLike;
    try {
      res = await fetch(`${base}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        redirect: 'manual',
        signal: NEVER_ABORTED,
      });
    } catch (err) {
      return /ECONNREFUSED|ENOTFOUND/.test(String(err)) ? 'refused' : 'lost';
    }
    const text = await res.text();
    let parsed: Record<string, unknown> = {};
    try {
      parsed = JSON.parse(text) as Record<string, unknown>;
    } catch {}
    if (res.status === 307) {
      const leader = (parsed.leader as { httpAddr?: string } | undefined)?.httpAddr;
      if (!leader) return 'refused';
      base = `http://${leader}`;
      continue;
    }
    return { status: res.status, body: parsed };
  }
  return 'refused';
}

const NEVER_ABORTED = new AbortController().signal;

/**
 * A request that reached no node, shaped as Node's `fetch` (undici) reports it: `TypeError` whose `cause` is the system
 * error with its `code` and `syscall` (the SDK tells a refused connection by `cause.code`, finding FS-21). The message
 * also names the code and host, for the run's log.
 */
function fetchFailed(
  syscall: 'connect' | 'getaddrinfo',
  code: 'ECONNREFUSED' | 'ENOTFOUND',
  host: string,
): TypeError {
  const cause = Object.assign(new Error(`${syscall} ${code} ${host}`), { code, syscall });
  return new TypeError(`fetch failed: ${syscall} ${code} ${host}`, { cause });
}

/**
 * What `new URL(url)` gives as `host` and `pathname + search`, without building a URL, for the plain
 * `http://host:port/path?query` the clients send (characters that URL leaves as they are, no dot
 * segments, a non-default port, a non-empty query); anything else goes through URL.
 */
export function splitUrl(url: string): { host: string; path: string } {
  const m = PLAIN_URL.exec(url);
  if (
    m !== null &&
    m[2] !== '80' &&
    Number(m[2]) <= 65535 &&
    !DOT_SEGMENT.test(m[3] as string) &&
    !(m[1] as string).includes('xn--') &&
    (!NUMERIC_END.test(m[1] as string) || CANONICAL_IPV4.test(m[1] as string))
  )
    return { host: `${m[1]}:${m[2]}`, path: m[3] as string };
  const u = new URL(url);
  return { host: u.host, path: u.pathname + u.search };
}

const PLAIN_URL =
  /^http:\/\/([a-z0-9-]+(?:\.[a-z0-9-]+)*):([1-9][0-9]{0,4})(\/[A-Za-z0-9\-._~%!$&'()*+,;=:@/]*(?:\?[A-Za-z0-9\-._~%!$&'()*+,;=:@/?]+)?)$/;
/** URL reads a host whose last label is a number as an IPv4 address (octal, hex, short forms): only the canonical form passes. */
const NUMERIC_END = /(?:^|\.)(?:[0-9]+|0x[0-9a-f]*)$/;
const CANONICAL_IPV4 =
  /^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$/;
const DOT_SEGMENT = /\/\.\.?(?:[/?]|$)|%2e/i;

const LEASE_PATH = /^\/v1\/apps\/([^/]+)\/workers\/(?:(acquire)|(\d+)\/(renew|release))$/;

/**
 * Whether a successful lease reply answers its request (app, op, nodeId, requestId, incarnation,
 * worker ID, token), independently of the SDK's own check, and, given the run's ledger, agrees with what the
 * replicated state committed for it (LeaseLedger.replyMismatch). Undefined when it does (or is no lease call).
 */
export function leaseReplyMismatch(
  path: string,
  reqBody: string | undefined,
  resBody: string,
  /** LEASE_PATH's match of `path`, when the caller has it. */
  match?: RegExpExecArray,
  ledger?: LeaseLedger,
): string | undefined {
  const m = match ?? LEASE_PATH.exec(path);
  if (!m) return undefined;
  let req: Record<string, unknown>;
  let res: Record<string, unknown>;
  try {
    req = JSON.parse(reqBody ?? '{}') as Record<string, unknown>;
    res = JSON.parse(resBody) as Record<string, unknown>;
  } catch {
    return 'a body is not JSON';
  }
  const app = decodeURIComponent(m[1] as string);
  const op = m[2] ?? (m[4] as string);
  const expect: Record<string, unknown> = { op, app };
  if (op === 'acquire') {
    expect.nodeId = req.nodeId;
    if (req.requestId !== undefined) expect.requestId = req.requestId;
    if (req.incarnation !== undefined) expect.incarnation = req.incarnation;
  } else {
    expect.workerId = Number(m[3]);
    if (op === 'renew') expect.token = typeof req.token === 'string' ? Number(req.token) : req.token;
  }
  for (const [k, v] of Object.entries(expect)) {
    if (res[k] !== v) return `${k} is ${JSON.stringify(res[k])}, the request's is ${JSON.stringify(v)}`;
  }
  return ledger?.replyMismatch(op, app, m[3] === undefined ? undefined : Number(m[3]), req, res);
}

/**
 * Another cluster's grant for this acquire: `donor`'s grant (another client's worker ID, token and marks) with this
 * request's own echoed fields, so that only the cluster check can tell it apart. Undefined if either is not JSON.
 */
function foreignGrant(own: string, donor: string): string | undefined {
  try {
    const o = JSON.parse(own) as Record<string, unknown>;
    const d = JSON.parse(donor) as Record<string, unknown>;
    if (d.app !== o.app) return undefined; // another app's worker IDs are another ID space
    return JSON.stringify({
      ...d,
      op: o.op,
      app: o.app,
      nodeId: o.nodeId,
      requestId: o.requestId,
      incarnation: o.incarnation,
      ttlMs: o.ttlMs,
      layout: o.layout,
    });
  } catch {
    return undefined;
  }
}
