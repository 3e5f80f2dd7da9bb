import { type CommandContext, type CommandSpecInput, type ServerState, text } from '../command.js';
import { globMatch } from '../glob.js';
import { R, type Reply } from '../reply.js';

/**
 * Just enough pub/sub for Sentinel clients: they subscribe to `+switch-master` (and similar) on the node they use
 * as a sentinel and expect the subscription to stay open. Clients cannot PUBLISH; the server itself publishes
 * `+switch-master <name> <old-ip> <old-port> <new-ip> <new-port>` when the leader moves (`publish` below).
 */
export const pubsubCommands: CommandSpecInput[] = [
  {
    name: 'subscribe',
    arity: -2,
    flags: ['pubsub', 'noscript', 'loading', 'stale'],
    group: 'pubsub',
    summary: 'Subscribes to channels (only server events such as +switch-master are ever published).',
    since: '2.0.0',
    handler: (ctx, args) => change(ctx, args, 'subscribe'),
  },
  {
    name: 'unsubscribe',
    arity: -1,
    flags: ['pubsub', 'noscript', 'loading', 'stale'],
    group: 'pubsub',
    summary: 'Unsubscribes from the given channels, or all.',
    since: '2.0.0',
    handler: (ctx, args) => change(ctx, args, 'unsubscribe'),
  },
  {
    name: 'psubscribe',
    arity: -2,
    flags: ['pubsub', 'noscript', 'loading', 'stale'],
    group: 'pubsub',
    summary: 'Subscribes to channel patterns.',
    since: '2.0.0',
    handler: (ctx, args) => change(ctx, args, 'psubscribe'),
  },
  {
    name: 'punsubscribe',
    arity: -1,
    flags: ['pubsub', 'noscript', 'loading', 'stale'],
    group: 'pubsub',
    summary: 'Unsubscribes from the given patterns, or all.',
    since: '2.0.0',
    handler: (ctx, args) => change(ctx, args, 'punsubscribe'),
  },
];

type Kind = 'subscribe' | 'unsubscribe' | 'psubscribe' | 'punsubscribe';

function change({ session }: CommandContext, args: Buffer[], kind: Kind): Reply {
  const set = kind === 'subscribe' || kind === 'unsubscribe' ? session.channels : session.patterns;
  const count = () => R.int(session.channels.size + session.patterns.size);
  const out: Reply[] = [];
  if (kind === 'subscribe' || kind === 'psubscribe') {
    for (let i = 1; i < args.length; i++) {
      const name = text(args[i]);
      set.add(name);
      out.push(R.push([R.bulk(kind), R.bulk(name), count()]));
    }
  } else {
    const names = args.length > 1 ? args.slice(1).map((a) => text(a)) : [...set];
    if (names.length === 0) out.push(R.push([R.bulk(kind), R.NULL, count()]));
    for (const name of names) {
      set.delete(name);
      out.push(R.push([R.bulk(kind), R.bulk(name), count()]));
    }
  }
  session.subscriptionsChanged();
  return R.multi(out);
}

/** Deliver `message` on `channel` to every subscriber (by channel or matching pattern). Returns receivers. */
export function publish(server: ServerState, channel: string, message: string): number {
  let receivers = 0;
  for (const s of server.sessions()) {
    if (s.channels.has(channel)) {
      s.sendPush(R.push([R.bulk('message'), R.bulk(channel), R.bulk(message)]));
      receivers++;
    }
    for (const pattern of s.patterns) {
      if (globMatch(pattern, channel)) {
        s.sendPush(R.push([R.bulk('pmessage'), R.bulk(pattern), R.bulk(channel), R.bulk(message)]));
        receivers++;
      }
    }
  }
  return receivers;
}
