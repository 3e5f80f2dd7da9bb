import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';

/**
 * Certificate files of one listener (client-facing or peer), and the flags they came from so that
 * every error names the flag and the file.
 */
export interface TlsFiles {
  cert: string;
  key: string;
  ca?: string;
}

/** The flag names used in messages, e.g. `{ cert: '--tls-cert', key: '--tls-key', ca: '--tls-ca' }`. */
export interface TlsLabels {
  cert: string;
  key: string;
  ca: string;
}

export const CLIENT_TLS_LABELS: TlsLabels = { cert: '--tls-cert', key: '--tls-key', ca: '--tls-ca' };
export const PEER_TLS_LABELS: TlsLabels = {
  cert: '--peer-tls-cert',
  key: '--peer-tls-key',
  ca: '--peer-tls-ca',
};

/** What is known about the certificate in use (logged at start and on reload, shown in docs). */
export interface CertInfo {
  subject: string;
  issuer: string;
  serialNumber: string;
  /** SHA-256 fingerprint, `AB:CD:...`. */
  fingerprint256: string;
  validFrom: string;
  validTo: string;
  subjectAltName: string | undefined;
}

/** Loaded, checked PEM material: what `tls.createSecureContext` takes, plus the leaf's details. */
export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  ca?: Buffer;
  info: CertInfo;
}

/** A certificate, key or CA file that cannot be used; the message names the flag and the file. */
export class TlsConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TlsConfigError';
  }
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

function readPem(label: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new TlsConfigError(`${label} ${path}: cannot read the file (${e.code ?? e.message})`);
  }
}

function parseCerts(label: string, path: string, pem: Buffer): X509Certificate[] {
  const blocks = pem.toString('utf8').match(PEM_CERT) ?? [];
  if (blocks.length === 0) {
    throw new TlsConfigError(
      `${label} ${path}: no PEM certificate in the file (expected -----BEGIN CERTIFICATE-----)`,
    );
  }
  return blocks.map((b, i) => {
    try {
      return new X509Certificate(b);
    } catch (err) {
      throw new TlsConfigError(
        `${label} ${path}: certificate ${i + 1} in the file cannot be parsed (${(err as Error).message})`,
      );
    }
  });
}

function checkValidity(label: string, path: string, x: X509Certificate, now: number): void {
  const from = Date.parse(x.validFrom);
  const to = Date.parse(x.validTo);
  if (Number.isFinite(to) && now > to) {
    throw new TlsConfigError(
      `${label} ${path}: the certificate "${oneLine(x.subject)}" expired on ${new Date(to).toISOString()}`,
    );
  }
  if (Number.isFinite(from) && now < from) {
    throw new TlsConfigError(
      `${label} ${path}: the certificate "${oneLine(x.subject)}" is not valid before ${new Date(from).toISOString()}`,
    );
  }
}

function oneLine(dn: string): string {
  return dn.split('\n').filter(Boolean).join(', ');
}

/**
 * Reads and checks a certificate chain, its private key and an optional CA bundle. Refused, with
 * a message naming the flag and the file: unreadable files, no PEM certificate, a certificate that
 * has expired or is not valid yet (the leaf and every CA), a key that is not a PEM private key (or
 * is encrypted), a key that does not belong to the certificate, and anything else OpenSSL refuses.
 */
export function loadTlsMaterial(
  files: TlsFiles,
  labels: TlsLabels = CLIENT_TLS_LABELS,
  now: number = Date.now(),
): TlsMaterial {
  const cert = readPem(labels.cert, files.cert);
  const key = readPem(labels.key, files.key);
  const ca = files.ca === undefined ? undefined : readPem(labels.ca, files.ca);

  const chain = parseCerts(labels.cert, files.cert, cert);
  const leaf = chain[0]!;
  for (const x of chain) checkValidity(labels.cert, files.cert, x, now);
  let keyObject: KeyObject;
  try {
    keyObject = createPrivateKey(key);
  } catch (err) {
    throw new TlsConfigError(
      `${labels.key} ${files.key}: not a usable PEM private key (encrypted keys are not supported): ${(err as Error).message}`,
    );
  }
  if (!leaf.checkPrivateKey(keyObject)) {
    throw new TlsConfigError(
      `${labels.key} ${files.key}: the key does not belong to the certificate in ${labels.cert} ${files.cert} ("${oneLine(leaf.subject)}")`,
    );
  }
  if (ca !== undefined) {
    for (const x of parseCerts(labels.ca, files.ca!, ca)) checkValidity(labels.ca, files.ca!, x, now);
  }
  try {
    createSecureContext({ cert, key, ca });
  } catch (err) {
    throw new TlsConfigError(
      `${labels.cert} ${files.cert} / ${labels.key} ${files.key}: OpenSSL refuses them: ${(err as Error).message}`,
    );
  }
  return {
    cert,
    key,
    ca,
    info: {
      subject: oneLine(leaf.subject),
      issuer: oneLine(leaf.issuer),
      serialNumber: leaf.serialNumber,
      fingerprint256: leaf.fingerprint256,
      validFrom: leaf.validFrom,
      validTo: leaf.validTo,
      subjectAltName: leaf.subjectAltName,
    },
  };
}
