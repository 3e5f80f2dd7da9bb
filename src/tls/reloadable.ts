import type { SecureContextOptions, TLSSocket, TlsOptions } from 'node:tls';
import {
  type CertInfo,
  CLIENT_TLS_LABELS,
  loadTlsMaterial,
  type TlsFiles,
  type TlsLabels,
  type TlsMaterial,
} from './material.js';

/**
 * Client certificates asked of clients on the RESP and HTTP ports: `none` (default), `request`
 * (asked for; a client without one is let in, one whose certificate the CA did not sign is not;
 * see showsUnverifiedCertificate) or `require` (a connection
 * without a certificate signed by `--tls-ca` is refused during the TLS handshake).
 */
export type ClientAuth = 'none' | 'request' | 'require';
export const CLIENT_AUTH_VALUES: readonly ClientAuth[] = ['none', 'request', 'require'];

export type ReloadResult = { ok: true; info: CertInfo; changed: boolean } | { ok: false; error: string };

/**
 * Certificate material read from files, that can be read again (SIGHUP). A reload that fails keeps
 * the material in use and reports the error (naming the flag and the file); one that succeeds calls
 * every listener, which switches new connections to the new material (open ones keep theirs).
 */
export class ReloadableTls {
  private material: TlsMaterial;
  private readonly listeners: ((m: TlsMaterial) => void)[] = [];

  private constructor(
    readonly files: TlsFiles,
    readonly labels: TlsLabels,
    material: TlsMaterial,
  ) {
    this.material = material;
  }

  /** Loads and checks the files now; throws TlsConfigError naming the bad one. */
  static load(files: TlsFiles, labels: TlsLabels = CLIENT_TLS_LABELS, now?: number): ReloadableTls {
    return new ReloadableTls(files, labels, loadTlsMaterial(files, labels, now));
  }

  get current(): TlsMaterial {
    return this.material;
  }

  /** Called with the new material after every successful reload. */
  onReload(fn: (m: TlsMaterial) => void): void {
    this.listeners.push(fn);
  }

  reload(now?: number): ReloadResult {
    let next: TlsMaterial;
    try {
      next = loadTlsMaterial(this.files, this.labels, now);
    } catch (err) {
      return { ok: false, error: (err as Error).message };
    }
    const changed =
      !next.cert.equals(this.material.cert) ||
      !next.key.equals(this.material.key) ||
      !(next.ca ?? Buffer.alloc(0)).equals(this.material.ca ?? Buffer.alloc(0));
    this.material = next;
    for (const fn of this.listeners) {
      try {
        fn(next);
      } catch (err) {
        return { ok: false, error: `applying the reloaded certificates failed: ${(err as Error).message}` };
      }
    }
    return { ok: true, info: next.info, changed };
  }
}

/** What a listener's `setSecureContext` takes: the material only (requestCert stays as created). */
export function secureContextOptions(m: TlsMaterial): SecureContextOptions {
  return { cert: m.cert, key: m.key, ca: m.ca, minVersion: 'TLSv1.2' };
}

/** Options of a client-facing TLS server (RESP or HTTPS). */
export function serverTlsOptions(m: TlsMaterial, clientAuth: ClientAuth): TlsOptions {
  return {
    ...secureContextOptions(m),
    requestCert: clientAuth !== 'none',
    rejectUnauthorized: clientAuth === 'require',
  };
}

/** The client-facing TLS of a listener: the material (reloadable) and the client-certificate policy. */
export interface ListenerTls {
  source: ReloadableTls;
  clientAuth: ClientAuth;
}

/**
 * `--tls-client-auth request`: a client may come without a certificate, but one that shows a
 * certificate the CA did not sign is refused (Node alone would let it in, unverified).
 */
export function showsUnverifiedCertificate(socket: TLSSocket): boolean {
  if (socket.authorized) return false;
  const cert = socket.getPeerCertificate();
  return cert !== null && typeof cert === 'object' && Object.keys(cert).length > 0;
}
