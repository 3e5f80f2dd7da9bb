import { type CommandSpecInput, type ServerState, text } from '../command.js';
import { RespError } from '../errors.js';
import { R, type Reply } from '../reply.js';
import { addrOf, type NodeView, type Topology } from '../topology.js';
import { helpReply } from './connection.js';

/**
 * Redis Sentinel presentation: every Floe node also answers as a sentinel monitoring one master, named
 * `sentinelName` (default `floe`), which is the Raft leader. The other members are the master's replicas and
 * the other sentinels. Values are bulk strings in both protocols, as real Sentinel sends them.
 */
export const sentinelCommands: CommandSpecInput[] = [
  {
    name: 'sentinel',
    arity: -2,
    flags: ['sentinel', 'stale', 'loading'],
    group: 'sentinel',
    summary:
      'Sentinel view of the cluster: GET-MASTER-ADDR-BY-NAME, MASTERS, MASTER, REPLICAS, SLAVES, SENTINELS, MYID.',
    since: '2.8.4',
    subcommands: [
      {
        name: 'get-master-addr-by-name',
        arity: 3,
        flags: ['sentinel', 'stale', 'loading'],
        group: 'sentinel',
        summary:
          "[ip, port] of the leader's RESP address; null for an unknown name or while no leader is known.",
        handler: ({ server }, args) => {
          const t = server.topology();
          const leader = t.leader;
          if (text(args[2]) !== server.options.sentinelName || !leader || leader.port === undefined) {
            return R.NULL_ARRAY;
          }
          return R.bulks([leader.host!, String(leader.port)]);
        },
      },
      {
        name: 'masters',
        arity: 2,
        flags: ['sentinel', 'stale', 'loading'],
        group: 'sentinel',
        summary: 'The one master (the leader) as a field list.',
        handler: ({ server }) => R.array([masterRecord(server, server.topology())]),
      },
      {
        name: 'master',
        arity: 3,
        flags: ['sentinel', 'stale', 'loading'],
        group: 'sentinel',
        summary:
          'The master named <name> as a field list (flags master,s_down,o_down while no leader is known).',
        handler: ({ server }, args) => {
          checkName(server, args[2]);
          return masterRecord(server, server.topology());
        },
      },
      {
        name: 'replicas',
        arity: 3,
        flags: ['sentinel', 'stale', 'loading'],
        group: 'sentinel',
        summary: "The master's replicas: every follower with a RESP address.",
        since: '5.0.0',
        handler: ({ server }, args) => {
          checkName(server, args[2]);
          return replicas(server.topology());
        },
      },
      {
        name: 'slaves',
        arity: 3,
        flags: ['sentinel', 'stale', 'loading'],
        group: 'sentinel',
        summary: 'Same as SENTINEL REPLICAS.',
        handler: ({ server }, args) => {
          checkName(server, args[2]);
          return replicas(server.topology());
        },
      },
      {
        name: 'sentinels',
        arity: 3,
        flags: ['sentinel', 'stale', 'loading'],
        group: 'sentinel',
        summary: 'The other sentinels: every other member with a RESP address.',
        handler: ({ server }, args) => {
          checkName(server, args[2]);
          const t = server.topology();
          return R.array(
            t.nodes.filter((n) => !n.isSelf && n.port !== undefined).map((n) => sentinelRecord(n)),
          );
        },
      },
      {
        name: 'myid',
        arity: 2,
        flags: ['sentinel', 'stale', 'loading'],
        group: 'sentinel',
        summary: "This member's 40-hex id.",
        since: '6.2.0',
        handler: ({ server }) => R.bulk(server.topology().self.nodeId),
      },
      {
        name: 'help',
        arity: 2,
        flags: ['sentinel', 'stale', 'loading'],
        group: 'sentinel',
        summary: 'Lists the SENTINEL subcommands.',
        since: '6.2.0',
        handler: () =>
          helpReply('SENTINEL', [
            'GET-MASTER-ADDR-BY-NAME <master-name>',
            '    Return the ip and port number of the master with that name.',
            'MASTERS',
            '    Show a list of monitored masters and their state.',
            'MASTER <master-name>',
            '    Show the state and info of the specified master.',
            'REPLICAS <master-name>',
            '    Show a list of replicas for this master and their state.',
            'SENTINELS <master-name>',
            '    Show a list of Sentinel instances for this master and their state.',
            'MYID',
            '    Return the ID of the Sentinel instance.',
          ]),
      },
    ],
  },
];

function checkName(server: ServerState, arg: Buffer | undefined): void {
  if (text(arg) !== server.options.sentinelName) throw new RespError('ERR No such master with that name');
}

const LINK_FIELDS: [string, string | number][] = [
  ['link-pending-commands', 0],
  ['link-refcount', 1],
  ['last-ping-sent', 0],
  ['last-ok-ping-reply', 0],
  ['last-ping-reply', 0],
  ['down-after-milliseconds', 30000],
];

function masterRecord(server: ServerState, t: Topology): Reply {
  const leader = t.leader;
  const voters = t.nodes.length;
  return R.stringRecord([
    ['name', server.options.sentinelName],
    ['ip', leader?.host ?? ''],
    ['port', leader?.port ?? 0],
    ['runid', leader?.nodeId ?? ''],
    ['flags', leader && leader.port !== undefined ? 'master' : 'master,s_down,o_down'],
    ...LINK_FIELDS,
    ['info-refresh', 0],
    ['role-reported', 'master'],
    ['role-reported-time', 0],
    ['config-epoch', t.epoch],
    ['num-slaves', t.replicas.filter((n) => n.port !== undefined).length],
    ['num-other-sentinels', t.nodes.filter((n) => !n.isSelf && n.port !== undefined).length],
    ['quorum', Math.floor(voters / 2) + 1],
    ['failover-timeout', 180000],
    ['parallel-syncs', 1],
  ]);
}

function replicas(t: Topology): Reply {
  const leader = t.leader;
  return R.array(
    t.replicas
      .filter((n) => n.port !== undefined)
      .map((n) =>
        R.stringRecord([
          ['name', addrOf(n)!],
          ['ip', n.host!],
          ['port', n.port!],
          ['runid', n.nodeId],
          ['flags', leader ? 'slave' : 'slave,master_link_down'],
          ...LINK_FIELDS,
          ['info-refresh', 0],
          ['role-reported', 'slave'],
          ['role-reported-time', 0],
          ['master-link-down-time', 0],
          ['master-link-status', leader ? 'ok' : 'err'],
          ['master-host', leader?.host ?? '?'],
          ['master-port', leader?.port ?? 0],
          ['slave-priority', 100],
          ['slave-repl-offset', t.offset],
          ['replica-announced', 1],
        ]),
      ),
  );
}

function sentinelRecord(n: NodeView): Reply {
  return R.stringRecord([
    ['name', n.nodeId],
    ['ip', n.host!],
    ['port', n.port!],
    ['runid', n.nodeId],
    ['flags', 'sentinel'],
    ...LINK_FIELDS,
    ['last-hello-message', 0],
    ['voted-leader', '?'],
    ['voted-leader-epoch', 0],
  ]);
}
