import { crc32c } from '@node-rs/crc32';
import { describe, expect, it } from 'vitest';
import type { Entry } from '../raft/types.js';
import {
  decodeEntries,
  decodeHardState,
  decodeHeader,
  decodeMarker,
  encodeEntries,
  encodeHardState,
  encodeHeader,
  encodeMarker,
  PayloadError,
} from './payload.js';
import { encodeFrame, FRAME_HEADER_BYTES, hasValidFrameAfter, RecordType, readFrame } from './record.js';

describe('record framing', () => {
  it('round-trips a frame and reports the next offset', () => {
    const a = encodeFrame(RecordType.hardState, Buffer.from([1, 2, 3]));
    const b = encodeFrame(RecordType.entries, Buffer.alloc(0));
    const buf = Buffer.concat([a, b]);
    const r1 = readFrame(buf, 0);
    expect(r1).toMatchObject({ kind: 'ok', type: RecordType.hardState, next: a.length });
    if (r1.kind === 'ok') expect([...r1.payload]).toEqual([1, 2, 3]);
    const r2 = readFrame(buf, a.length);
    expect(r2).toMatchObject({ kind: 'ok', type: RecordType.entries, next: buf.length });
    expect(readFrame(buf, buf.length)).toEqual({ kind: 'end' });
  });

  it('detects a flipped bit anywhere in the frame (checksum covers length, type and payload)', () => {
    const frame = encodeFrame(RecordType.snapshot, Buffer.from('payload bytes'));
    for (let i = 0; i < frame.length; i++) {
      for (let bit = 0; bit < 8; bit++) {
        const copy = Buffer.from(frame);
        copy[i] = copy[i]! ^ (1 << bit);
        expect(readFrame(copy, 0).kind, `byte ${i} bit ${bit}`).toBe('bad');
      }
    }
  });

  it('reports a frame cut short as possibly torn', () => {
    const frame = encodeFrame(RecordType.entries, Buffer.alloc(20, 7));
    for (let cut = 1; cut < frame.length; cut++) {
      const r = readFrame(frame.subarray(0, cut), 0);
      expect(r).toMatchObject({ kind: 'bad', maybeTorn: true });
    }
  });

  it('rejects an unknown type with a valid checksum as not torn', () => {
    const frame = encodeFrame(RecordType.entries, Buffer.from([9]));
    frame[8] = 200;
    frame.writeUInt32LE(crc32c(frame.subarray(4)), 0);
    expect(readFrame(frame, 0)).toMatchObject({
      kind: 'bad',
      maybeTorn: false,
      reason: 'unknown record type 200',
    });
  });

  it('finds a valid frame hidden after garbage, and none in zeros', () => {
    const frame = encodeFrame(RecordType.hardState, Buffer.from([1]));
    const buf = Buffer.concat([Buffer.alloc(37, 0), frame, Buffer.alloc(5, 0)]);
    expect(hasValidFrameAfter(buf, 0)).toBe(true);
    expect(hasValidFrameAfter(buf, 38)).toBe(false);
    expect(hasValidFrameAfter(Buffer.alloc(4096, 0), 0)).toBe(false);
    expect(FRAME_HEADER_BYTES).toBe(9);
  });
});

describe('record payloads', () => {
  it('round-trips normal and conf entries (data comes back as plain Uint8Array)', () => {
    const entries: Entry[] = [
      { type: 'normal', index: 5, term: 2, data: new Uint8Array([1, 2, 3]) },
      { type: 'normal', index: 6, term: 2, data: new Uint8Array(0) },
      { type: 'conf', index: 7, term: 3, change: { type: 'addVoter', nodeId: 4 } },
      {
        type: 'conf',
        index: 8,
        term: 3,
        change: { type: 'remove', nodeId: 2, context: new Uint8Array([9]) },
      },
      { type: 'normal', index: 9, term: 2 ** 40, data: Buffer.from('buffer in') },
    ];
    const back = decodeEntries(encodeEntries(entries));
    expect(back.slice(0, 4)).toEqual(entries.slice(0, 4));
    const last = back[4]!;
    expect(last.type === 'normal' && Buffer.from(last.data).toString()).toBe('buffer in');
    expect(last.type === 'normal' && last.data.constructor).toBe(Uint8Array);
  });

  it('refuses entries that are not consecutive or not well formed', () => {
    const gap = encodeEntries([
      { type: 'normal', index: 1, term: 1, data: new Uint8Array(0) },
      { type: 'normal', index: 3, term: 1, data: new Uint8Array(0) },
    ]);
    expect(() => decodeEntries(gap)).toThrow(/not consecutive: 1 then 3/);
    expect(() => decodeEntries(Buffer.from([0xc1]))).toThrow(PayloadError);
    expect(() => decodeEntries(encodeHardState({ term: 1, vote: 1, commit: 1 }))).toThrow(PayloadError);
  });

  it('round-trips header, hard state and snapshot marker', () => {
    const h = {
      seq: 3,
      firstIndex: 1000,
      prevTerm: 4,
      hardState: { term: 5, vote: 2, commit: 990 },
      snapshot: { index: 900, term: 4, reset: true },
      bootstrapConf: { voters: [1, 2, 3], learners: [4] },
    };
    expect(decodeHeader(encodeHeader(h))).toEqual(h);
    expect(decodeHardState(encodeHardState({ term: 1, vote: 0, commit: 7 }))).toEqual({
      term: 1,
      vote: 0,
      commit: 7,
    });
    expect(decodeMarker(encodeMarker({ index: 2, term: 1, reset: false }))).toEqual({
      index: 2,
      term: 1,
      reset: false,
    });
    expect(() => decodeHardState(encodeMarker({ index: -1 as number, term: 1, reset: false }))).toThrow(
      PayloadError,
    );
  });
});
