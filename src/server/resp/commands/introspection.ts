import { arch, platform, release } from 'node:os';
import {
  type CommandSpec,
  type CommandSpecInput,
  fullName,
  lower,
  type ServerState,
  type Session,
  text,
} from '../command.js';
import { RespError } from '../errors.js';
import { globMatch } from '../glob.js';
import { R, type Reply } from '../reply.js';
import { helpReply } from './connection.js';

/** INFO, CONFIG GET and COMMAND: what clients and tools ask about the server. */
export const introspectionCommands: CommandSpecInput[] = [
  {
    name: 'info',
    arity: -1,
    flags: ['loading', 'stale'],
    group: 'server',
    summary:
      'INFO [section ...]: server, clients, persistence, stats, replication, cluster, keyspace (default: all).',
    handler: ({ server }, args) => R.verbatim(infoText(server, args.slice(1))),
  },
  {
    name: 'config',
    arity: -2,
    flags: ['admin', 'noscript', 'loading', 'stale'],
    group: 'server',
    summary: 'CONFIG GET pattern [pattern ...]: the few parameters Floe has (unknown ones: nothing).',
    since: '2.0.0',
    subcommands: [
      {
        name: 'get',
        arity: -3,
        flags: ['admin', 'noscript', 'loading', 'stale'],
        group: 'server',
        summary: 'Parameters matching any glob pattern, as a name/value list (map in RESP3).',
        since: '2.0.0',
        handler: ({ server }, args) => configGet(server, args.slice(2)),
      },
      {
        name: 'help',
        arity: 2,
        flags: ['loading', 'stale'],
        group: 'server',
        summary: 'Lists the CONFIG subcommands.',
        since: '5.0.0',
        handler: () =>
          helpReply('CONFIG', [
            'GET <pattern>',
            '    Return parameters matching the glob-like <pattern> and their values.',
          ]),
      },
    ],
  },
  {
    name: 'command',
    arity: -1,
    flags: ['loading', 'stale'],
    group: 'server',
    summary: 'COMMAND [COUNT | INFO name... | DOCS name... | LIST | GETKEYS cmd args...]: the command table.',
    since: '2.8.13',
    handler: ({ server }) => R.array([...server.table.values()].map(commandInfo)),
    subcommands: [
      {
        name: 'count',
        arity: 2,
        flags: ['loading', 'stale'],
        group: 'server',
        summary: 'Number of commands.',
        since: '2.8.13',
        handler: ({ server }) => R.int(server.table.size),
      },
      {
        name: 'info',
        arity: -2,
        flags: ['loading', 'stale'],
        group: 'server',
        summary: 'Details of the named commands (all without names); null for unknown names.',
        since: '2.8.13',
        handler: ({ server }, args) => {
          if (args.length === 2) return R.array([...server.table.values()].map(commandInfo));
          return R.array(
            args.slice(2).map((a) => {
              const spec = lookup(server, lower(a));
              return spec ? commandInfo(spec) : R.NULL_ARRAY;
            }),
          );
        },
      },
      {
        name: 'docs',
        arity: -2,
        flags: ['loading', 'stale'],
        group: 'server',
        summary: 'Documentation of the named commands (all without names), as a map.',
        since: '7.0.0',
        handler: ({ server }, args) => {
          const specs =
            args.length === 2
              ? [...server.table.values()]
              : args
                  .slice(2)
                  .map((a) => lookup(server, lower(a)))
                  .filter((s): s is CommandSpec => s !== undefined);
          return R.map(specs.map((s) => [R.bulk(fullName(s)), commandDocs(s)] as const));
        },
      },
      {
        name: 'list',
        arity: 2,
        flags: ['loading', 'stale'],
        group: 'server',
        summary: 'Names of all commands.',
        since: '7.0.0',
        handler: ({ server }) => R.bulks([...server.table.keys()]),
      },
      {
        name: 'getkeys',
        arity: -3,
        flags: ['loading', 'stale'],
        group: 'server',
        summary: 'The key arguments of a full command line.',
        since: '2.8.13',
        handler: ({ server }, args) => {
          const cmd = args.slice(2);
          let spec = server.table.get(lower(cmd[0]));
          if (spec?.subcommands && cmd.length >= 2) spec = spec.subcommands.get(lower(cmd[1])) ?? spec;
          if (!spec) throw new RespError('ERR Invalid command specified');
          if (spec.arity >= 0 ? cmd.length !== spec.arity : cmd.length < -spec.arity) {
            throw new RespError('ERR Invalid number of arguments specified for command');
          }
          if (spec.firstKey === 0) throw new RespError('ERR The command has no key arguments');
          const last = spec.lastKey < 0 ? cmd.length + spec.lastKey : spec.lastKey;
          const keys: Buffer[] = [];
          for (let i = spec.firstKey; i <= last && i < cmd.length; i += Math.max(1, spec.step))
            keys.push(cmd[i]!);
          return R.bulks(keys);
        },
      },
      {
        name: 'help',
        arity: 2,
        flags: ['loading', 'stale'],
        group: 'server',
        summary: 'Lists the COMMAND subcommands.',
        since: '5.0.0',
        handler: () =>
          helpReply('COMMAND', [
            '(no subcommand)',
            '    Return details about all Redis commands.',
            'COUNT',
            '    Return the total number of commands in this Redis server.',
            'LIST',
            '    Return a list of all commands in this Redis server.',
            'INFO [<command-name> ...]',
            '    Return details about multiple Redis commands.',
            'DOCS [<command-name> ...]',
            '    Return documentation details about multiple Redis commands.',
            'GETKEYS <full-command>',
            '    Return the keys from a full Redis command.',
          ]),
      },
    ],
  },
];

/** `client|setname` or `client setname` style lookup for COMMAND INFO / DOCS. */
function lookup(server: ServerState, name: string): CommandSpec | undefined {
  const bar = name.indexOf('|');
  if (bar === -1) return server.table.get(name);
  return server.table.get(name.slice(0, bar))?.subcommands?.get(name.slice(bar + 1));
}

function aclCategories(spec: CommandSpec): string[] {
  const cats = new Set<string>();
  for (const f of spec.flags) {
    if (f === 'write') cats.add('@write');
    if (f === 'readonly') cats.add('@read');
    if (f === 'fast') cats.add('@fast');
    if (f === 'admin') cats.add('@admin').add('@dangerous');
    if (f === 'pubsub') cats.add('@pubsub');
  }
  if (!spec.flags.includes('fast')) cats.add('@slow');
  if (spec.group === 'connection') cats.add('@connection');
  return [...cats];
}

/** One entry of COMMAND / COMMAND INFO, in Redis 7's 10-element shape. */
export function commandInfo(spec: CommandSpec): Reply {
  const keySpecs: Reply[] = [];
  if (spec.firstKey > 0) {
    const write = spec.flags.includes('write');
    keySpecs.push(
      R.map([
        [
          R.bulk('flags'),
          R.set(write ? [R.simple('RW'), R.simple('update')] : [R.simple('RO'), R.simple('access')]),
        ],
        [
          R.bulk('begin_search'),
          R.map([
            [R.bulk('type'), R.bulk('index')],
            [R.bulk('spec'), R.map([[R.bulk('index'), R.int(spec.firstKey)]])],
          ]),
        ],
        [
          R.bulk('find_keys'),
          R.map([
            [R.bulk('type'), R.bulk('range')],
            [
              R.bulk('spec'),
              R.map([
                [R.bulk('lastkey'), R.int(spec.lastKey - spec.firstKey)],
                [R.bulk('keystep'), R.int(spec.step)],
                [R.bulk('limit'), R.int(0)],
              ]),
            ],
          ]),
        ],
      ]),
    );
  }
  return R.array([
    R.bulk(fullName(spec)),
    R.int(spec.arity),
    R.set(spec.flags.map((f) => R.simple(f))),
    R.int(spec.firstKey),
    R.int(spec.lastKey),
    R.int(spec.step),
    R.set(aclCategories(spec).map((c) => R.simple(c))),
    R.set([]),
    R.array(keySpecs),
    R.array(spec.subcommands ? [...spec.subcommands.values()].map(commandInfo) : []),
  ]);
}

function commandDocs(spec: CommandSpec): Reply {
  const entries: [Reply, Reply][] = [
    [R.bulk('summary'), R.bulk(spec.summary)],
    [R.bulk('since'), R.bulk(spec.since)],
    [R.bulk('group'), R.bulk(spec.group)],
  ];
  if (spec.complexity) entries.push([R.bulk('complexity'), R.bulk(spec.complexity)]);
  if (spec.subcommands) {
    entries.push([
      R.bulk('subcommands'),
      R.map([...spec.subcommands.values()].map((s) => [R.bulk(fullName(s)), commandDocs(s)] as const)),
    ]);
  }
  return R.map(entries);
}

function configValues(server: ServerState): [string, string][] {
  const l = server.limits;
  const self = server.selfAddr();
  return [
    ['maxclients', String(l.maxClients)],
    ['timeout', String(Math.ceil(l.idleTimeoutMs / 1000))],
    ['proto-max-bulk-len', String(l.maxBulkBytes)],
    ['client-query-buffer-limit', String(l.maxRequestBytes)],
    ['databases', '1'],
    ['save', ''],
    ['appendonly', 'no'],
    ['port', String(self.port)],
    ['bind', self.host],
    ['cluster-enabled', server.options.mode === 'cluster' ? 'yes' : 'no'],
  ];
}

function configGet(server: ServerState, patterns: Buffer[]): Reply {
  const values = configValues(server);
  const seen = new Set<string>();
  const out: [Reply, Reply][] = [];
  for (const p of patterns) {
    const pattern = text(p);
    for (const [k, v] of values) {
      if (!seen.has(k) && globMatch(pattern, k, true)) {
        seen.add(k);
        out.push([R.bulk(k), R.bulk(v)]);
      }
    }
  }
  return R.map(out);
}

const DEFAULT_SECTIONS = ['server', 'clients', 'persistence', 'stats', 'replication', 'cluster', 'keyspace'];

/** The INFO text: `# Section` headers and `field:value` lines, CRLF separated, as Redis writes it. */
export function infoText(server: ServerState, args: Buffer[]): string {
  let wanted = args.map((a) => lower(a));
  if (wanted.length === 0 || wanted.some((w) => w === 'all' || w === 'everything' || w === 'default')) {
    wanted = DEFAULT_SECTIONS;
  }
  const parts: string[] = [];
  for (const section of DEFAULT_SECTIONS) {
    if (!wanted.includes(section)) continue;
    const lines = sectionLines(server, section);
    parts.push(
      `# ${section[0]!.toUpperCase()}${section.slice(1)}\r\n${lines.map((l) => `${l}\r\n`).join('')}`,
    );
  }
  return parts.join('\r\n');
}

function sectionLines(server: ServerState, section: string): string[] {
  const uptime = Math.floor((Date.now() - server.startedAt) / 1000);
  switch (section) {
    case 'server': {
      const self = server.selfAddr();
      return [
        `redis_version:${server.options.redisVersion}`,
        `redis_mode:${server.options.mode}`,
        `floe_version:${server.options.floeVersion}`,
        `floe_member_id:${server.backend.nodeId}`,
        `floe_cluster_uid:${server.backend.clusterUid?.() ?? ''}`,
        `floe_raft_role:${server.backend.role()}`,
        `os:${platform()} ${release()} ${arch()}`,
        `arch_bits:${arch().includes('64') ? 64 : 32}`,
        `multiplexing_api:node.js ${process.version}`,
        `process_id:${process.pid}`,
        `run_id:${server.runId}`,
        `tcp_port:${self.port}`,
        `server_time_usec:${Date.now() * 1000}`,
        `uptime_in_seconds:${uptime}`,
        `uptime_in_days:${Math.floor(uptime / 86400)}`,
      ];
    }
    case 'clients': {
      let connected = 0;
      let pubsub = 0;
      for (const s of server.sessions()) {
        connected++;
        if (isSubscribed(s)) pubsub++;
      }
      return [
        `connected_clients:${connected}`,
        `maxclients:${server.limits.maxClients}`,
        'blocked_clients:0',
        `pubsub_clients:${pubsub}`,
      ];
    }
    case 'persistence':
      return ['loading:0', 'async_loading:0'];
    case 'stats': {
      const c = server.counters;
      return [
        `total_connections_received:${c.totalConnections}`,
        `total_commands_processed:${c.totalCommands}`,
        `rejected_connections:${c.rejectedConnections}`,
        `total_error_replies:${c.errorReplies}`,
        `floe_protocol_errors:${c.protocolErrors}`,
        `floe_idle_clients_closed:${c.idleClosed}`,
        `client_output_buffer_limit_disconnections:${c.outputLimitClosed}`,
        `floe_request_timeout_closed:${c.requestTimeoutClosed}`,
        `floe_backpressure_pauses:${c.backpressurePauses}`,
      ];
    }
    case 'replication': {
      const t = server.topology();
      if (t.leader?.isSelf) {
        const replicas = t.replicas.filter((n) => n.port !== undefined);
        return [
          'role:master',
          `connected_slaves:${replicas.length}`,
          ...replicas.map(
            (n, i) => `slave${i}:ip=${n.host},port=${n.port},state=online,offset=${t.offset},lag=0`,
          ),
          `master_replid:${t.self.nodeId}`,
          `master_repl_offset:${t.offset}`,
        ];
      }
      const up = t.leader !== undefined && t.leader.port !== undefined;
      return [
        'role:slave',
        `master_host:${up ? t.leader!.host : ''}`,
        `master_port:${up ? t.leader!.port : 0}`,
        `master_link_status:${up ? 'up' : 'down'}`,
        'master_last_io_seconds_ago:0',
        'master_sync_in_progress:0',
        `slave_repl_offset:${t.offset}`,
        'slave_priority:100',
        'slave_read_only:1',
        'replica_announced:1',
        'connected_slaves:0',
        `master_replid:${t.leader?.nodeId ?? '0'.repeat(40)}`,
        `master_repl_offset:${t.offset}`,
      ];
    }
    case 'cluster':
      return [`cluster_enabled:${server.options.mode === 'cluster' ? 1 : 0}`];
    case 'keyspace':
      return [];
    default:
      return [];
  }
}

function isSubscribed(s: Session): boolean {
  return s.channels.size > 0 || s.patterns.size > 0;
}
