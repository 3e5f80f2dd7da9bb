import { describe, expect, it } from 'vitest';
import { decodeFrames, encodeFrame } from './spill-format.js';

describe('spill frames', () => {
  it('round-trips frames', () => {
    const buf = Buffer.concat([encodeFrame(['{"a":1}', '{"a":2}']), encodeFrame(['{"b":"é"}'])]);
    const { frames, corruption } = decodeFrames(buf);
    expect(corruption).toBeUndefined();
    expect(frames.map((f) => [f.offset, f.rows, f.payload.toString()])).toEqual([
      [0, 2, '{"a":1}\n{"a":2}\n'],
      [32, 1, '{"b":"é"}\n'],
    ]);
  });

  it('reports the offset of a flipped byte, keeping the frames before it', () => {
    const a = encodeFrame(['{"a":1}']);
    const b = encodeFrame(['{"a":2}']);
    const buf = Buffer.concat([a, b, encodeFrame(['{"a":3}'])]);
    buf.writeUInt8(buf.readUInt8(a.length + 18) ^ 0x01, a.length + 18);
    const { frames, corruption } = decodeFrames(buf);
    expect(frames).toHaveLength(1);
    expect(corruption).toEqual({ offset: a.length, reason: 'CRC mismatch' });
  });

  it('reports a torn tail and bad magic', () => {
    const a = encodeFrame(['{"a":1}']);
    expect(decodeFrames(Buffer.concat([a, a.subarray(0, 20)])).corruption).toMatchObject({
      offset: a.length,
      reason: expect.stringMatching(/truncated frame/),
    });
    expect(decodeFrames(Buffer.concat([a, Buffer.from('garbage-garbage-garbage')])).corruption).toMatchObject(
      {
        offset: a.length,
        reason: expect.stringMatching(/bad frame magic/),
      },
    );
  });
});
