import type { NodeId } from '../raft/types.js';
import { WIRE_VERSION } from './codec.js';
import { ForgedVerdictError, HandshakeError, ProtocolError, RemovedVerdictError } from './errors.js';
import { encodeFrame, FrameKind } from './frame.js';
import { FramedSocket } from './framed-socket.js';
import {
  type Channel,
  computeProof,
  decodeChallenge,
  decodeReject,
  decodeRemovedReject,
  encodeAuth,
  encodeHello,
  HANDSHAKE_MAX_FRAME_BYTES,
  type HandshakeContext,
  newNonce,
  proofMatches,
} from './handshake.js';
import type { AnySocketFactory } from './socket-factory.js';
import { defaultTimers, type TransportTimers } from './timers.js';

export interface DialParams {
  factory: AnySocketFactory;
  target: { host: string; port: number };
  key: Buffer;
  clusterId: string;
  selfId: NodeId;
  peerId: NodeId;
  channel: Channel;
  /** Connect + handshake must finish within this. */
  timeoutMs: number;
  /** Frame limit once authenticated. */
  maxFrameBytes: number;
  now: () => number;
  /** Called with the raw socket at once, so the owner can destroy it on close(). */
  track(socket: FramedSocket): void;
  /** Default Node's global timers. */
  timers?: TransportTimers;
  /** Nonce bytes. Default crypto.randomBytes. */
  randomBytes?: (n: number) => Buffer;
}

/**
 * Dials a peer and runs the dialer's half of the handshake (see handshake.ts). Resolves with an
 * authenticated connection; rejects with HandshakeError, ProtocolError or the socket's error, after
 * the socket is destroyed. A removal verdict whose proofs hold rejects with RemovedVerdictError; one
 * that cannot be believed with ForgedVerdictError.
 */
export function dialPeer(p: DialParams): Promise<FramedSocket> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const timers = p.timers ?? defaultTimers;
    const dialerNonce = newNonce(p.randomBytes);
    const socket = p.factory.connect(p.target, () => {
      const hello = encodeHello({
        version: WIRE_VERSION,
        clusterId: p.clusterId,
        dialerId: p.selfId,
        listenerId: p.peerId,
        channel: p.channel,
        nonce: dialerNonce,
      });
      conn.write(encodeFrame(FrameKind.hello, hello));
    });
    const conn = new FramedSocket(socket, HANDSHAKE_MAX_FRAME_BYTES, p.now, timers);
    p.track(conn);
    const timer = timers.setTimeout(() => {
      conn.close(
        new HandshakeError(
          'timeout',
          `connect and handshake did not finish within ${p.timeoutMs} ms (handshakeTimeoutMs)`,
        ),
      );
    }, p.timeoutMs);
    conn.onClose((cause) => {
      timers.clearTimeout(timer);
      if (settled) return;
      settled = true;
      reject(cause ?? new HandshakeError('closed', 'the peer closed the connection during the handshake'));
    });

    let ctx: HandshakeContext | undefined;
    const at = `peer ${p.peerId} at ${p.target.host}:${p.target.port}`;
    // Believed only from a listener that proved the secret (its CHALLENGE, checked before our AUTH went out)
    // and with a proof of its own over this connection's transcript and the index.
    const removedVerdict = (payload: Uint8Array): HandshakeError => {
      if (ctx === undefined)
        return new ForgedVerdictError(
          `${at} said this node was removed before it proved the cluster secret; ignored`,
        );
      let v: { removedAt: number; proof: Uint8Array };
      try {
        v = decodeRemovedReject(payload);
      } catch (err) {
        return new ForgedVerdictError(
          `${at} sent a malformed removal verdict (${(err as Error).message}); ignored`,
        );
      }
      if (!proofMatches(p.key, 'removed', ctx, v.proof, { removedAt: v.removedAt }))
        return new ForgedVerdictError(`${at} sent a removal verdict whose proof does not hold; ignored`);
      return new RemovedVerdictError(p.peerId, v.removedAt);
    };
    conn.setHandler((kind, payload) => {
      if (kind === FrameKind.reject) {
        const reason = decodeReject(payload);
        conn.close(
          reason === 'removed'
            ? removedVerdict(payload)
            : new HandshakeError('protocol', `peer ${p.peerId} refused the handshake: ${reason}`),
        );
        return;
      }
      if (ctx === undefined) {
        if (kind !== FrameKind.challenge)
          throw new ProtocolError(`handshake: expected CHALLENGE, got frame kind ${kind}`);
        const challenge = decodeChallenge(payload);
        ctx = {
          clusterId: p.clusterId,
          dialerId: p.selfId,
          listenerId: p.peerId,
          channel: p.channel,
          dialerNonce,
          listenerNonce: challenge.nonce,
        };
        if (!proofMatches(p.key, 'listener', ctx, challenge.proof)) {
          conn.close(new HandshakeError('badProof', `${at} could not prove it knows the cluster secret`));
          return;
        }
        conn.write(encodeFrame(FrameKind.auth, encodeAuth(computeProof(p.key, 'dialer', ctx))));
        return;
      }
      if (kind !== FrameKind.accept)
        throw new ProtocolError(`handshake: expected ACCEPT, got frame kind ${kind}`);
      timers.clearTimeout(timer);
      settled = true;
      conn.setHandler(() => {});
      conn.setMaxFrameBytes(p.maxFrameBytes);
      resolve(conn);
    });
  });
}
