import type { CommandSpecInput, ServerState } from '../command.js';
import { keyHashSlot, SLOT_COUNT } from '../crc16.js';
import { RespError } from '../errors.js';
import { R, type Reply } from '../reply.js';
import type { NodeView, Topology } from '../topology.js';
import { helpReply } from './connection.js';

/**
 * Redis Cluster presentation of a Raft group: the leader is the master of all 16384 slots, every other member
 * is its replica. Cluster-aware clients therefore send every keyed command to the leader, and a follower that
 * receives one answers `-MOVED <slot> <leader>` (see dispatch.ts).
 */
export const clusterCommands: CommandSpecInput[] = [
  {
    name: 'cluster',
    arity: -2,
    flags: ['stale', 'loading'],
    group: 'cluster',
    summary: 'Cluster view: SLOTS, SHARDS, NODES, INFO, MYID, KEYSLOT, HELP.',
    since: '3.0.0',
    subcommands: [
      {
        name: 'slots',
        arity: 2,
        flags: ['stale', 'loading'],
        group: 'cluster',
        summary:
          'Slot ranges and their nodes: [[0, 16383, leader, replica...]] (empty while no leader is known).',
        since: '3.0.0',
        handler: ({ server }) => clusterOnly(server, () => slots(server.topology())),
      },
      {
        name: 'shards',
        arity: 2,
        flags: ['stale', 'loading'],
        group: 'cluster',
        summary: 'The one shard: slots 0-16383, the leader as master and the followers as replicas.',
        since: '7.0.0',
        handler: ({ server }) => clusterOnly(server, () => shards(server.topology())),
      },
      {
        name: 'nodes',
        arity: 2,
        flags: ['stale', 'loading'],
        group: 'cluster',
        summary: 'Every member in CLUSTER NODES format.',
        since: '3.0.0',
        handler: ({ server }) => clusterOnly(server, () => R.verbatim(nodesText(server.topology()))),
      },
      {
        name: 'info',
        arity: 2,
        flags: ['stale', 'loading'],
        group: 'cluster',
        summary: 'cluster_state:ok while a leader is known, fail otherwise, and counts.',
        since: '3.0.0',
        handler: ({ server }) => clusterOnly(server, () => R.verbatim(clusterInfoText(server.topology()))),
      },
      {
        name: 'myid',
        arity: 2,
        flags: ['stale', 'loading'],
        group: 'cluster',
        summary: "This member's 40-hex node id (SHA-1 of its Floe member id, stable).",
        since: '3.0.0',
        handler: ({ server }) => clusterOnly(server, () => R.bulk(server.topology().self.nodeId)),
      },
      {
        name: 'keyslot',
        arity: 3,
        flags: ['stale', 'loading'],
        group: 'cluster',
        summary: 'The slot of a key: CRC16-XMODEM mod 16384, honouring {hash tags}.',
        since: '3.0.0',
        handler: (_ctx, args) => R.int(keyHashSlot(args[2]!)),
      },
      {
        name: 'help',
        arity: 2,
        flags: ['stale', 'loading'],
        group: 'cluster',
        summary: 'Lists the CLUSTER subcommands.',
        since: '5.0.0',
        handler: () =>
          helpReply('CLUSTER', [
            'SLOTS',
            '    Return information about slots range mappings.',
            'SHARDS',
            '    Return information about slot range mappings and the nodes associated with them.',
            'NODES',
            '    Return cluster configuration seen by node.',
            'INFO',
            '    Return information about the cluster.',
            'MYID',
            '    Return the node id.',
            'KEYSLOT <key>',
            '    Return the hash slot for <key>.',
          ]),
      },
    ],
  },
  {
    name: 'role',
    arity: 1,
    flags: ['noscript', 'loading', 'stale', 'fast'],
    group: 'server',
    summary:
      'Leader: ["master", offset, [[ip, port, offset]...]]; follower: ["slave", ip, port, "connected", offset].',
    since: '2.8.12',
    handler: ({ server }) => role(server.topology()),
  },
];

function clusterOnly(server: ServerState, f: () => Reply): Reply {
  if (server.options.mode !== 'cluster')
    throw new RespError('ERR This instance has cluster support disabled');
  return f();
}

function nodeEntry(n: NodeView): Reply {
  return R.array([R.bulk(n.host ?? ''), R.int(n.port ?? 0), R.bulk(n.nodeId), R.map([])]);
}

function slots(t: Topology): Reply {
  if (!t.leader || t.leader.port === undefined) return R.EMPTY_ARRAY;
  const replicas = t.replicas.filter((n) => n.port !== undefined);
  return R.array([
    R.array([R.int(0), R.int(SLOT_COUNT - 1), nodeEntry(t.leader), ...replicas.map(nodeEntry)]),
  ]);
}

function shards(t: Topology): Reply {
  if (!t.leader) return R.EMPTY_ARRAY;
  const node = (n: NodeView, role: string): Reply =>
    R.map([
      [R.bulk('id'), R.bulk(n.nodeId)],
      [R.bulk('port'), R.int(n.port ?? 0)],
      [R.bulk('ip'), R.bulk(n.host ?? '')],
      [R.bulk('endpoint'), R.bulk(n.host ?? '')],
      [R.bulk('role'), R.bulk(role)],
      [R.bulk('replication-offset'), R.int(t.offset)],
      [R.bulk('health'), R.bulk(n.port === undefined ? 'failed' : 'online')],
    ]);
  return R.array([
    R.map([
      [R.bulk('slots'), R.array([R.int(0), R.int(SLOT_COUNT - 1)])],
      [R.bulk('nodes'), R.array([node(t.leader, 'master'), ...t.replicas.map((n) => node(n, 'replica'))])],
    ]),
  ]);
}

/** CLUSTER NODES: `<id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv> <epoch> <link> [slots]`. */
export function nodesText(t: Topology): string {
  let out = '';
  for (const n of t.nodes) {
    const flags: string[] = [];
    if (n.isSelf) flags.push('myself');
    const isMaster = n === t.leader || !t.leader;
    flags.push(isMaster ? 'master' : 'slave');
    if (n.port === undefined) flags.push('noaddr');
    const addr = n.port === undefined ? ':0@0' : `${n.host}:${n.port}@0`;
    const master = isMaster ? '-' : t.leader!.nodeId;
    const slotsText = n === t.leader ? ` 0-${SLOT_COUNT - 1}` : '';
    out += `${n.nodeId} ${addr} ${flags.join(',')} ${master} 0 0 ${t.epoch} connected${slotsText}\n`;
  }
  return out;
}

export function clusterInfoText(t: Topology): string {
  const ok = t.leader !== undefined && t.leader.port !== undefined;
  const assigned = ok ? SLOT_COUNT : 0;
  return [
    `cluster_state:${ok ? 'ok' : 'fail'}`,
    `cluster_slots_assigned:${assigned}`,
    `cluster_slots_ok:${assigned}`,
    'cluster_slots_pfail:0',
    'cluster_slots_fail:0',
    `cluster_known_nodes:${t.nodes.length}`,
    `cluster_size:${ok ? 1 : 0}`,
    `cluster_current_epoch:${t.epoch}`,
    `cluster_my_epoch:${t.epoch}`,
    'cluster_stats_messages_sent:0',
    'cluster_stats_messages_received:0',
    'total_cluster_links_buffer_limit_exceeded:0',
    '',
  ].join('\r\n');
}

function role(t: Topology): Reply {
  if (t.leader?.isSelf) {
    const replicas = t.replicas
      .filter((n) => n.port !== undefined)
      .map((n) => R.bulks([n.host!, String(n.port), String(t.offset)]));
    return R.array([R.bulk('master'), R.int(t.offset), R.array(replicas)]);
  }
  if (t.leader && t.leader.port !== undefined) {
    return R.array([
      R.bulk('slave'),
      R.bulk(t.leader.host!),
      R.int(t.leader.port),
      R.bulk('connected'),
      R.int(t.offset),
    ]);
  }
  return R.array([R.bulk('slave'), R.bulk(''), R.int(0), R.bulk('connect'), R.int(-1)]);
}
