import type { RespBackend } from './backend.js';
import { clusterNodeId, parseHostPort } from './node-id.js';

/** One Floe member as Redis clients see it. */
export interface NodeView {
  memberId: number;
  /** 40-hex Redis Cluster node id. */
  nodeId: string;
  /** Advertised RESP address; undefined when the member published none. */
  host: string | undefined;
  port: number | undefined;
  isLeader: boolean;
  isSelf: boolean;
  raftRole: string;
}

/** The cluster as presented through CLUSTER / SENTINEL / ROLE / INFO: the leader masters every slot. */
export interface Topology {
  self: NodeView;
  leader: NodeView | undefined;
  /** Every member except the leader (all members when no leader is known), ordered by member id. */
  replicas: NodeView[];
  /** Every member, ordered by member id. */
  nodes: NodeView[];
  epoch: number;
  offset: number;
}

/**
 * Read the backend's current view. `selfAddr` is this server's own advertised address, used when the backend
 * does not (yet) know it.
 */
export function readTopology(backend: RespBackend, selfAddr: { host: string; port: number }): Topology {
  const leaderInfo = backend.leader();
  const selfIsLeader = backend.role() === 'leader';
  const byId = new Map<number, NodeView>();
  for (const m of backend.members()) {
    const a = parseHostPort(m.respAddr);
    byId.set(m.id, {
      memberId: m.id,
      nodeId: clusterNodeId(m.id),
      host: a?.host,
      port: a?.port,
      isLeader: false,
      isSelf: m.id === backend.nodeId,
      raftRole: m.role,
    });
  }
  let self = byId.get(backend.nodeId);
  if (!self) {
    self = {
      memberId: backend.nodeId,
      nodeId: clusterNodeId(backend.nodeId),
      host: undefined,
      port: undefined,
      isLeader: false,
      isSelf: true,
      raftRole: backend.role(),
    };
    byId.set(backend.nodeId, self);
  }
  if (self.host === undefined) {
    self.host = selfAddr.host;
    self.port = selfAddr.port;
  }
  self.raftRole = backend.role();
  let leader: NodeView | undefined;
  const leaderId = selfIsLeader ? backend.nodeId : leaderInfo?.id;
  if (leaderId !== undefined && leaderId > 0) {
    leader = byId.get(leaderId);
    if (!leader) {
      leader = {
        memberId: leaderId,
        nodeId: clusterNodeId(leaderId),
        host: undefined,
        port: undefined,
        isLeader: true,
        isSelf: false,
        raftRole: 'leader',
      };
      byId.set(leaderId, leader);
    }
    const a = parseHostPort(leaderInfo?.id === leaderId ? leaderInfo.respAddr : undefined);
    if (a && !leader.isSelf) {
      leader.host = a.host;
      leader.port = a.port;
    }
    leader.isLeader = true;
    // A follower that still names itself leader would send clients in circles: present no leader instead.
    if (leader.isSelf && !selfIsLeader) leader = undefined;
  }
  const nodes = [...byId.values()].sort((x, y) => x.memberId - y.memberId);
  for (const n of nodes) if (n !== leader) n.isLeader = false;
  return {
    self,
    leader,
    replicas: nodes.filter((n) => n !== leader),
    nodes,
    epoch: backend.term?.() ?? 0,
    offset: backend.appliedIndex?.() ?? 0,
  };
}

/** `host:port` of a node, or undefined without an address. */
export function addrOf(n: NodeView | undefined): string | undefined {
  return n && n.host !== undefined && n.port !== undefined ? `${n.host}:${n.port}` : undefined;
}
