// The one error table of Floe (issue 13): every error code a client can see, once, with its HTTP
// status and its RESP reply. The HTTP error replies (http-errors.ts, http-hardening.ts, the route
// plugins in http/) and the RESP errors (resp/errors.ts) read their statuses and prefixes here.
// docs/errors.md shows the table; errors.test.ts checks that every code the servers send is listed.

/** The first word of a RESP error line: what Redis clients branch on. */
export type RespPrefix =
  | 'ERR'
  | 'NOPERM'
  | 'NOAUTH'
  | 'WRONGPASS'
  | 'TRYAGAIN'
  | 'CLUSTERDOWN'
  | 'MOVED'
  | 'NOPROTO';

export interface ErrorSpec {
  /** HTTP status of the reply; undefined for RESP-only errors (syntax, arity, ...). */
  http?: number;
  /** RESP prefix; undefined for HTTP-only errors (media type, method not allowed, ...). */
  resp?: RespPrefix;
  /**
   * The fixed RESP text after the prefix, when the line is stable (clients match it). Without it
   * the RESP line is `<prefix> <message>`.
   */
  respText?: string;
  /** When a client gets it (one line, shown in docs/errors.md). */
  when: string;
}

/**
 * Every Floe error code. Grouped as docs/errors.md shows them: the node's answers to writes and
 * reads, input and framework errors, auth, then the refusals of leases, users, sequences and
 * key-value writes.
 */
export const ERROR_TABLE = {
  // ---- the node's answers (sendHttpError / toRespError) -------------------------------------
  not_leader: {
    http: 503,
    resp: 'MOVED',
    when: 'a write or linearizable read reached a follower: HTTP 307 with `Location` when the leader is known, else 503; RESP `-MOVED <slot> <leader>`, or `-CLUSTERDOWN` for a command without a key',
  },
  not_ready: {
    http: 503,
    resp: 'TRYAGAIN',
    when: "an HTTP lease call or segment allocation reached the node that serves it before it knows the cluster's UUID (its first leader mints it; docs/cluster-identity.md), or a request naming a cluster (`floe-cluster` header; over RESP only such commands, with the `CLUSTER` option) reached a node that cannot tell yet: nothing happened, retry (`Retry-After: 1`)",
  },
  cluster_mismatch: {
    http: 421,
    resp: 'ERR',
    when: 'the request names another cluster in its `floe-cluster` header (the SDK once pinned, import-api, a follower allocating a node-mode segment) or its RESP `CLUSTER` option: it reached the wrong cluster, nothing happened',
  },
  not_supported: {
    http: 501,
    when: 'on the etcd store a node-mode segment is not allocated for another node through the internal route: the active node serves the sequence',
  },
  not_committed: {
    http: 503,
    resp: 'TRYAGAIN',
    respText: 'not committed, retry',
    when: 'the write was definitely not applied (another entry took its index, or a leadership transfer refused it); Retry-After: 1; retry freely',
  },
  outcome_unknown: {
    http: 504,
    resp: 'TRYAGAIN',
    respText: 'outcome unknown:',
    when: 'the write may or may not have been applied; `reason` (HTTP) or the text after the colon (RESP) says why; retry only idempotently',
  },
  timeout: {
    http: 504,
    resp: 'TRYAGAIN',
    when: 'a linearizable read was not confirmed in time (a read changes nothing: retry freely)',
  },
  overloaded: {
    http: 429,
    resp: 'TRYAGAIN',
    when: 'too many proposals pending, too much uncommitted log, or too many dashboard streams; back off',
  },
  stopped: { http: 503, resp: 'CLUSTERDOWN', when: 'the node is stopping' },
  cluster_down: {
    resp: 'CLUSTERDOWN',
    respText: 'The cluster is down',
    when: 'RESP: no leader known for a command without a key (HTTP answers 503 not_leader)',
  },
  not_caught_up: {
    http: 504,
    resp: 'ERR',
    when: 'POST /v1/members: the new member stays a learner (it did not catch up with the leader in time)',
  },
  invalid_membership_change: {
    http: 409,
    resp: 'ERR',
    when: 'adding a member that is already a voter or whose id was removed (ids are never reused), removing a non-member or the last voter',
  },
  unsafe_removal: {
    http: 409,
    when: 'DELETE /v1/members/:id: too few of the voters that would remain answer the leader to form a quorum of the new membership (strict reconfiguration check); nothing was proposed. The body adds `remaining`, `active` and `quorum`. Start or repair the inactive voters, remove one of them instead, or pass `?force=true` (CLI `--force`)',
  },
  conf_change_pending: {
    http: 409,
    resp: 'ERR',
    respText: 'another membership change is in progress; retry when it ends',
    when: 'another membership change is still in progress',
  },
  store_unavailable: {
    http: 503,
    resp: 'TRYAGAIN',
    when: 'the lease store (etcd) cannot be reached; Retry-After: 1',
  },
  unavailable: {
    http: 503,
    resp: 'TRYAGAIN',
    when: 'server-side Snowflake has no worker ID leased on this member right now',
  },
  reply_mismatch: {
    http: 500,
    resp: 'ERR',
    when: 'the reply of a write does not match what was asked (a bug; the message says what)',
  },
  internal: {
    http: 500,
    resp: 'ERR',
    when: 'anything else: a bug or an unexpected failure; the message says what',
  },

  // ---- bad input (checked before anything reaches the Raft log) ------------------------------
  bad_request: {
    http: 400,
    resp: 'ERR',
    when: 'malformed input on the admin routes (key-value, counters, membership) and schema errors there; the message names the field',
  },
  invalid_argument: {
    http: 400,
    resp: 'ERR',
    when: 'malformed input on the lease, user, sequence and Snowflake routes; the message names the field',
  },
  bad_command: { http: 400, resp: 'ERR', when: 'a command the state machine cannot decode' },
  invalid_body: {
    http: 400,
    resp: 'ERR',
    when: 'a request body that is JSON but not an object (an array, null, a number, a string)',
  },
  invalid_json: { http: 400, when: 'a body that is not JSON' },
  json_too_deep: { http: 400, when: 'JSON nested deeper than 64 levels (refused before parsing)' },
  invalid_content_length: { http: 400, when: 'Content-Length does not match the body' },
  malformed_request: { http: 400, when: 'the HTTP request itself cannot be parsed' },
  syntax_error: { resp: 'ERR', respText: 'syntax error', when: 'RESP: a command with a malformed option' },
  not_integer: {
    resp: 'ERR',
    respText: 'value is not an integer or out of range',
    when: 'RESP: an argument that must be an integer',
  },
  wrong_arity: { resp: 'ERR', when: "RESP: `ERR wrong number of arguments for '<command>' command`" },
  unknown_command: {
    resp: 'ERR',
    when: "RESP: `ERR unknown command '<name>', with args beginning with: ...`",
  },
  unknown_subcommand: { resp: 'ERR', when: "RESP: `ERR unknown subcommand '<sub>'. Try <COMMAND> HELP.`" },
  unsupported_protocol: {
    resp: 'NOPROTO',
    respText: 'unsupported protocol version',
    when: 'RESP: HELLO with a protocol version other than 2 or 3',
  },
  not_found: {
    http: 404,
    resp: 'ERR',
    when: 'no such route, or no such worker, sequence or Snowflake key',
  },
  method_not_allowed: { http: 405, when: 'the path exists with other methods (listed in Allow)' },
  request_timeout: { http: 408, when: 'headers or body not received in time' },
  body_too_large: { http: 413, when: 'a body over the limit (128 KiB by default)' },
  path_too_long: { http: 414, when: 'a path parameter over 4,096 characters' },
  unsupported_media_type: { http: 415, when: 'a body that is not application/json' },
  headers_too_large: { http: 431, when: 'request headers over 16 KiB' },
  too_many_connections: {
    http: 503,
    when: 'over maxConnections, or maxConnectionsPerAddress from one IP address',
  },

  // ---- auth ----------------------------------------------------------------------------------
  unauthorized: {
    http: 401,
    resp: 'NOAUTH',
    respText: 'Authentication required.',
    when: 'no or wrong credentials (HTTP adds WWW-Authenticate: Basic)',
  },
  wrong_password: {
    http: 401,
    resp: 'WRONGPASS',
    respText: 'invalid username-password pair or user is disabled.',
    when: 'RESP AUTH/HELLO with a wrong password (HTTP answers 401 unauthorized)',
  },
  forbidden: { http: 403, resp: 'NOPERM', when: 'the user lacks the permission named in the message' },
  too_many_failures: {
    http: 429,
    resp: 'ERR',
    when: 'authentication back-off after failed attempts (Retry-After)',
  },
  auth_busy: { http: 429, resp: 'ERR', when: 'the password check queue is full (Retry-After: 1)' },

  // ---- users ---------------------------------------------------------------------------------
  no_such_user: { http: 404, resp: 'ERR', when: 'the user does not exist' },
  user_exists: { http: 409, resp: 'ERR', when: 'adding a user that exists' },
  would_lock_out: {
    http: 409,
    resp: 'ERR',
    when: 'the change would leave no user with admin on *',
  },

  // ---- leases (docs/leases.md) ----------------------------------------------------------------
  lease_held: { http: 409, resp: 'ERR', when: 'the worker ID is leased to another holder' },
  pool_busy: { http: 409, resp: 'ERR', when: 'the pool cannot be reconfigured while leases are held' },
  layout_mismatch: {
    http: 409,
    resp: 'ERR',
    when: 'the app is pinned to another layout (leases and POST /v1/snowflakes)',
  },
  pool_split_fixed: { http: 409, resp: 'ERR', when: 'the pool split (datacenter bits) is fixed once used' },
  lease_unhealthy: { http: 409, resp: 'ERR', when: "the holder's health URL failed its probes" },
  stale_token: { http: 409, resp: 'ERR', when: 'a token older than the current grant of the worker ID' },
  not_held: { http: 410, resp: 'ERR', when: 'the worker ID is not leased' },
  lease_expired: {
    http: 410,
    resp: 'ERR',
    when: 'the lease expired before the renew arrived, or just as a retried acquire of it was answered (acquire again)',
  },
  pool_exhausted: { http: 503, resp: 'ERR', when: 'every worker ID of the pool is leased' },

  pool: {
    http: 400,
    resp: 'ERR',
    when: 'POST /v1/snowflakes: the lease pool of the key could not be sized',
  },

  // ---- sequences and key-value ---------------------------------------------------------------
  exists: {
    http: 409,
    resp: 'ERR',
    when: 'creating a sequence or Snowflake key that exists with other settings',
  },
  exhausted: { http: 409, resp: 'ERR', when: 'the sequence reached its max' },
  too_many_sequences: { http: 507, resp: 'ERR', when: 'the cluster holds the most sequences it may' },
  compare_failed: {
    http: 409,
    resp: 'ERR',
    when: 'CAS: the value is not the one expected (`value` holds the current one)',
  },
} as const satisfies Record<string, ErrorSpec>;

export type FloeErrorCode = keyof typeof ERROR_TABLE;

export function isFloeErrorCode(code: string): code is FloeErrorCode {
  return Object.hasOwn(ERROR_TABLE, code);
}

/** The HTTP status of a code (500 for RESP-only codes, which no HTTP route sends). */
export function httpStatusOf(code: FloeErrorCode): number {
  const spec: ErrorSpec = ERROR_TABLE[code];
  return spec.http ?? 500;
}

/**
 * The RESP error line of a code, without the leading `-`: `<prefix> <fixed text>` when the table
 * fixes the text (then `detail` is appended after it, when given), else `<prefix> <detail>`.
 */
export function respLineOf(code: FloeErrorCode, detail?: string): string {
  const spec: ErrorSpec = ERROR_TABLE[code];
  const prefix = spec.resp ?? 'ERR';
  if (spec.respText === undefined) return `${prefix} ${detail ?? code}`;
  return detail === undefined ? `${prefix} ${spec.respText}` : `${prefix} ${spec.respText} ${detail}`;
}

/** The `{error, message}` body of an HTTP error reply with this code. */
export function errorBody(code: FloeErrorCode, message: string): { error: FloeErrorCode; message: string } {
  return { error: code, message };
}
