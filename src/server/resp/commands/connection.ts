import {
  type CommandContext,
  type CommandSpecInput,
  integerArg,
  lower,
  type ServerState,
  type Session,
  text,
} from '../command.js';
import { errors, RespError } from '../errors.js';
import { R, type Reply } from '../reply.js';

/** Connection-level commands: PING ECHO HELLO AUTH SELECT QUIT RESET READONLY READWRITE ASKING TIME CLIENT. */
export const connectionCommands: CommandSpecInput[] = [
  {
    name: 'ping',
    arity: -1,
    flags: ['fast', 'stale', 'loading'],
    group: 'connection',
    summary: 'Returns PONG, or the message given; in RESP2 subscribed mode ["pong", message].',
    handler: ({ session }, args) => {
      if (args.length > 2) throw errors.wrongArity('ping');
      if (session.proto === 2 && (session.channels.size > 0 || session.patterns.size > 0)) {
        return R.array([R.bulk('pong'), R.bulk(args[1] ?? '')]);
      }
      return args.length === 2 ? R.bulk(args[1]!) : R.PONG;
    },
  },
  {
    name: 'echo',
    arity: 2,
    flags: ['fast', 'stale', 'loading'],
    group: 'connection',
    summary: 'Returns the given string.',
    handler: (_ctx, args) => R.bulk(args[1]!),
  },
  {
    name: 'hello',
    arity: -1,
    flags: ['no_auth', 'fast', 'stale', 'loading', 'noscript'],
    group: 'connection',
    summary:
      'HELLO [protover [AUTH user pass] [SETNAME name]]: handshake; switches to RESP2 or RESP3 and returns server info.',
    since: '6.0.0',
    handler: hello,
  },
  {
    name: 'auth',
    arity: -2,
    flags: ['no_auth', 'fast', 'stale', 'loading', 'noscript'],
    group: 'connection',
    summary: 'AUTH [user] password: authenticates the connection.',
    handler: (ctx, args) => {
      if (args.length > 3) throw errors.syntax();
      const single = args.length === 2;
      const user = single ? 'default' : text(args[1]);
      const pass = text(args[args.length - 1]);
      if (single && !ctx.server.backend.authRequired()) {
        throw new RespError(
          'ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?',
        );
      }
      return authenticate(ctx, user, pass, () => R.OK);
    },
  },
  {
    name: 'select',
    arity: 2,
    flags: ['fast', 'stale', 'loading'],
    group: 'connection',
    summary: 'SELECT 0 only: Floe has one database.',
    handler: (_ctx, args) => {
      if (integerArg(args[1]) !== 0) throw new RespError('ERR DB index is out of range');
      return R.OK;
    },
  },
  {
    name: 'quit',
    arity: -1,
    flags: ['no_auth', 'fast', 'stale', 'loading', 'noscript'],
    group: 'connection',
    summary: 'Replies OK and closes the connection.',
    handler: ({ session }) => {
      session.closeAfterReply();
      return R.OK;
    },
  },
  {
    name: 'reset',
    arity: 1,
    flags: ['no_auth', 'fast', 'stale', 'loading', 'noscript'],
    group: 'connection',
    summary: 'Resets the connection: RESP2, no name, not authenticated, no subscriptions, READWRITE.',
    since: '6.2.0',
    handler: ({ session }) => {
      session.proto = 2;
      session.name = '';
      session.user = undefined;
      session.authenticated = false;
      session.readonlyMode = false;
      session.channels.clear();
      session.patterns.clear();
      session.subscriptionsChanged();
      return R.simple('RESET');
    },
  },
  {
    name: 'readonly',
    arity: 1,
    flags: ['fast', 'stale', 'loading'],
    group: 'cluster',
    summary: 'Lets keyed read commands run on a replica (follower) for this connection.',
    since: '3.0.0',
    handler: ({ session }) => {
      session.readonlyMode = true;
      return R.OK;
    },
  },
  {
    name: 'readwrite',
    arity: 1,
    flags: ['fast', 'stale', 'loading'],
    group: 'cluster',
    summary: 'Undoes READONLY.',
    since: '3.0.0',
    handler: ({ session }) => {
      session.readonlyMode = false;
      return R.OK;
    },
  },
  {
    name: 'asking',
    arity: 1,
    flags: ['fast'],
    group: 'cluster',
    summary: 'Accepted for cluster clients; Floe never answers ASK.',
    since: '3.0.0',
    handler: () => R.OK,
  },
  {
    name: 'time',
    arity: 1,
    flags: ['fast', 'stale', 'loading'],
    group: 'server',
    summary: "This node's wall-clock time: [unix seconds, microseconds].",
    since: '2.6.0',
    handler: () => {
      const us = BigInt(Date.now()) * 1000n;
      return R.bulks([String(us / 1_000_000n), String(us % 1_000_000n)]);
    },
  },
  {
    name: 'client',
    arity: -2,
    flags: ['stale', 'loading', 'noscript'],
    group: 'connection',
    summary: 'Connection management: ID, GETNAME, SETNAME, INFO, LIST, SETINFO, HELP.',
    since: '2.4.0',
    subcommands: [
      {
        name: 'id',
        arity: 2,
        flags: ['fast', 'stale', 'loading', 'noscript'],
        group: 'connection',
        summary: 'The connection id.',
        since: '5.0.0',
        handler: ({ session }) => R.int(session.id),
      },
      {
        name: 'getname',
        arity: 2,
        flags: ['fast', 'stale', 'loading', 'noscript'],
        group: 'connection',
        summary: 'The connection name, or null.',
        handler: ({ session }) => (session.name ? R.bulk(session.name) : R.NULL),
      },
      {
        name: 'setname',
        arity: 3,
        flags: ['fast', 'stale', 'loading', 'noscript'],
        group: 'connection',
        summary: 'Names the connection (no spaces or special characters; empty clears it).',
        handler: ({ session }, args) => {
          const name = text(args[2]);
          if (!validClientText(name)) {
            throw new RespError('ERR Client names cannot contain spaces, newlines or special characters.');
          }
          session.name = name;
          return R.OK;
        },
      },
      {
        name: 'setinfo',
        arity: 4,
        flags: ['fast', 'stale', 'loading', 'noscript'],
        group: 'connection',
        summary:
          'CLIENT SETINFO LIB-NAME|LIB-VER value: records the client library (node-redis and ioredis send it).',
        since: '7.2.0',
        handler: ({ session }, args) => {
          const attr = lower(args[2]);
          const value = text(args[3]);
          if (attr !== 'lib-name' && attr !== 'lib-ver') {
            throw new RespError(`ERR Unrecognized option '${text(args[2])}'`);
          }
          if (!validClientText(value)) {
            throw new RespError(`ERR ${attr} cannot contain spaces, newlines or special characters.`);
          }
          if (attr === 'lib-name') session.libName = value;
          else session.libVer = value;
          return R.OK;
        },
      },
      {
        name: 'info',
        arity: 2,
        flags: ['stale', 'loading', 'noscript'],
        group: 'connection',
        summary: 'This connection, in CLIENT LIST format.',
        since: '6.2.0',
        handler: ({ session }) => R.verbatim(clientInfoLine(session)),
      },
      {
        name: 'list',
        arity: -2,
        flags: ['admin', 'stale', 'loading', 'noscript'],
        group: 'connection',
        summary: 'CLIENT LIST [TYPE normal|pubsub] [ID id ...]: every connection, one per line.',
        handler: ({ server }, args) => R.verbatim(clientList(server, args)),
      },
      {
        name: 'help',
        arity: 2,
        flags: ['stale', 'loading'],
        group: 'connection',
        summary: 'Lists the CLIENT subcommands.',
        since: '5.0.0',
        handler: () =>
          helpReply('CLIENT', [
            'ID',
            '    Return the ID of the current connection.',
            'GETNAME',
            '    Return the name of the current connection.',
            'SETNAME <name>',
            '    Assign the name <name> to the current connection.',
            'SETINFO <LIB-NAME|LIB-VER> <value>',
            '    Set client library name or version.',
            'INFO',
            '    Return information about the current client connection.',
            'LIST [TYPE normal|pubsub] [ID <id> [<id> ...]]',
            '    Return information about client connections.',
          ]),
      },
    ],
  },
];

/** `<CMD> <subcommand> arg ...` help text, as Redis's addReplyHelp formats it. */
export function helpReply(container: string, lines: string[]): Reply {
  return R.array(
    [
      `${container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:`,
      ...lines,
      'HELP',
      '    Print this help.',
    ].map((l) => R.simple(l)),
  );
}

/** Redis's rule for client names and library info: printable ASCII without spaces. */
function validClientText(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 33 || c > 126) return false;
  }
  return true;
}

/**
 * Check a password with the backend; on success mark the session authenticated as `user` and return `onOk()`.
 * With auth switched off, the `default` user is accepted with any password, as Redis's nopass default user.
 */
function authenticate(
  ctx: CommandContext,
  user: string,
  pass: string,
  onOk: () => Reply,
): Reply | Promise<Reply> {
  const { session, server } = ctx;
  const settle = (ok: boolean): Reply => {
    if (!ok && !(user === 'default' && !server.backend.authRequired())) throw errors.wrongPass();
    session.user = user;
    session.authenticated = true;
    return onOk();
  };
  // The address without the port: back-off is per client host.
  const addr = session.remoteAddress.replace(/:\d+$/, '');
  const r = server.backend.authenticate(user, pass, addr);
  return typeof r === 'boolean' ? settle(r) : r.then(settle);
}

function hello(ctx: CommandContext, args: Buffer[]): Reply | Promise<Reply> {
  const { session, server } = ctx;
  let proto = session.proto;
  if (args.length >= 2) {
    const v = text(args[1]);
    const n = /^(?:0|-?[1-9][0-9]{0,18})$/.test(v) ? Number(v) : Number.NaN;
    if (!Number.isSafeInteger(n))
      throw new RespError('ERR Protocol version is not an integer or out of range');
    if (n !== 2 && n !== 3) throw new RespError('NOPROTO unsupported protocol version');
    proto = n;
  }
  let auth: { user: string; pass: string } | undefined;
  let setName: string | undefined;
  for (let i = 2; i < args.length; i++) {
    const opt = lower(args[i]);
    const more = args.length - i - 1;
    if (opt === 'auth' && more >= 2) {
      auth = { user: text(args[i + 1]), pass: text(args[i + 2]) };
      i += 2;
    } else if (opt === 'setname' && more >= 1) {
      setName = text(args[i + 1]);
      if (!validClientText(setName)) {
        throw new RespError('ERR Client names cannot contain spaces, newlines or special characters.');
      }
      i += 1;
    } else {
      throw new RespError(`ERR Syntax error in HELLO option '${text(args[i])}'`);
    }
  }
  const finish = (): Reply => {
    session.proto = proto;
    if (setName !== undefined) session.name = setName;
    return helloReply(session, server);
  };
  if (auth) return authenticate(ctx, auth.user, auth.pass, finish);
  if (!session.authenticated && server.backend.authRequired()) {
    throw new RespError(
      'NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time',
    );
  }
  return finish();
}

function helloReply(session: Session, server: ServerState): Reply {
  const leader = server.backend.role() === 'leader';
  return R.map([
    [R.bulk('server'), R.bulk('floe')],
    [R.bulk('version'), R.bulk(server.options.redisVersion)],
    [R.bulk('proto'), R.int(session.proto)],
    [R.bulk('id'), R.int(session.id)],
    [R.bulk('mode'), R.bulk(server.options.mode)],
    [R.bulk('role'), R.bulk(leader ? 'master' : 'replica')],
    [R.bulk('modules'), R.EMPTY_ARRAY],
  ]);
}

/** One CLIENT LIST line (Redis's field names; values Floe does not track are 0 or -1). */
export function clientInfoLine(s: Session): string {
  const now = Date.now();
  const flags = `${s.channels.size > 0 || s.patterns.size > 0 ? 'P' : ''}${s.readonlyMode ? 'r' : ''}` || 'N';
  const qbuf = s.queryBufferBytes();
  const omem = s.outputBufferBytes();
  return (
    `id=${s.id} addr=${s.remoteAddress} laddr=${s.localAddress} fd=-1 name=${s.name} ` +
    `age=${Math.floor((now - s.createdAt) / 1000)} idle=${Math.floor((now - s.lastInteraction) / 1000)} ` +
    `flags=${flags} db=0 sub=${s.channels.size} psub=${s.patterns.size} ssub=0 multi=-1 qbuf=${qbuf} ` +
    `qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=${omem} tot-mem=${qbuf + omem} events=r ` +
    `cmd=${s.lastCommand || 'NULL'} user=${s.user ?? 'default'} redir=-1 resp=${s.proto} ` +
    `lib-name=${s.libName} lib-ver=${s.libVer}\n`
  );
}

function clientList(server: ServerState, args: Buffer[]): string {
  let type: string | undefined;
  let ids: Set<number> | undefined;
  for (let i = 2; i < args.length; i++) {
    const opt = lower(args[i]);
    if (opt === 'type' && i + 1 < args.length) {
      type = lower(args[++i]);
      if (
        type !== 'normal' &&
        type !== 'pubsub' &&
        type !== 'master' &&
        type !== 'replica' &&
        type !== 'slave'
      ) {
        throw new RespError(`ERR Unknown client type '${text(args[i])}'`);
      }
    } else if (opt === 'id' && i + 1 < args.length) {
      ids = new Set();
      while (i + 1 < args.length) {
        const id = integerArg(args[++i]);
        if (id <= 0) throw new RespError('ERR Invalid client ID');
        ids.add(id);
      }
    } else {
      throw errors.syntax();
    }
  }
  let out = '';
  for (const s of server.sessions()) {
    const pubsub = s.channels.size > 0 || s.patterns.size > 0;
    if (type === 'normal' && pubsub) continue;
    if (type === 'pubsub' && !pubsub) continue;
    if (type !== undefined && type !== 'normal' && type !== 'pubsub') continue;
    if (ids && !ids.has(s.id)) continue;
    out += clientInfoLine(s);
  }
  return out;
}
