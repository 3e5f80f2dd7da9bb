import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';

/**
 * How the transport makes its sockets. Plain TCP by default. TLS slots in without touching the rest
 * of the transport, because tls.TLSSocket is a net.Socket and tls.Server is a net.Server:
 *
 *   const tlsFactory: SocketFactory = {
 *     connect: (t, onReady) => tls.connect({ host: t.host, port: t.port, ca, cert, key, servername }, onReady),
 *     createServer: (onSocket) => tls.createServer({ ca, cert, key, requestCert: true }, onSocket),
 *   };
 *
 * The cluster-secret handshake then runs inside the TLS session, unchanged.
 */
export interface SocketFactory {
  /**
   * Dials a peer and calls onReady once application bytes may be written (TCP 'connect', TLS
   * 'secureConnect'). Failures surface as the socket's 'error' and 'close' events.
   */
  connect(target: { host: string; port: number }, onReady: () => void): Socket;
  /** A server that calls onSocket for every connection that is ready for application bytes. */
  createServer(onSocket: (socket: Socket) => void): Server;
}

export const defaultSocketFactory: SocketFactory = {
  connect: (target, onReady) => netConnect({ host: target.host, port: target.port }, onReady),
  createServer: (onSocket) => createServer({ noDelay: true }, onSocket),
};
