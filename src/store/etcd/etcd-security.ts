import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import type { IOptions } from 'etcd3';

/**
 * How a Floe node proves itself to etcd and checks etcd's certificate (docs/etcd-store.md, "TLS and
 * authentication"): `--etcd-ca` (the CA that signed etcd's server certificates; default the system roots),
 * `--etcd-cert` / `--etcd-key` (a client certificate, for etcd's `--client-cert-auth`), `--etcd-user` /
 * `--etcd-password` (etcd's user authentication; the password also from `FLOE_ETCD_PASSWORD`, which keeps it out of
 * the process list). Files are PEM paths, read when the store starts.
 */
export interface EtcdSecurity {
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  user?: string;
  password?: string;
}

/** The settings' config keys and flags (a `--store raft` node refuses them rather than ignore them). */
export const ETCD_SECURITY_FLAGS: readonly (readonly [string, string])[] = [
  ['etcdCa', '--etcd-ca'],
  ['etcdCert', '--etcd-cert'],
  ['etcdKey', '--etcd-key'],
  ['etcdUser', '--etcd-user'],
  ['etcdPassword', '--etcd-password'],
];

/**
 * The security settings from flags (camelCase keys, as in the `--config` file) and the environment, or the reason
 * they are unusable, naming the flag. `endpoints` are the already checked `--etcd-endpoints`.
 */
export function parseEtcdSecurity(
  pick: (k: string) => unknown,
  endpoints: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): { ok: EtcdSecurity } | { error: string } {
  const str = (k: string): string | undefined => {
    const v = pick(k);
    return v === undefined || v === null || v === '' ? undefined : String(v);
  };
  const caFile = str('etcdCa');
  const certFile = str('etcdCert');
  const keyFile = str('etcdKey');
  const user = str('etcdUser');
  const password = str('etcdPassword') ?? (env.FLOE_ETCD_PASSWORD || undefined);
  if ((certFile === undefined) !== (keyFile === undefined))
    return { error: '--etcd-cert and --etcd-key go together (a client certificate and its private key)' };
  const https = endpoints.filter((e) => e.startsWith('https:'));
  if ((caFile !== undefined || certFile !== undefined) && https.length !== endpoints.length)
    return {
      error: '--etcd-ca / --etcd-cert need https:// in every --etcd-endpoints URL (etcd serves TLS there)',
    };
  if (https.length > 0 && https.length !== endpoints.length)
    return { error: '--etcd-endpoints must be all http:// or all https://' };
  if (user !== undefined && password === undefined)
    return { error: '--etcd-user needs --etcd-password (or FLOE_ETCD_PASSWORD)' };
  if (password !== undefined && user === undefined)
    return { error: '--etcd-password (or FLOE_ETCD_PASSWORD) needs --etcd-user' };
  if (user !== undefined && !/^[\x21-\x7e]{1,128}$/.test(user))
    return {
      error: `--etcd-user must be 1-128 printable characters without spaces (got ${JSON.stringify(user)})`,
    };
  for (const [flag, file] of [
    ['--etcd-ca', caFile],
    ['--etcd-cert', certFile],
    ['--etcd-key', keyFile],
  ] as const) {
    if (file === undefined) continue;
    try {
      readFileSync(file);
    } catch (err) {
      return {
        error: `${flag}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
      };
    }
  }
  return {
    ok: {
      ...(caFile ? { caFile } : {}),
      ...(certFile ? { certFile } : {}),
      ...(keyFile ? { keyFile } : {}),
      ...(user ? { user } : {}),
      ...(password ? { password } : {}),
    },
  };
}

/** The etcd3 client options for these settings (files read now). */
export function etcd3SecurityOptions(s: EtcdSecurity | undefined): Pick<IOptions, 'credentials' | 'auth'> {
  if (!s) return {};
  const tls =
    s.caFile !== undefined || s.certFile !== undefined
      ? {
          credentials: {
            rootCertificate: s.caFile ? readFileSync(s.caFile) : Buffer.from(rootCertificates.join('\n')),
            ...(s.certFile && s.keyFile
              ? { certChain: readFileSync(s.certFile), privateKey: readFileSync(s.keyFile) }
              : {}),
          },
        }
      : {};
  const auth =
    s.user !== undefined && s.password !== undefined
      ? {
          auth: {
            username: s.user,
            password: s.password,
            callOptions: () => ({ deadline: Date.now() + 5000 }),
          },
        }
      : {};
  return { ...tls, ...auth };
}
