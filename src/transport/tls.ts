import { connect as tlsConnect, createServer as tlsCreateServer } from 'node:tls';
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

/**
 * Mutual TLS for the peer transport: both sides present a certificate signed by `ca`, and
 * connections without one are refused by TLS before the cluster-secret handshake even starts
 * (which still runs inside the TLS session). Pass as `socketFactory` to PeerTransport.start.
 * Certificate reload and rotation are not handled here: restart the transport with new material.
 */
export function tlsSocketFactory(o: PeerTlsOptions): SocketFactory {
  return {
    connect: (target, onReady) =>
      tlsConnect(
        {
          host: target.host,
          port: target.port,
          ca: o.ca,
          cert: o.cert,
          key: o.key,
          servername: o.servername,
          rejectUnauthorized: true,
          minVersion: 'TLSv1.3',
        },
        onReady,
      ),
    createServer: (onSocket) =>
      tlsCreateServer(
        {
          ca: o.ca,
          cert: o.cert,
          key: o.key,
          requestCert: true,
          rejectUnauthorized: true,
          minVersion: 'TLSv1.3',
        },
        onSocket,
      ),
  };
}
