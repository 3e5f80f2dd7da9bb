export type { HandshakeRejectReason } from './errors.js';
export { HandshakeError, ProtocolError, TransportError, TransportOptionError } from './errors.js';
export { DEFAULTS, type PeerTransportOptions, type TransportLogger } from './options.js';
export { defaultSocketFactory, type SocketFactory } from './socket-factory.js';
export { type PeerTlsOptions, type ReloadableSocketFactory, tlsSocketFactory } from './tls.js';
export { type PeerStats, PeerTransport, type TransportEvents, type TransportStats } from './transport.js';
