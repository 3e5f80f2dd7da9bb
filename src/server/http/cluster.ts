// The cluster: its view (open), membership and leadership transfer (admin on '*': the root
// preHandler in auth.ts), and the two member-only routes, which prove the cluster secret with an
// HMAC in the body instead of a user (address publication, node-mode segment allocation).
import { createHmac } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import { hostPortProblem } from '../../net/host-port.js';
import { NotLeaderError } from '../../node/errors.js';
import type { FloeNode } from '../../node/node.js';
import { allocProof, REMOTE_ALLOC_PATH } from '../../sequences/remote-alloc.js';
import {
  encodeSequenceCommand,
  parseSequenceCommand,
  SEQUENCE_NAMESPACE,
  type SequenceResult,
} from '../../state/sequences/index.js';
import { clusterView } from '../dashboard/cluster-view.js';
import { strictPositiveInt } from '../http-hardening.js';
import { clusterUidProof, safeEqual } from '../member-auth.js';
import type { RouteHelpers } from './auth.js';
import { errors, int, obj, str, WRITE_ERRORS } from './schemas.js';

export interface ClusterPluginOptions {
  node: FloeNode<unknown>;
  /** The cluster's UUID once applied here (absent in some tests: then `cluster` is null). */
  clusterUid?: () => string | undefined;
  /**
   * False on the etcd store: the sequences live in etcd, and this route proposes through the Raft node, whose
   * allocation etcd would never hold (a later active node could hand the same values out again: review 4 of the
   * cluster identity, finding 5). A standby there gets no node-mode segment (501).
   */
  remoteAllocServed?: boolean;
  /** The cluster secret: members prove it (HMAC) when they publish addresses or allocate segments. */
  clusterSecret?: string;
  fail: RouteHelpers['fail'];
}

/** HMAC-SHA256 over a member's id and client addresses, keyed with the cluster secret. */
export function addressProof(secret: string, id: number, httpAddr: string, respAddr: string): string {
  return createHmac('sha256', secret).update(`floe-publish\n${id}\n${httpAddr}\n${respAddr}`).digest('hex');
}

// ---- schemas --------------------------------------------------------------------------------

const nullableStr = { anyOf: [{ type: 'string' }, { type: 'null' }] } as const;
const nullableInt = { anyOf: [{ type: 'integer' }, { type: 'null' }] } as const;
export const clusterViewSchema = obj(
  {
    id: int,
    cluster: {
      ...nullableStr,
      description:
        "the cluster's UUID (every answer names it in the floe-cluster header; SDK option clusterUid); null until the first leader's is applied here",
    },
    clusterProof: {
      ...nullableStr,
      description:
        "HMAC-SHA256 of (id, cluster) under the cluster secret: a leader that knows no UUID adopts only a member's it can verify (docs/cluster-identity.md)",
    },
    role: { type: 'string', enum: ['leader', 'follower', 'candidate', 'preCandidate'] },
    leader: { type: 'integer', description: 'the leader id, 0 when none is known' },
    term: int,
    commit: int,
    applied: int,
    snapshotIndex: int,
    members: {
      type: 'array',
      items: obj({
        id: int,
        peerAddr: str,
        httpAddr: nullableStr,
        respAddr: nullableStr,
        role: { type: 'string', enum: ['leader', 'follower', 'learner', 'unknown'] },
        match: { ...nullableInt, description: 'replication progress (on the leader)' },
      }),
    },
    removed: {
      type: 'array',
      description: 'node ids removed from the cluster, which are never added again (docs/node.md)',
      items: obj({
        id: int,
        removedAt: { ...int, description: 'the log index of the committed removal' },
      }),
    },
  },
  [],
  "This node's view of the cluster",
);
export const CLUSTER_VIEW_SCHEMA_ID = 'ClusterView';
const clusterViewRef = { $ref: `${CLUSTER_VIEW_SCHEMA_ID}#` } as const;
const memberId = {
  type: 'string',
  pattern: '^[1-9][0-9]{0,15}$',
  description: 'a positive integer written plainly',
} as const;
const memberErrors = errors(400, 401, 403, 409, ...WRITE_ERRORS);
const addressesMessage = 'need member id, httpAddr and respAddr';

// ---- routes ---------------------------------------------------------------------------------

export const clusterPlugin: FastifyPluginAsync<ClusterPluginOptions> = async (
  app,
  { node, clusterUid, clusterSecret, fail, remoteAllocServed = true },
) => {
  const view = () => {
    const uid = clusterUid?.();
    return {
      ...clusterView(node),
      cluster: uid ?? null,
      clusterProof: uid !== undefined && clusterSecret ? clusterUidProof(clusterSecret, node.id, uid) : null,
    };
  };
  app.get(
    '/v1/cluster',
    {
      schema: {
        tags: ['cluster'],
        summary: "This node's view of the cluster (open)",
        response: { 200: clusterViewRef },
      },
    },
    async () => view(),
  );

  // A follower allocates a segment of a node-mode sequence through the leader. Members only: the
  // request carries an HMAC of the command under the cluster secret (allocProof). Its fields are
  // checked by the sequence state's own parser (its refusals keep `ok` and `code` for followers).
  app.post<{ Body: Record<string, unknown> }>(
    REMOTE_ALLOC_PATH,
    {
      schema: {
        tags: ['cluster'],
        summary: 'Members only: a node-mode segment allocated through the leader (HMAC proof)',
        body: obj({
          key: { description: 'the sequence key' },
          count: { description: 'how many values' },
          owner: { description: 'the allocating member' },
          proof: { description: 'HMAC of the command under the cluster secret' },
          cluster: { description: "the follower's cluster UUID: another cluster's gets no segment" },
        }),
        response: {
          200: obj({ ok: { type: 'boolean' } }),
          ...errors(400, 403, 404, 409, 421, 501, ...WRITE_ERRORS),
        },
      },
    },
    async (req, reply) => {
      const b = req.body ?? {};
      const cmd = parseSequenceCommand({ ...b, ns: SEQUENCE_NAMESPACE, op: 'alloc', proof: undefined });
      // The documented {error, message} shape; `ok` and `code` stay for the followers that read them.
      if ('ok' in cmd) return reply.code(400).send({ error: cmd.code, ...cmd });
      if (cmd.op !== 'alloc')
        return reply.code(400).send({ error: 'bad_command', message: 'alloc expected' });
      const expected = clusterSecret ? allocProof(clusterSecret, cmd) : undefined;
      if (!expected || typeof b.proof !== 'string' || !safeEqual(b.proof, expected))
        return reply
          .code(403)
          .send({ error: 'forbidden', message: 'segment allocation needs the cluster secret' });
      if (!remoteAllocServed)
        return reply.code(501).send({
          error: 'not_supported',
          message:
            'on the etcd store node-mode segments are not allocated for other nodes: the active node serves the sequence',
        });
      if (!node.isLeader) return fail(reply, new NotLeaderError(node.id, node.leaderHint()), req.url);
      // The follower names its cluster: one of another cluster (same secret) gets no segment proposed for it
      // (review 3 of the cluster identity, finding 2; its answer would be refused and the segment lost).
      const mine = clusterUid?.();
      if (b.cluster !== undefined && b.cluster !== mine)
        return reply.code(421).send({
          error: 'cluster_mismatch',
          message: `this cluster is ${mine ?? 'not known yet'}, the request names ${String(b.cluster).slice(0, 64)}`,
        });
      try {
        const r = (await node.propose(encodeSequenceCommand(cmd))) as SequenceResult;
        if (r.ok) return r;
        return reply
          .code(r.code === 'not_found' ? 404 : r.code === 'exhausted' ? 409 : 400)
          .send({ error: r.code, ...r });
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  // A follower asks the leader to record its client addresses in the log. Only members may: the
  // request carries an HMAC of its fields under the cluster secret (see addressProof).
  app.post<{ Params: { id: string }; Body: { httpAddr: string; respAddr: string; proof?: unknown } }>(
    '/v1/members/:id/addresses',
    {
      schema: {
        tags: ['cluster'],
        summary: "Members only: publish a member's client addresses (HMAC proof)",
        params: obj({ id: memberId }, ['id']),
        body: obj(
          {
            httpAddr: str,
            respAddr: str,
            proof: { description: 'addressProof(secret, id, httpAddr, respAddr), hex' },
          },
          ['httpAddr', 'respAddr'],
        ),
        response: { 200: obj({ ok: { type: 'boolean' } }), ...errors(400, 403, ...WRITE_ERRORS) },
      },
      config: {
        badInput: {
          messages: { id: addressesMessage, httpAddr: addressesMessage, respAddr: addressesMessage },
        },
      },
    },
    async (req, reply) => {
      const id = strictPositiveInt(req.params.id) ?? -1;
      const { httpAddr, respAddr, proof } = req.body;
      if (!Number.isSafeInteger(id) || id <= 0)
        return reply.code(400).send({ error: 'bad_request', message: addressesMessage });
      const expected = clusterSecret ? addressProof(clusterSecret, id, httpAddr, respAddr) : undefined;
      if (!expected || typeof proof !== 'string' || !safeEqual(proof, expected))
        return reply
          .code(403)
          .send({ error: 'forbidden', message: 'address publication needs the cluster secret' });
      if (!node.isLeader) return fail(reply, new NotLeaderError(node.id, node.leaderHint()), req.url);
      try {
        await node.publishAddresses(id, httpAddr, respAddr);
        return { ok: true };
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.post<{ Body: { id: number; peerAddr: string; httpAddr?: string | null } }>(
    '/v1/members',
    {
      schema: {
        tags: ['cluster'],
        summary: 'Add a member (as a learner, promoted once caught up); needs admin on *',
        body: obj(
          {
            id: { type: 'integer', minimum: 1, description: 'the new member id' },
            peerAddr: { type: 'string', description: 'host:port of its peer listener ([::1]:7001 for IPv6)' },
            httpAddr: { ...nullableStr, description: 'host:port of its HTTP listener' },
          },
          ['id', 'peerAddr'],
        ),
        response: { 200: clusterViewRef, ...memberErrors },
      },
      config: {
        badInput: {
          messages: {
            id: 'id must be a positive integer',
            peerAddr: (req) =>
              hostPortProblem((req.body as { peerAddr?: unknown }).peerAddr, 'peerAddr') ?? 'bad peerAddr',
            httpAddr: (req) =>
              hostPortProblem((req.body as { httpAddr?: unknown }).httpAddr, 'httpAddr') ?? 'bad httpAddr',
          },
        },
      },
    },
    async (req, reply) => {
      const { id, peerAddr, httpAddr } = req.body;
      if (!Number.isSafeInteger(id))
        return reply.code(400).send({ error: 'bad_request', message: 'id must be a positive integer' });
      const bad =
        hostPortProblem(peerAddr, 'peerAddr') ??
        (httpAddr == null ? undefined : hostPortProblem(httpAddr, 'httpAddr'));
      if (bad) return reply.code(400).send({ error: 'bad_request', message: bad });
      try {
        await node.addMember({ id, peerAddr, httpAddr: typeof httpAddr === 'string' ? httpAddr : undefined });
        return view();
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.delete<{ Params: { id: string }; Querystring: { force?: string } }>(
    '/v1/members/:id',
    {
      schema: {
        tags: ['cluster'],
        summary:
          'Remove a member; needs admin on *. Refused (409 unsafe_removal) when too few of the voters that would remain are active to form a quorum, unless ?force=true',
        params: obj({ id: memberId }, ['id']),
        querystring: obj({
          force: {
            type: 'string',
            enum: ['true', 'false'],
            description:
              '`true`: skip the strict reconfiguration check (remove the voter even though the remaining voters known active are not a quorum)',
          },
        }),
        response: { 200: clusterViewRef, ...memberErrors },
      },
      config: {
        badInput: {
          messages: { id: 'member id must be a positive integer', force: 'force must be true or false' },
        },
      },
    },
    async (req, reply) => {
      const id = strictPositiveInt(req.params.id) ?? -1;
      if (id <= 0)
        return reply
          .code(400)
          .send({ error: 'bad_request', message: 'member id must be a positive integer' });
      try {
        await node.removeMember(id, { force: req.query.force === 'true' });
        return view();
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.post<{ Body: { to: number } }>(
    '/v1/leader/transfer',
    {
      schema: {
        tags: ['cluster'],
        summary: 'Hand leadership to another voter; needs admin on *',
        body: obj({ to: { type: 'integer', minimum: 1, description: 'the member to lead' } }, ['to']),
        response: { 200: clusterViewRef, ...memberErrors },
      },
      config: { badInput: { messages: { to: 'to must be a member id' } } },
    },
    async (req, reply) => {
      const to = req.body.to;
      if (!Number.isSafeInteger(to))
        return reply.code(400).send({ error: 'bad_request', message: 'to must be a member id' });
      try {
        await node.transferLeadership(to);
        return view();
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );
};
