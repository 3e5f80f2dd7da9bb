import type { FloeNode } from '../../node/node.js';

/** This node's view of the cluster (`GET /v1/cluster`, the dashboard). */
export function clusterView(node: FloeNode<unknown>) {
  const s = node.status();
  const voters = new Set(s.conf.voters);
  const learners = new Set(s.conf.learners);
  return {
    id: s.id,
    role: s.role,
    leader: s.lead,
    term: s.term,
    commit: s.commit,
    applied: s.appliedIndex,
    snapshotIndex: s.snapshotIndex,
    members: s.members.map((m) => ({
      id: m.id,
      peerAddr: m.peerAddr,
      httpAddr: m.httpAddr ?? null,
      respAddr: m.respAddr ?? null,
      role:
        m.id === s.lead
          ? 'leader'
          : learners.has(m.id)
            ? 'learner'
            : voters.has(m.id)
              ? 'follower'
              : 'unknown',
      match: s.progress?.[m.id]?.match ?? null,
    })),
    removed: s.removed.map((r) => ({ id: r.id, removedAt: r.removedAt })),
  };
}
