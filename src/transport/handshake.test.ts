import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import {
  computeProof,
  decodeAuth,
  decodeChallenge,
  decodeHello,
  encodeAuth,
  encodeChallenge,
  encodeHello,
  type HandshakeContext,
  NONCE_BYTES,
  newNonce,
  proofMatches,
  secretKey,
} from './handshake.js';

const key = secretKey('a-cluster-secret-of-some-length');
const ctx: HandshakeContext = {
  clusterId: 'c1',
  dialerId: 1,
  listenerId: 2,
  channel: 'msg',
  dialerNonce: Buffer.alloc(NONCE_BYTES, 1),
  listenerNonce: Buffer.alloc(NONCE_BYTES, 2),
};

describe('handshake proofs', () => {
  it('a proof verifies only for the same secret, role and transcript', () => {
    const proof = computeProof(key, 'dialer', ctx);
    expect(proofMatches(key, 'dialer', ctx, proof)).toBe(true);
    // The listener's proof can never stand in for the dialer's (no reflection).
    expect(proofMatches(key, 'listener', ctx, proof)).toBe(false);
    expect(proofMatches(secretKey('another-secret-of-some-length'), 'dialer', ctx, proof)).toBe(false);
    expect(proofMatches(key, 'dialer', ctx, proof.subarray(0, 31))).toBe(false);
    expect(proofMatches(key, 'dialer', ctx, new Uint8Array(0))).toBe(false);
  });

  it('changing any transcript field changes the proof', () => {
    const proof = computeProof(key, 'dialer', ctx);
    const variants: HandshakeContext[] = [
      { ...ctx, clusterId: 'c2' },
      { ...ctx, dialerId: 3 },
      { ...ctx, listenerId: 3 },
      { ...ctx, channel: 'snap' },
      { ...ctx, dialerNonce: Buffer.alloc(NONCE_BYTES, 3) },
      { ...ctx, listenerNonce: Buffer.alloc(NONCE_BYTES, 3) },
      // Field boundaries are unambiguous: moving a digit between ids is a different transcript.
      { ...ctx, dialerId: 12, listenerId: 2 },
    ];
    for (const v of variants) expect(proofMatches(key, 'dialer', v, proof)).toBe(false);
    expect(computeProof(key, 'dialer', { ...ctx, dialerId: 1, listenerId: 22 })).not.toEqual(
      computeProof(key, 'dialer', { ...ctx, dialerId: 12, listenerId: 2 }),
    );
  });

  it('nonces are fresh', () => {
    expect(newNonce()).toHaveLength(NONCE_BYTES);
    expect(newNonce().equals(newNonce())).toBe(false);
  });
});

describe('handshake frames', () => {
  it('round-trip', () => {
    const hello = {
      version: 1,
      clusterId: 'c',
      dialerId: 4,
      listenerId: 5,
      channel: 'snap' as const,
      nonce: newNonce(),
    };
    expect(decodeHello(encodeHello(hello))).toEqual({ ...hello, nonce: expect.any(Uint8Array) });
    expect(Buffer.from(decodeHello(encodeHello(hello)).nonce).equals(hello.nonce)).toBe(true);
    const nonce = newNonce();
    const proof = computeProof(key, 'listener', ctx);
    const c = decodeChallenge(encodeChallenge(nonce, proof));
    expect(Buffer.from(c.proof).equals(proof)).toBe(true);
    expect(Buffer.from(decodeAuth(encodeAuth(proof))).equals(proof)).toBe(true);
  });

  it('reject malformed handshakes with ProtocolError only', () => {
    const good = {
      version: 1,
      clusterId: 'c',
      dialerId: 4,
      listenerId: 5,
      channel: 'msg' as const,
      nonce: newNonce(),
    };
    expect(() => decodeHello(encodeHello({ ...good, nonce: Buffer.alloc(5) }))).toThrow(
      /nonce must be 32 bytes/,
    );
    expect(() => decodeHello(encodeHello({ ...good, clusterId: 'x'.repeat(500) }))).toThrow(/at most 128/);
    expect(() => decodeHello(encodeHello({ ...good, dialerId: 0 }))).toThrow(/positive node id/);
    expect(() => decodeAuth(encodeAuth(Buffer.alloc(31)))).toThrow(/proof must be 32 bytes/);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 120 }), (b) => {
        for (const decode of [decodeHello, decodeChallenge, decodeAuth]) {
          try {
            decode(b);
          } catch (err) {
            expect(err).toBeInstanceOf(ProtocolError);
          }
        }
      }),
      { numRuns: 1000 },
    );
  });
});
