import type { NodeId } from '../raft/types.js';
import { bugOn } from '../testing/bug-switches.js';
import { WIRE_VERSION } from './codec.js';
import { HandshakeError, type HandshakeRejectReason, ProtocolError } from './errors.js';
import { encodeFrame, FrameKind } from './frame.js';
import type { FramedSocket } from './framed-socket.js';
import {
  type Channel,
  computeProof,
  decodeAuth,
  decodeHello,
  encodeChallenge,
  encodeReject,
  encodeRemovedReject,
  type HandshakeContext,
  newNonce,
  proofMatches,
} from './handshake.js';
import { defaultTimers, type TransportTimers } from './timers.js';

export interface AcceptParams {
  key: Buffer;
  clusterId: string;
  selfId: NodeId;
  timeoutMs: number;
  maxFrameBytes: number;
  isKnownPeer(id: NodeId): boolean;
  /**
   * The log index at which this node applied the removal of `id` (a non-peer), or undefined: a dialer
   * it names gets the "removed" verdict after its AUTH proof, instead of `unknownNode` at HELLO (FS-23).
   */
  removedAt?(id: NodeId): number | undefined;
  /**
   * Registers the authenticated connection as (peer, channel); false when another authenticated
   * connection already holds that claim (the new one is refused).
   */
  claim(peer: NodeId, channel: Channel, conn: FramedSocket): boolean;
  onAccepted(peer: NodeId, channel: Channel, conn: FramedSocket): void;
  onRejected(err: HandshakeError, claimedPeer: NodeId | undefined): void;
  /** Default Node's global timers. */
  timers?: TransportTimers;
  /** Nonce bytes. Default crypto.randomBytes. */
  randomBytes?: (n: number) => Buffer;
}

/**
 * Runs the listener's half of the handshake (see handshake.ts) on a fresh connection. A connection
 * that fails any check gets a REJECT frame with the reason and is closed; it never reaches the Raft
 * core. Exactly one of onAccepted / onRejected is called (onRejected also for a connection that
 * simply goes away before finishing).
 */
export function acceptHandshake(conn: FramedSocket, p: AcceptParams): void {
  let done = false;
  let claimed: NodeId | undefined;
  const timers = p.timers ?? defaultTimers;
  const fail = (reason: HandshakeRejectReason, message: string, payload = encodeReject(reason)) => {
    if (done) return;
    done = true;
    timers.clearTimeout(timer);
    const err = new HandshakeError(reason, message);
    p.onRejected(err, claimed);
    if (!conn.isClosed) {
      conn.write(encodeFrame(FrameKind.reject, payload));
      conn.endGracefully(err);
    }
  };
  const removedAt = (id: NodeId): number | undefined => {
    const r = id === p.selfId ? undefined : p.removedAt?.(id);
    return r !== undefined && Number.isSafeInteger(r) && r >= 1 ? r : undefined;
  };
  const timer = timers.setTimeout(
    () => fail('timeout', `handshake did not finish within ${p.timeoutMs} ms (handshakeTimeoutMs)`),
    p.timeoutMs,
  );
  conn.onClose((cause) => {
    timers.clearTimeout(timer);
    if (done) return;
    done = true;
    const err =
      cause instanceof HandshakeError
        ? cause
        : new HandshakeError(
            cause instanceof ProtocolError ? 'protocol' : 'closed',
            `connection ended during the handshake${cause ? `: ${cause.message}` : ''}`,
          );
    p.onRejected(err, claimed);
  });

  let ctx: HandshakeContext | undefined;
  conn.setHandler((kind, payload) => {
    if (done) return;
    try {
      if (ctx === undefined) {
        if (kind !== FrameKind.hello) throw new ProtocolError(`expected HELLO, got frame kind ${kind}`);
        const hello = decodeHello(payload);
        claimed = hello.dialerId;
        if (hello.version !== WIRE_VERSION) {
          return fail(
            'version',
            `peer speaks wire version ${hello.version}; this node speaks ${WIRE_VERSION}`,
          );
        }
        if (hello.clusterId !== p.clusterId) {
          return fail('clusterId', `peer claims cluster id ${JSON.stringify(hello.clusterId)}, not ours`);
        }
        if (hello.listenerId !== p.selfId) {
          return fail('wrongNode', `peer dialed node ${hello.listenerId}, but this is node ${p.selfId}`);
        }
        // A removed id goes on to prove the secret before it is told so; any other stranger is refused here,
        // before either side has proved anything.
        if (
          hello.dialerId === p.selfId ||
          (!p.isKnownPeer(hello.dialerId) && removedAt(hello.dialerId) === undefined)
        ) {
          return fail('unknownNode', `node id ${hello.dialerId} is not a peer of node ${p.selfId}`);
        }
        ctx = {
          clusterId: p.clusterId,
          dialerId: hello.dialerId,
          listenerId: p.selfId,
          channel: hello.channel,
          dialerNonce: hello.nonce,
          listenerNonce: newNonce(p.randomBytes),
        };
        conn.write(
          encodeFrame(
            FrameKind.challenge,
            encodeChallenge(ctx.listenerNonce, computeProof(p.key, 'listener', ctx)),
          ),
        );
        return;
      }
      if (kind !== FrameKind.auth) throw new ProtocolError(`expected AUTH, got frame kind ${kind}`);
      const proof = decodeAuth(payload);
      if (!bugOn('transport-skip-proof') && !proofMatches(p.key, 'dialer', ctx, proof)) {
        return fail(
          'badProof',
          `peer claiming node ${ctx.dialerId} could not prove it knows the cluster secret`,
        );
      }
      // Re-checked at the end: the peer may have been removed while we were talking.
      if (!p.isKnownPeer(ctx.dialerId)) {
        const at = removedAt(ctx.dialerId);
        if (at === undefined) {
          return fail('unknownNode', `node id ${ctx.dialerId} is not a peer of node ${p.selfId}`);
        }
        return fail(
          'removed',
          `node ${ctx.dialerId} was removed from the cluster (at log index ${at}); told so`,
          encodeRemovedReject(at, computeProof(p.key, 'removed', ctx, { removedAt: at })),
        );
      }
      if (!p.claim(ctx.dialerId, ctx.channel, conn)) {
        return fail(
          'duplicate',
          `node ${ctx.dialerId} already has an authenticated ${ctx.channel} connection; refusing a second one`,
        );
      }
      done = true;
      timers.clearTimeout(timer);
      conn.setHandler(() => {});
      conn.setMaxFrameBytes(p.maxFrameBytes);
      conn.write(encodeFrame(FrameKind.accept));
      p.onAccepted(ctx.dialerId, ctx.channel, conn);
    } catch (err) {
      if (err instanceof ProtocolError) return fail('protocol', `handshake: ${err.message}`);
      throw err;
    }
  });
}
