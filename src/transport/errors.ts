/**
 * Errors of the peer transport. Configuration errors are thrown by `PeerTransport.start` and name the
 * option, the allowed range and the value given. Wire errors never escape the transport: they close the
 * offending connection and are logged and counted (see stats()).
 */
export class TransportError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** An option passed to PeerTransport.start / addPeer is out of its allowed range. */
export class TransportOptionError extends TransportError {
  constructor(
    readonly option: string,
    readonly allowed: string,
    readonly value: unknown,
  ) {
    super(
      'ERR_TRANSPORT_OPTION',
      `invalid transport option: ${option} = ${show(value)}; allowed: ${allowed}`,
    );
  }
}

/**
 * A peer sent bytes that break the protocol: a bad length prefix, an unknown frame kind, invalid
 * msgpack, a message of the wrong shape, a frame that is not allowed in the connection's state.
 * The connection that carried it is closed.
 */
export class ProtocolError extends TransportError {
  constructor(message: string) {
    super('ERR_PEER_PROTOCOL', message);
  }
}

/** The handshake failed: the peer could not prove it belongs to this cluster, or it was refused. */
export class HandshakeError extends TransportError {
  constructor(
    /** Stable reason code, also sent to the dialing side in a REJECT frame. */
    readonly reason: HandshakeRejectReason,
    message: string,
  ) {
    super('ERR_PEER_HANDSHAKE', message);
  }
}

/**
 * A member told this node, under the cluster secret, that it applied this node's removal (FS-23): the
 * listener's CHALLENGE proof and the verdict's own proof both held. The dialer reports it to the node.
 */
export class RemovedVerdictError extends HandshakeError {
  constructor(
    /** The member that said so. */
    readonly by: number,
    /** The log index of the committed removal. */
    readonly removedAt: number,
  ) {
    super(
      'removed',
      `node ${by} says this node was removed from the cluster (removal at log index ${removedAt})`,
    );
  }
}

/**
 * A "removed" REJECT that is not believed: sent before the listener proved the secret, malformed, or with a
 * proof that does not hold. Ignored (a refusal like any other), logged and counted.
 */
export class ForgedVerdictError extends HandshakeError {
  constructor(message: string) {
    super('badProof', message);
  }
}

export type HandshakeRejectReason =
  | 'version'
  | 'clusterId'
  | 'wrongNode'
  | 'unknownNode'
  /** The dialer's id was removed from the cluster (a verdict: sent only after its AUTH proof held). */
  | 'removed'
  | 'badProof'
  | 'duplicate'
  | 'timeout'
  | 'protocol'
  | 'busy'
  | 'closed';

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value instanceof Uint8Array) return `<${value.length} bytes>`;
  try {
    return String(value);
  } catch {
    return '<unprintable>';
  }
}
