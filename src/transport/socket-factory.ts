import { type AddressInfo, createServer, connect as netConnect, type Server, type Socket } from 'node:net';

/**
 * What the transport uses of a connected socket: a net.Socket (or tls.TLSSocket) is one; a simulator
 * can pass its own (src/sim/full/peer-net.ts).
 */
export interface PeerSocket {
  readonly destroyed: boolean;
  /** Bytes accepted by write() but not yet handed to the kernel. */
  readonly writableLength: number;
  readonly remoteAddress?: string | undefined;
  readonly remotePort?: number | undefined;
  write(data: Uint8Array): boolean;
  cork(): void;
  uncork(): void;
  end(): unknown;
  end(data: Uint8Array): unknown;
  destroy(): unknown;
  setNoDelay(noDelay?: boolean): unknown;
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'end' | 'close' | 'drain', listener: () => void): unknown;
  once(event: 'close' | 'drain', listener: () => void): unknown;
}

/** What the transport uses of its listening server (a net.Server or tls.Server is one). */
export interface PeerServer {
  listen(options: { host: string; port: number }, onListening: () => void): unknown;
  address(): AddressInfo | string | null;
  close(onClosed: () => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  once(event: 'error', listener: (err: Error) => void): unknown;
  off(event: 'error', listener: (err: Error) => void): unknown;
}

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
export interface SocketFactory<S extends PeerSocket = Socket, L extends PeerServer = Server> {
  /**
   * Dials a peer and calls onReady once application bytes may be written (TCP 'connect', TLS
   * 'secureConnect'). Failures surface as the socket's 'error' and 'close' events.
   */
  connect(target: { host: string; port: number }, onReady: () => void): S;
  /** A server that calls onSocket for every connection that is ready for application bytes. */
  createServer(onSocket: (socket: S) => void): L;
}

/** Any factory the transport can use: net or tls sockets, or a simulator's. */
export type AnySocketFactory = SocketFactory<PeerSocket, PeerServer>;

export const defaultSocketFactory: SocketFactory = {
  connect: (target, onReady) => netConnect({ host: target.host, port: target.port }, onReady),
  createServer: (onSocket) => createServer({ noDelay: true }, onSocket),
};
