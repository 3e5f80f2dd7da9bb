import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';

/**
 * A throwaway local certificate authority for `floe dev --tls` and the tests, made with the
 * `openssl` command (Node cannot issue certificates by itself). Keys are EC P-256, unencrypted,
 * written 0600. Not for production: see docs/tls.md for what a real deployment should use.
 */
export interface CertFiles {
  cert: string;
  key: string;
}

export class OpensslMissingError extends Error {
  constructor(detail: string) {
    super(`the openssl command is needed to make certificates (apt-get install openssl): ${detail}`);
    this.name = 'OpensslMissingError';
  }
}

function openssl(args: string[]): void {
  try {
    execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer };
    if (e.code === 'ENOENT') throw new OpensslMissingError(e.message);
    throw new Error(`openssl ${args[0]} failed: ${e.stderr?.toString().trim() || e.message}`);
  }
}

export function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const serial = () => `0x${randomBytes(12).toString('hex').replace(/^./, '1')}`;

/** A self-signed CA: `<dir>/<name>.pem` and `<dir>/<name>-key.pem`. */
export function makeCa(dir: string, name = 'ca', subject = '/CN=Floe dev CA', days = 365): CertFiles {
  mkdirSync(dir, { recursive: true });
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}-key.pem`);
  openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    String(days),
    '-set_serial',
    serial(),
    '-subj',
    subject,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  chmodSync(key, 0o600);
  return { cert, key };
}

export interface IssueOptions {
  /** Host names and IP addresses the certificate is for (subjectAltName). */
  hosts: readonly string[];
  days?: number;
  /** Common name; default the first host. */
  commonName?: string;
}

/**
 * A certificate signed by `ca` for `hosts`, usable both as a server and as a client certificate
 * (members use theirs for both): `<dir>/<name>.pem`, `<dir>/<name>-key.pem`.
 */
export function issueCert(dir: string, name: string, ca: CertFiles, o: IssueOptions): CertFiles {
  mkdirSync(dir, { recursive: true });
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}-key.pem`);
  const csr = join(dir, `${name}.csr`);
  const ext = join(dir, `${name}.ext`);
  const san = o.hosts.map((h) => (isIP(h) ? `IP:${h}` : `DNS:${h}`)).join(',');
  writeFileSync(
    ext,
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=serverAuth,clientAuth',
      ...(san ? [`subjectAltName=${san}`] : []),
      '',
    ].join('\n'),
  );
  try {
    newKeyAndRequest(key, csr, o.commonName ?? o.hosts[0] ?? name);
    openssl([
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      ca.cert,
      '-CAkey',
      ca.key,
      '-set_serial',
      serial(),
      '-days',
      String(o.days ?? 365),
      '-sha256',
      '-extfile',
      ext,
      '-out',
      cert,
    ]);
    chmodSync(key, 0o600);
  } finally {
    rmSync(csr, { force: true });
    rmSync(ext, { force: true });
  }
  return { cert, key };
}

/** The CA and per-node certificates `floe dev --tls` uses, made once and kept in `dir`. */
export function ensureDevCertificates(
  dir: string,
  nodes: readonly number[],
  hosts: readonly string[],
): { ca: CertFiles; nodes: Map<number, CertFiles>; created: boolean } {
  const ca = { cert: join(dir, 'ca.pem'), key: join(dir, 'ca-key.pem') };
  let created = false;
  if (!existsSync(ca.cert) || !existsSync(ca.key)) {
    makeCa(dir);
    created = true;
  }
  const out = new Map<number, CertFiles>();
  for (const id of nodes) {
    const files = { cert: join(dir, `node-${id}.pem`), key: join(dir, `node-${id}-key.pem`) };
    if (created || !existsSync(files.cert) || !existsSync(files.key)) {
      issueCert(dir, `node-${id}`, ca, { hosts, commonName: `floe-node-${id}` });
      created = true;
    }
    out.set(id, files);
  }
  return { ca, nodes: out, created };
}

/**
 * A certificate signed by `ca` with the validity period given (`YYYYMMDDHHMMSSZ`), e.g. one that
 * has already expired, for tests of the checks (`openssl ca` with a throwaway database).
 */
export function issueCertWithDates(
  dir: string,
  name: string,
  ca: CertFiles,
  o: { commonName: string; start: string; end: string },
): CertFiles {
  const work = join(dir, `${name}.ca-db`);
  mkdirSync(work, { recursive: true });
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}-key.pem`);
  const csr = join(work, 'req.csr');
  const cnf = join(work, 'ca.cnf');
  writeFileSync(join(work, 'index.txt'), '');
  writeFileSync(join(work, 'serial'), `${randomBytes(8).toString('hex').replace(/^./, '1')}\n`);
  writeFileSync(
    cnf,
    [
      '[ca]',
      'default_ca = d',
      '[d]',
      `database = ${join(work, 'index.txt')}`,
      `new_certs_dir = ${work}`,
      `serial = ${join(work, 'serial')}`,
      'default_md = sha256',
      'policy = p',
      'unique_subject = no',
      '[p]',
      'commonName = supplied',
      '',
    ].join('\n'),
  );
  try {
    newKeyAndRequest(key, csr, o.commonName);
    openssl([
      'ca',
      '-batch',
      '-notext',
      '-config',
      cnf,
      '-cert',
      ca.cert,
      '-keyfile',
      ca.key,
      '-in',
      csr,
      '-out',
      cert,
      '-startdate',
      o.start,
      '-enddate',
      o.end,
    ]);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return { cert, key };
}

/** A new P-256 key (unencrypted) and a certificate request for `commonName`. */
function newKeyAndRequest(key: string, csr: string, commonName: string): void {
  openssl([
    'req',
    '-new',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    key,
    '-out',
    csr,
    '-subj',
    `/CN=${commonName}`,
  ]);
}
