import { Command } from 'commander';
import { type Conn, call } from '../admin-http.js';
import type { CliIO } from '../io.js';
import { UsageError } from '../io.js';

const PERMS = ['acquire', 'renew', 'release', 'read', 'admin', 'issue'];

/** "orders:acquire,renew;*:read" → {orders: [...], '*': [...]} */
export function parseGrantList(text: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const part of text
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const i = part.lastIndexOf(':');
    if (i <= 0) throw new UsageError(`--grant entries must be APP:PERM[,PERM] (got "${part}")`);
    const perms = part
      .slice(i + 1)
      .split(',')
      .map((p) => p.trim());
    const bad = perms.find((p) => !PERMS.includes(p));
    if (bad) throw new UsageError(`unknown permission "${bad}"; allowed: ${PERMS.join(', ')}`);
    out[part.slice(0, i)] = perms;
  }
  return out;
}

/** `floe user add|list|delete|passwd|grant|revoke` — users live in the replicated state. */
export function userCommand(io: CliIO): Command {
  const user = new Command('user').description('manage users and permissions (kept in the replicated state)');
  const common = (c: Command) =>
    c
      .option('--endpoint <host:port>', 'any member’s HTTP address', '127.0.0.1:7380')
      .option('--user <name>', 'authenticate as (default $FLOE_USER)')
      .option('--password <pw>', 'password (default $FLOE_PASSWORD)');
  const print = (v: unknown) => io.out(`${JSON.stringify(v, null, 2)}\n`);

  common(
    user
      .command('add')
      .description('create a user; the first user must be an admin of every app (--grant "*:admin")')
      .argument('<name>')
      .requiredOption('--new-password <pw>', 'the new user’s password (>= 8 characters)')
      .option('--grant <list>', 'permissions, e.g. "orders:acquire,renew,release;*:read"', ''),
  ).action(async (name: string, o: Conn & { newPassword: string; grant: string }) => {
    print(
      await call(io, o, 'POST', '/v1/users', {
        user: name,
        password: o.newPassword,
        grants: parseGrantList(o.grant),
      }),
    );
  });

  common(user.command('list').description('users and their permissions')).action(async (o: Conn) => {
    print(await call(io, o, 'GET', '/v1/users'));
  });

  common(user.command('delete').argument('<name>').description('delete a user')).action(
    async (name: string, o: Conn) => {
      print(await call(io, o, 'DELETE', `/v1/users/${encodeURIComponent(name)}`));
    },
  );

  common(
    user
      .command('passwd')
      .argument('<name>')
      .requiredOption('--new-password <pw>')
      .description('set a password'),
  ).action(async (name: string, o: Conn & { newPassword: string }) => {
    print(
      await call(io, o, 'PUT', `/v1/users/${encodeURIComponent(name)}/password`, { password: o.newPassword }),
    );
  });

  common(
    user
      .command('grant')
      .argument('<name>')
      .argument('<app>', 'app name or * for all')
      .argument('<permissions>', `comma-separated: ${PERMS.join(', ')}`)
      .description('grant permissions on an app'),
  ).action(async (name: string, app: string, perms: string, o: Conn) => {
    const permissions = parseGrantList(`${app}:${perms}`)[app];
    print(await call(io, o, 'POST', `/v1/users/${encodeURIComponent(name)}/grants`, { app, permissions }));
  });

  common(
    user
      .command('revoke')
      .argument('<name>')
      .argument('<app>')
      .argument('[permissions]', 'comma-separated; all when omitted')
      .description('revoke permissions on an app'),
  ).action(async (name: string, app: string, perms: string | undefined, o: Conn) => {
    const permissions = perms ? parseGrantList(`${app}:${perms}`)[app] : undefined;
    print(await call(io, o, 'POST', `/v1/users/${encodeURIComponent(name)}/revoke`, { app, permissions }));
  });

  return user;
}
