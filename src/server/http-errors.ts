// How the HTTP API answers the node runtime's errors. One function, used by every route (the admin
// routes, the lease and user API, and any app built on them), so a code means the same thing
// everywhere. Statuses come from the one error table (src/server/errors/table.ts, docs/errors.md);
// what a write's failure means is in docs/http-errors.md.
import type { FastifyReply } from 'fastify';
import {
  MemberNotCaughtUpError,
  NodeStoppedError,
  NotLeaderError,
  OverloadedError,
  ProposalNotCommittedError,
  ProposalOutcomeUnknownError,
  ReadTimeoutError,
  UnsafeRemovalError,
} from '../node/errors.js';
import { InvalidConfChangeError, ProposalDroppedError } from '../raft/types.js';
import { type FloeErrorCode, httpStatusOf } from './errors/table.js';

/** Every error reply has the same shape: a stable machine-readable code and a sentence for people. */
export interface ErrorBody {
  error: string;
  message: string;
  /** `outcome_unknown` only: why the node cannot tell (leadershipLost, stopped, snapshot, timeout). */
  reason?: string;
  leader?: { id: number; httpAddr?: string };
  /**
   * `not_leader` with no leader to redirect to only: the members this node knows an HTTP address of (itself left out),
   * for operators (finding FS-19). The SDK does not follow it: a process started with another cluster's members would
   * list those (review of FS-19).
   */
  members?: { id: number; httpAddr: string }[];
  /** `unsafe_removal` only: the voters the removal would leave, those of them active, and the quorum they need. */
  remaining?: readonly number[];
  active?: readonly number[];
  quorum?: number;
}

/**
 * What a node that cannot name the leader tells the client: the members it knows (from its replicated member
 * directory, or, before it ever joined, the ones it was started with), and whether it is in its own configuration.
 */
export interface MemberHints {
  members: { id: number; httpAddr: string }[];
  /** False on a process that is not a voter or learner of the configuration it knows (not added yet, or removed). */
  isMember: boolean;
}

/** Seconds a client should wait before retrying a write that was definitely not applied. */
export const NOT_COMMITTED_RETRY_AFTER_S = 1;

/**
 * What retrying a write whose outcome is unknown does, for the route it was sent to. Lease calls
 * are idempotent with the same requestId (acquire) or token (renew, release); others are not all.
 */
export function retryAdvice(path: string): string {
  const p = path.split('?')[0] ?? '';
  if (/\/workers\/acquire$/.test(p))
    return 'retry with the same requestId (and incarnation): a retry returns the same lease if it was granted';
  if (/\/workers\/\d+\/(renew|release)$/.test(p)) return 'retrying with the same token is safe';
  if (/^\/v1\/counters\/[^/]+\/incr$/.test(p) || /^\/v1\/kv\/[^/]+\/cas$/.test(p))
    return 'a retry may apply it a second time: read the current value first';
  return 'retry only if applying it twice is harmless, or read the state first';
}

/**
 * Sends the reply for an error thrown while serving `path`. Anything not listed is a 500 `internal`
 * (a bug or an unexpected failure; the message says what).
 */
export function sendHttpError(
  reply: FastifyReply,
  err: unknown,
  path: string,
  hints?: () => MemberHints,
): FastifyReply {
  const send = (code: FloeErrorCode, message: string, extra?: Partial<ErrorBody>): FastifyReply =>
    reply.code(httpStatusOf(code)).send({ error: code, ...extra, message });
  const notApplied = (message: string): FastifyReply => {
    reply.header('retry-after', String(NOT_COMMITTED_RETRY_AFTER_S));
    return send('not_committed', `the write was not applied (${message})`);
  };
  if (err instanceof NotLeaderError) {
    const body: ErrorBody = { error: 'not_leader', message: err.message };
    if (err.leader) body.leader = { id: err.leader.id, httpAddr: err.leader.httpAddr };
    if (err.leader?.httpAddr) {
      // Members share one scheme: the leader speaks HTTPS when this node does (docs/tls.md).
      const scheme = reply.request.protocol === 'https' ? 'https' : 'http';
      return reply.code(307).header('location', `${scheme}://${err.leader.httpAddr}${path}`).send(body);
    }
    // FS-19: no redirect to give. Say whom else to ask, and why this node cannot serve (a process started to join and
    // never added is otherwise indistinguishable from a member during an election).
    const h = hints?.();
    if (h) {
      body.members = h.members;
      if (!h.isMember)
        body.message = `${err.message}; this node is not a member of the cluster (not added yet, or removed: see \`floe cluster status\`)`;
    }
    return reply.code(httpStatusOf('not_leader')).send(body);
  }
  // Before ReadTimeoutError: a write's timeout (ProposalTimeoutError) is an unknown outcome.
  if (err instanceof ProposalOutcomeUnknownError) {
    const body: ErrorBody = {
      error: 'outcome_unknown',
      reason: err.reason,
      message: `the write may or may not have been applied (${err.message}); ${retryAdvice(path)}`,
    };
    return reply.code(httpStatusOf('outcome_unknown')).send(body);
  }
  if (err instanceof ProposalNotCommittedError) return notApplied(err.message);
  if (err instanceof ReadTimeoutError) return send('timeout', err.message);
  if (err instanceof OverloadedError) return send('overloaded', err.message);
  if (err instanceof NodeStoppedError) return send('stopped', err.message);
  if (err instanceof MemberNotCaughtUpError) return send('not_caught_up', err.message);
  if (err instanceof UnsafeRemovalError)
    return send('unsafe_removal', `${err.message} (\`?force=true\`)`, {
      remaining: err.remaining,
      active: err.active,
      quorum: err.quorum,
    });
  if (err instanceof InvalidConfChangeError) return send('invalid_membership_change', err.message);
  // The core refused to append the proposal, so it was certainly not applied.
  if (err instanceof ProposalDroppedError) {
    if (err.reason === 'transferring') return notApplied('leadership transfer in progress');
    if (err.reason === 'tooMuchUncommitted')
      return send('overloaded', 'too much uncommitted log; retry shortly');
    if (err.reason === 'confChangePending')
      return send('conf_change_pending', 'another membership change is in progress; retry when it ends');
  }
  const message = err instanceof Error ? err.message : String(err);
  return send('internal', message);
}
