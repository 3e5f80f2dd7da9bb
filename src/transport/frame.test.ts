import { crc32c } from '@node-rs/crc32';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import {
  encodeFrame,
  encodeFrameHeader,
  encodeFrameTrailer,
  FrameDecoder,
  type FrameKindCode,
} from './frame.js';

/** A frame's 8-byte prefix for length L, with L's checksum right (what a well-behaved peer sends). */
function prefix(length: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt32BE(length, 0);
  b.writeUInt32BE(crc32c(b.subarray(0, 4)) >>> 0, 4);
  return b;
}

function decodeAll(decoder: FrameDecoder, pieces: Buffer[]): { kind: number; payload: number[] }[] {
  const out: { kind: number; payload: number[] }[] = [];
  for (const p of pieces)
    decoder.push(p, (kind, payload) => out.push({ kind, payload: Array.from(payload) }));
  return out;
}

describe('frame codec', () => {
  it('reassembles any sequence of frames split at arbitrary points', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ kind: fc.integer({ min: 1, max: 12 }), payload: fc.uint8Array({ maxLength: 300 }) }),
          {
            maxLength: 20,
          },
        ),
        fc.array(fc.integer({ min: 1, max: 50 }), { maxLength: 40 }),
        (frames, cuts) => {
          const stream = Buffer.concat(frames.map((f) => encodeFrame(f.kind as FrameKindCode, f.payload)));
          const pieces: Buffer[] = [];
          let at = 0;
          for (const c of cuts) {
            if (at >= stream.length) break;
            pieces.push(stream.subarray(at, at + c));
            at += c;
          }
          if (at < stream.length) pieces.push(stream.subarray(at));
          const decoder = new FrameDecoder(1024);
          expect(decodeAll(decoder, pieces)).toEqual(
            frames.map((f) => ({ kind: f.kind, payload: Array.from(f.payload) })),
          );
          expect(decoder.bufferedBytes).toBe(0);
        },
      ),
    );
  });

  it('keeps a partial frame buffered until the rest arrives', () => {
    const frame = encodeFrame(8, Buffer.from('hello'));
    const decoder = new FrameDecoder(64);
    expect(decodeAll(decoder, [frame.subarray(0, 3), frame.subarray(3, 7)])).toEqual([]);
    expect(decoder.bufferedBytes).toBe(7);
    expect(decodeAll(decoder, [frame.subarray(7)])).toEqual([
      { kind: 8, payload: Array.from(Buffer.from('hello')) },
    ]);
  });

  it('writes the header separately with the same bytes as a whole frame', () => {
    const payload = Buffer.from([1, 2, 3]);
    const pieces = [encodeFrameHeader(10, 3), payload.subarray(0, 1), payload.subarray(1)];
    pieces.push(encodeFrameTrailer(10, pieces[1]!, pieces[2]!));
    expect(Buffer.concat(pieces)).toEqual(encodeFrame(10, payload));
  });

  it('rejects an oversized length prefix as soon as the 8 prefix bytes arrive, before any payload', () => {
    expect(() => new FrameDecoder(1024).push(prefix(0xffffffff), () => {})).toThrow(ProtocolError);
    expect(() => new FrameDecoder(1024).push(prefix(1025), () => {})).toThrow(
      /1025 exceeds the limit of 1024/,
    );
  });

  it('accepts a frame of exactly the limit and rejects one byte more', () => {
    const ok = encodeFrame(8, new Uint8Array(1023));
    expect(decodeAll(new FrameDecoder(1024), [ok])).toHaveLength(1);
    const tooBig = encodeFrame(8, new Uint8Array(1024));
    expect(() => decodeAll(new FrameDecoder(1024), [tooBig])).toThrow(ProtocolError);
  });

  it('rejects a zero length prefix (a frame has at least its kind byte)', () => {
    expect(() => new FrameDecoder(1024).push(prefix(0), () => {})).toThrow(/length prefix is 0/);
  });

  // Regression (FS-17, full-stack simulator, swarm seed 700648): a corrupted length prefix that still fit under the
  // limit left the receiver waiting for a body that never came, deaf to its peer until the idle timeout (10 s): no
  // leader for 10 s after healing. The length's own checksum refuses it at once.
  it('refuses a length prefix corrupted to any value under the limit as soon as its 8 bytes arrive', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 0, max: 31 }), (len, bit) => {
        const frame = Buffer.from(encodeFrame(8, new Uint8Array(len - 1)));
        frame.writeUInt32BE((frame.readUInt32BE(0) ^ (1 << bit)) >>> 0, 0);
        // Only the prefix has arrived: a receiver that trusted it would wait for the body.
        expect(() => new FrameDecoder(1 << 30).push(frame.subarray(0, 8), () => {})).toThrow(
          /frame length checksum mismatch/,
        );
      }),
      { numRuns: 500 },
    );
  });

  it('refuses a frame of the previous wire version (no length checksum) at its first 8 bytes', () => {
    const v2 = Buffer.concat([Buffer.from([0, 0, 0, 6, 1]), Buffer.from('hello'), Buffer.alloc(4)]);
    expect(() => new FrameDecoder(1024).push(v2, () => {})).toThrow(/another wire version/);
  });

  // Regression (found by the full-stack simulator, peer-corrupt-delivered): a frame corrupted in transit past TCP's
  // checksum was delivered as a different, well-formed frame — a follower persisted an entry its leader never wrote.
  it('never delivers a frame with a bit flipped anywhere in it (the frame checksum refuses it)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.uint8Array({ maxLength: 200 }),
        fc.nat(),
        (kind, payload, at) => {
          const frame = Buffer.from(encodeFrame(kind as FrameKindCode, payload));
          const bit = at % (frame.length * 8);
          frame[bit >> 3] = (frame[bit >> 3] as number) ^ (1 << (bit & 7));
          const got: number[] = [];
          try {
            new FrameDecoder(1024).push(frame, (k) => got.push(k));
          } catch (err) {
            expect(err).toBeInstanceOf(ProtocolError);
          }
          expect(got).toEqual([]);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('reads a length prefix split across chunks', () => {
    const frame = encodeFrame(7, Buffer.alloc(300, 1));
    const decoder = new FrameDecoder(1024);
    const got = decodeAll(decoder, [
      frame.subarray(0, 1),
      frame.subarray(1, 2),
      frame.subarray(2, 3),
      frame.subarray(3),
    ]);
    expect(got).toHaveLength(1);
    expect(got[0]!.payload).toHaveLength(300);
  });
});
