import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { NodeId } from '../raft/types.js';
import { pack, TupleReader, unpack, WIRE_VERSION } from './codec.js';
import { type HandshakeRejectReason, ProtocolError } from './errors.js';

/**
 * Mutual challenge–response over a shared cluster secret (the secret never crosses the wire):
 *
 *   dialer → listener   HELLO     [version, clusterId, dialerId, listenerId, channel, nonceD]
 *   listener → dialer   CHALLENGE [nonceL, proofL]     proofL = HMAC(secret, transcript("listener"))
 *   dialer → listener   AUTH      [proofD]             proofD = HMAC(secret, transcript("dialer"))
 *   listener → dialer   ACCEPT    []
 *
 * transcript(role) = "floe-peer-v2" | role | clusterId | dialerId | listenerId | channel | nonceD | nonceL,
 * each field length-prefixed so no two different field lists give the same bytes. The role label
 * keeps a listener's proof from ever being replayed as a dialer's proof. Nonces are 32 fresh random
 * bytes from each side, so a proof is worthless outside its own connection.
 *
 * The dialer checks the listener's proof before it sends its own, and sends no Raft data before
 * ACCEPT: a stray listener learns nothing it could replay. Either side answers a failure with
 * REJECT [reason] (or just closes) and the connection ends.
 *
 * The removal verdict (FS-23): a listener that applied the removal of the dialer's id (a tombstone)
 * answers a valid AUTH with REJECT ["removed", removedAt, proofV] instead of ACCEPT, where
 * proofV = HMAC(secret, transcript("removed") | removedAt). It is never sent before the dialer proved the
 * secret, and the dialer believes it only after it checked the listener's CHALLENGE proof and proofV.
 * Any other non-peer is refused at HELLO with REJECT ["unknownNode"]. Older dialers read only the
 * first element (the reason) and back off as after any refusal, so the wire version is unchanged.
 */
export const NONCE_BYTES = 32;
const PROOF_BYTES = 32;
/** Cluster ids are short names; this bounds what a stranger can make us hash and log. */
export const MAX_CLUSTER_ID_LENGTH = 128;
/** Limit on any frame before the peer has authenticated. */
export const HANDSHAKE_MAX_FRAME_BYTES = 1024;

/** A connection carries either Raft messages or one snapshot stream. */
export type Channel = 'msg' | 'snap';
const CHANNEL_CODES: Record<Channel, number> = { msg: 0, snap: 1 };

/** Whose proof: each role's label keeps a proof from standing in for another's. 'removed': a verdict. */
export type ProofRole = 'dialer' | 'listener' | 'removed';

export interface HandshakeContext {
  clusterId: string;
  dialerId: NodeId;
  listenerId: NodeId;
  channel: Channel;
  dialerNonce: Uint8Array;
  listenerNonce: Uint8Array;
}

export function newNonce(random: (n: number) => Buffer = randomBytes): Buffer {
  return random(NONCE_BYTES);
}

/** The secret as key bytes. */
export function secretKey(secret: string | Uint8Array): Buffer {
  return typeof secret === 'string' ? Buffer.from(secret, 'utf8') : Buffer.from(secret);
}

/** `verdict`: the removal index a 'removed' proof covers (only with that role). */
export function computeProof(
  key: Uint8Array,
  role: ProofRole,
  ctx: HandshakeContext,
  verdict?: { removedAt: number },
): Buffer {
  const h = createHmac('sha256', key);
  const field = (bytes: Uint8Array) => {
    const len = Buffer.allocUnsafe(4);
    len.writeUInt32BE(bytes.length, 0);
    h.update(len);
    h.update(bytes);
  };
  const text = (s: string) => field(Buffer.from(s, 'utf8'));
  text(`floe-peer-v${WIRE_VERSION}`);
  text(role);
  text(ctx.clusterId);
  text(String(ctx.dialerId));
  text(String(ctx.listenerId));
  text(ctx.channel);
  field(ctx.dialerNonce);
  field(ctx.listenerNonce);
  if (verdict) text(String(verdict.removedAt));
  return h.digest();
}

/** Constant-time check of a received proof against the expected one. */
export function proofMatches(
  key: Uint8Array,
  role: ProofRole,
  ctx: HandshakeContext,
  received: Uint8Array,
  verdict?: { removedAt: number },
): boolean {
  const expected = computeProof(key, role, ctx, verdict);
  return received.length === expected.length && timingSafeEqual(expected, received);
}

export interface Hello {
  version: number;
  clusterId: string;
  dialerId: NodeId;
  listenerId: NodeId;
  channel: Channel;
  nonce: Uint8Array;
}

export function encodeHello(h: Hello): Buffer {
  return pack([h.version, h.clusterId, h.dialerId, h.listenerId, CHANNEL_CODES[h.channel], h.nonce]);
}

export function decodeHello(bytes: Uint8Array): Hello {
  const t = new TupleReader(unpack(bytes), 'hello');
  t.length(6);
  const channelCode = t.int(4, 'channel');
  if (channelCode !== 0 && channelCode !== 1) {
    throw new ProtocolError(`hello: channel code ${channelCode}; allowed 0 (msg) or 1 (snap)`);
  }
  return {
    version: t.int(0, 'version'),
    clusterId: t.string(1, 'clusterId', MAX_CLUSTER_ID_LENGTH),
    dialerId: t.nodeId(2, 'dialerId'),
    listenerId: t.nodeId(3, 'listenerId'),
    channel: channelCode === 0 ? 'msg' : 'snap',
    nonce: fixedBytes(t, 5, 'nonce', NONCE_BYTES),
  };
}

export function encodeChallenge(nonce: Uint8Array, proof: Uint8Array): Buffer {
  return pack([nonce, proof]);
}

export function decodeChallenge(bytes: Uint8Array): { nonce: Uint8Array; proof: Uint8Array } {
  const t = new TupleReader(unpack(bytes), 'challenge');
  t.length(2);
  return { nonce: fixedBytes(t, 0, 'nonce', NONCE_BYTES), proof: fixedBytes(t, 1, 'proof', PROOF_BYTES) };
}

export function encodeAuth(proof: Uint8Array): Buffer {
  return pack([proof]);
}

export function decodeAuth(bytes: Uint8Array): Uint8Array {
  const t = new TupleReader(unpack(bytes), 'auth');
  t.length(1);
  return fixedBytes(t, 0, 'proof', PROOF_BYTES);
}

export function encodeReject(reason: HandshakeRejectReason): Buffer {
  return pack([reason]);
}

/** The removal verdict: REJECT ["removed", removedAt, proof] (see the top of this file). */
export function encodeRemovedReject(removedAt: number, proof: Uint8Array): Buffer {
  return pack(['removed' satisfies HandshakeRejectReason, removedAt, proof]);
}

/** The reason a listener gave; unknown or malformed reasons come back as 'protocol'. */
export function decodeReject(bytes: Uint8Array): string {
  try {
    const t = new TupleReader(unpack(bytes), 'reject');
    return t.string(0, 'reason', 32);
  } catch {
    return 'protocol';
  }
}

/** The index and proof of a "removed" REJECT. Throws ProtocolError when they are missing or malformed. */
export function decodeRemovedReject(bytes: Uint8Array): { removedAt: number; proof: Uint8Array } {
  const t = new TupleReader(unpack(bytes), 'removed verdict');
  t.length(3);
  const removedAt = t.int(1, 'removedAt');
  if (removedAt < 1) throw new ProtocolError(`removed verdict: removedAt ${removedAt} is not a log index`);
  return { removedAt, proof: fixedBytes(t, 2, 'proof', PROOF_BYTES) };
}

function fixedBytes(t: TupleReader, i: number, name: string, n: number): Uint8Array {
  const b = t.bytes(i, name);
  if (b.length !== n) throw new ProtocolError(`handshake: ${name} must be ${n} bytes, got ${b.length}`);
  return b;
}
