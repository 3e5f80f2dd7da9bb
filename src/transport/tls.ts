import { type Server as TlsServer, connect as tlsConnect, createServer as tlsCreateServer } from 'node:tls';
import type { SocketFactory } from './socket-factory.js';

/** PEM material for mutual TLS between peers. */
export interface PeerTlsOptions {
  /** CA certificate(s) that sign every member's certificate. */
  ca: string | Buffer | (string | Buffer)[];
  /** This node's certificate chain and private key. */
  cert: string | Buffer;
  key: string | Buffer;
  /**
   * Name checked against the peer certificate when dialling; default: the host being dialled
   * (so certificates need the peer's address in their subjectAltName).
   */
  servername?: string;
}

/** A socket factory whose certificates can be replaced while it runs. */
export interface ReloadableSocketFactory extends SocketFactory {
  /**
   * New material for every later dial and every later accepted connection (servers made by this
   * factory switch with `setSecureContext`); open connections keep theirs.
   */
  update(o: PeerTlsOptions): void;
}

/**
 * Mutual TLS for the peer transport: both sides present a certificate signed by `ca`, and
 * connections without one are refused by TLS before the cluster-secret handshake even starts
 * (which still runs inside the TLS session). Pass as `socketFactory` to PeerTransport.start.
 * `update()` swaps the certificates (SIGHUP in `floe serve`).
 */
export function tlsSocketFactory(o: PeerTlsOptions): ReloadableSocketFactory {
  let current = o;
  const servers = new Set<TlsServer>();
  return {
    connect: (target, onReady) =>
      tlsConnect(
        {
          host: target.host,
          port: target.port,
          ca: current.ca,
          cert: current.cert,
          key: current.key,
          servername: current.servername,
          rejectUnauthorized: true,
          minVersion: 'TLSv1.3',
        },
        onReady,
      ),
    createServer: (onSocket) => {
      const server = tlsCreateServer(
        {
          ca: current.ca,
          cert: current.cert,
          key: current.key,
          requestCert: true,
          rejectUnauthorized: true,
          minVersion: 'TLSv1.3',
        },
        onSocket,
      );
      servers.add(server);
      server.once('close', () => servers.delete(server));
      return server;
    },
    update(next) {
      current = next;
      for (const s of servers)
        s.setSecureContext({ ca: next.ca, cert: next.cert, key: next.key, minVersion: 'TLSv1.3' });
    },
  };
}
