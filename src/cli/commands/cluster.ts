import { Command } from 'commander';
import { ConfigError, parseHostPort } from '../../node/config.js';
import { adminFetch, endpointUrl, requestHeaders, sameScheme } from '../admin-http.js';
import type { CliIO } from '../io.js';
import { CommandFailedError, parseIntOption, UsageError } from '../io.js';

interface ClusterView {
  id: number;
  /** Absent from nodes older than the cluster identity. */
  cluster?: string | null;
  role: string;
  leader: number;
  term: number;
  commit: number;
  applied: number;
  members: { id: number; peerAddr: string; httpAddr: string | null; role: string; match: number | null }[];
}

const DEFAULT_ENDPOINT = '127.0.0.1:7380';
/** Waits before asking again after `503 not_leader` (about 3 s in all: an election and an address publication). */
const NOT_LEADER_RETRIES_MS = [100, 200, 400, 800, 1600];

/** The node answered an error: its status and stable code (docs/errors.md), for commands that explain one. */
class ApiError extends UsageError {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

/** Where a cluster command goes, and as whom (`--user`/`--password`, else $FLOE_USER/$FLOE_PASSWORD). */
interface ClusterConn {
  endpoint: string;
  user?: string;
  password?: string;
}

/**
 * Calls a node's HTTP admin API; follows 307 redirects to the leader; errors name the endpoint. With auth on, every
 * hop carries the credentials (the leader a member redirects to is a member of the same cluster; before, `floe
 * cluster` sent none and got 401 — review of FS-22).
 */
async function call<T>(
  io: CliIO,
  conn: ClusterConn,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = 15_000,
): Promise<T> {
  const endpoint = conn.endpoint;
  let url = endpointUrl('--endpoint', endpoint);
  const fetch = adminFetch(io.env);
  const headers = requestHeaders(io, conn, body);
  let res: Awaited<ReturnType<typeof fetch>> | undefined;
  let text = '';
  let parsed: unknown;
  for (let attempt = 0; ; attempt++) {
    // Follows the leader by hand (307 with the leader's address), in the endpoint's scheme.
    for (let hop = 0; hop < 4; hop++) {
      try {
        res = await fetch(`${url}${path}`, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (err) {
        throw new UsageError(
          `cannot reach Floe at ${url}: ${(err as Error).cause ?? (err as Error).message}`,
        );
      }
      const location = res.status === 307 ? res.headers.get('location') : null;
      if (!location) break;
      url = location.startsWith('http') ? new URL(location).origin : sameScheme(url, location);
    }
    if (!res) throw new UsageError(`no answer from ${url}`);
    text = await res.text();
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
    // 503 not_leader: this node proposed nothing and has no leader address to send us to — an election is on,
    // or the leader is new and has not published its address yet (after `remove` of the leader handed leadership
    // over, the old leader answers so until the new one's address reaches it). Ask it again, briefly.
    const notLeader = res.status === 503 && (parsed as { error?: unknown } | null)?.error === 'not_leader';
    if (!notLeader || attempt >= NOT_LEADER_RETRIES_MS.length) break;
    await new Promise((r) => setTimeout(r, NOT_LEADER_RETRIES_MS[attempt]));
  }
  if (!res.ok) {
    const { message, error } = (parsed ?? {}) as { message?: string; error?: unknown };
    throw new ApiError(
      `${method} ${path} on ${endpoint} failed (${res.status}): ${message ?? text}`,
      res.status,
      typeof error === 'string' ? error : undefined,
    );
  }
  return parsed as T;
}

function printStatus(io: CliIO, v: ClusterView): void {
  io.out(
    `leader ${v.leader || 'none'}  term ${v.term}  commit ${v.commit}  applied ${v.applied} (as seen by node ${v.id})\n`,
  );
  io.out(`cluster ${v.cluster ?? 'none yet (no leader has minted it)'}\n`);
  io.out('ID  ROLE      PEER ADDRESS           HTTP ADDRESS           MATCH\n');
  for (const m of v.members) {
    io.out(
      `${String(m.id).padEnd(3)} ${m.role.padEnd(9)} ${m.peerAddr.padEnd(22)} ${(m.httpAddr ?? '-').padEnd(22)} ${m.match ?? '-'}\n`,
    );
  }
}

/** `floe cluster status|add|remove|transfer-leader --endpoint HOST:PORT` */
export function clusterCommand(io: CliIO): Command {
  const cluster = new Command('cluster').description(
    'inspect and change cluster membership (talks to a node’s HTTP address)',
  );

  cluster
    .command('status')
    .description('members, roles, leader, term, commit and applied index')
    .option('--endpoint <host:port>', 'any member’s HTTP address', DEFAULT_ENDPOINT)
    .option('--user <name>', 'authenticate as (default $FLOE_USER)')
    .option('--password <pw>', 'password (default $FLOE_PASSWORD)')
    .option('--json', 'print JSON')
    .action(async (opts: ClusterConn & { json?: boolean }) => {
      const v = await call<ClusterView>(io, opts, 'GET', '/v1/cluster');
      if (opts.json) io.out(`${JSON.stringify(v)}\n`);
      else printStatus(io, v);
    });

  cluster
    .command('uid')
    .description("the cluster's UUID, for the SDK's clusterUid option (every answer names it)")
    .option('--endpoint <host:port>', 'any member’s HTTP address', DEFAULT_ENDPOINT)
    .option('--user <name>', 'authenticate as (default $FLOE_USER)')
    .option('--password <pw>', 'password (default $FLOE_PASSWORD)')
    .action(async (opts: ClusterConn) => {
      const v = await call<ClusterView>(io, opts, 'GET', '/v1/cluster');
      if (v.cluster === null || v.cluster === undefined)
        throw new UsageError(
          `node ${v.id} does not know the cluster's UUID yet (no leader has minted it); retry`,
        );
      io.out(`${v.cluster}\n`);
    });

  cluster
    .command('add')
    .description('add a member: it joins as a learner and is promoted to voter once caught up')
    .argument('<id>', 'new member id (positive integer, never used before)')
    .argument('<peer-addr>', 'its peer address HOST:PORT')
    .option(
      '--endpoint <host:port>',
      'any member’s HTTP address (requests go to the leader)',
      DEFAULT_ENDPOINT,
    )
    .option('--user <name>', 'authenticate as (default $FLOE_USER)')
    .option('--password <pw>', 'password (default $FLOE_PASSWORD)')
    .option('--http-addr <host:port>', 'its HTTP address, for redirects')
    .option('--json', 'print JSON')
    .action(
      async (id: string, peerAddr: string, opts: ClusterConn & { httpAddr?: string; json?: boolean }) => {
        const memberId = parseIntOption('<id>', id, 1, Number.MAX_SAFE_INTEGER);
        try {
          parseHostPort('<peer-addr>', peerAddr);
        } catch (err) {
          if (err instanceof ConfigError) throw new UsageError(err.message);
          throw err;
        }
        const v = await call<ClusterView>(
          io,
          opts,
          'POST',
          '/v1/members',
          {
            id: memberId,
            peerAddr,
            httpAddr: opts.httpAddr,
          },
          60_000,
        );
        if (opts.json) io.out(`${JSON.stringify(v)}\n`);
        else printStatus(io, v);
      },
    );

  cluster
    .command('remove')
    .description(
      'remove a member (the leader hands leadership over first); refused when the voters left that answer the leader would not be a quorum',
    )
    .argument('<id>', 'member id')
    .option('--endpoint <host:port>', 'any member’s HTTP address', DEFAULT_ENDPOINT)
    .option('--user <name>', 'authenticate as (default $FLOE_USER)')
    .option('--password <pw>', 'password (default $FLOE_PASSWORD)')
    .option(
      '--force',
      'skip the strict reconfiguration check: remove the voter even though the remaining voters that answer are not a quorum',
    )
    .option('--json', 'print JSON')
    .action(async (id: string, opts: ClusterConn & { force?: boolean; json?: boolean }) => {
      const memberId = parseIntOption('<id>', id, 1, Number.MAX_SAFE_INTEGER);
      const path = `/v1/members/${memberId}${opts.force ? '?force=true' : ''}`;
      let v: ClusterView;
      try {
        v = await call<ClusterView>(io, opts, 'DELETE', path);
      } catch (err) {
        if (err instanceof ApiError && err.code === 'unsafe_removal')
          throw new CommandFailedError(
            // The endpoint it was refused on: the hint copied as printed must act on the same cluster (review H3).
            `${err.message}; to remove it anyway: floe cluster remove ${memberId} --force --endpoint ${opts.endpoint}`,
          );
        throw err;
      }
      if (opts.json) io.out(`${JSON.stringify(v)}\n`);
      else printStatus(io, v);
    });

  cluster
    .command('transfer-leader')
    .description('hand leadership to another voter')
    .argument('<id>', 'the member that should lead')
    .option('--endpoint <host:port>', 'any member’s HTTP address', DEFAULT_ENDPOINT)
    .option('--user <name>', 'authenticate as (default $FLOE_USER)')
    .option('--password <pw>', 'password (default $FLOE_PASSWORD)')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: ClusterConn & { json?: boolean }) => {
      const to = parseIntOption('<id>', id, 1, Number.MAX_SAFE_INTEGER);
      const v = await call<ClusterView>(io, opts, 'POST', '/v1/leader/transfer', { to });
      if (opts.json) io.out(`${JSON.stringify(v)}\n`);
      else printStatus(io, v);
    });

  return cluster;
}
