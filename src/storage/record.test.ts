import { crc32c } from '@node-rs/crc32';
import { Packr } from 'msgpackr';
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
import {
  checkPreamble,
  encodeFrame,
  FRAME_HEADER_BYTES,
  frameOf,
  RecordType,
  readFrame,
  SEGMENT_PREAMBLE_BYTES,
  segmentFormat,
  segmentPreamble,
  WAL_FORMAT_VERSION,
} from './record.js';

describe('record framing', () => {
  it('round-trips a frame and reports the next offset', () => {
    const a = encodeFrame(RecordType.hardState, Buffer.from([1, 2, 3]));
    const b = encodeFrame(RecordType.entries, Buffer.from([0x90]));
    const buf = Buffer.concat([a, b]);
    expect(a.length).toBe(FRAME_HEADER_BYTES + 3);
    expect(FRAME_HEADER_BYTES).toBe(13);
    const r1 = readFrame(buf, 0);
    expect(r1).toMatchObject({ kind: 'ok', type: RecordType.hardState, next: a.length });
    if (r1.kind === 'ok') expect([...r1.payload]).toEqual([1, 2, 3]);
    const r2 = readFrame(buf, a.length);
    expect(r2).toMatchObject({ kind: 'ok', type: RecordType.entries, next: buf.length });
    expect(readFrame(buf, buf.length)).toEqual({ kind: 'end' });
  });

  it('reports a flipped bit anywhere in a complete frame as bad, never as incomplete', () => {
    const frame = encodeFrame(RecordType.snapshot, Buffer.from('payload bytes'));
    for (let i = 0; i < frame.length; i++) {
      for (let bit = 0; bit < 8; bit++) {
        const copy = Buffer.from(frame);
        copy[i] = copy[i]! ^ (1 << bit);
        const r = readFrame(copy, 0);
        expect(r.kind, `byte ${i} bit ${bit}`).toBe('bad');
        if (r.kind === 'bad')
          expect(r.reason).toMatch(i < FRAME_HEADER_BYTES ? /^frame header checksum/ : /^payload checksum/);
      }
    }
  });

  it('reports a frame cut short anywhere as incomplete, whatever its payload holds', () => {
    // The payload holds a whole valid frame: it must not matter.
    const inner = encodeFrame(RecordType.hardState, Buffer.from([0x93, 1, 2, 3]));
    const frame = encodeFrame(RecordType.entries, Buffer.concat([Buffer.from([0x91]), inner, inner]));
    for (let cut = 1; cut < frame.length; cut++) {
      expect(readFrame(frame.subarray(0, cut), 0).kind, `cut at ${cut}`).toBe('incomplete');
    }
  });

  it('treats zeros after a damaged header as unwritten (incomplete), and anything else as bad', () => {
    const frame = encodeFrame(RecordType.hardState, Buffer.from([0x93, 1, 2, 3]));
    // A header written in part, then bytes the file system extended the file with but never filled.
    for (let written = 0; written < FRAME_HEADER_BYTES; written++) {
      const buf = Buffer.concat([frame.subarray(0, written), Buffer.alloc(4096 - written)]);
      // When the unwritten header bytes were zeros anyway, the header is whole: see the last case.
      const whole = buf.subarray(0, FRAME_HEADER_BYTES).equals(frame.subarray(0, FRAME_HEADER_BYTES));
      expect(readFrame(buf, 0).kind, `${written} header bytes then zeros`).toBe(whole ? 'bad' : 'incomplete');
    }
    expect(readFrame(Buffer.alloc(FRAME_HEADER_BYTES), 0).kind).toBe('incomplete');
    // A damaged header with any non-zero byte after it is not an unwritten tail.
    const damaged = Buffer.concat([Buffer.alloc(FRAME_HEADER_BYTES), Buffer.from([0, 0, 1, 0])]);
    expect(readFrame(damaged, 0).kind).toBe('bad');
    // A valid header whose payload is complete but zero-filled is bad: the frame is complete.
    const zeroPayload = Buffer.from(frame);
    zeroPayload.fill(0, FRAME_HEADER_BYTES);
    expect(readFrame(zeroPayload, 0)).toMatchObject({ kind: 'bad', reason: /^payload checksum/ });
  });

  it('refuses a header with a valid checksum but an unknown type or an oversized length as bad', () => {
    expect(readFrame(frameOf(200, Buffer.from([9])), 0)).toEqual({
      kind: 'bad',
      reason: 'unknown record type 200',
    });
    expect(readFrame(frameOf(0, Buffer.from([9])), 0)).toMatchObject({ kind: 'bad' });
    const huge = frameOf(RecordType.entries, Buffer.from([9]));
    huge.writeUInt32LE(300 * 1024 * 1024, 4);
    huge.writeUInt32LE(crc32c(huge.subarray(4, FRAME_HEADER_BYTES)), 0);
    expect(readFrame(huge, 0)).toMatchObject({ kind: 'bad', reason: /exceeds the .*-byte limit/ });
  });

  it('checks the segment preamble and names an old or foreign format', () => {
    const p = segmentPreamble();
    expect(p.length).toBe(SEGMENT_PREAMBLE_BYTES);
    expect(p.toString('latin1')).toBe(`FLOEWAL${String.fromCharCode(WAL_FORMAT_VERSION)}`);
    expect(checkPreamble(Buffer.concat([p, Buffer.from([1, 2])]))).toBeUndefined();
    expect(WAL_FORMAT_VERSION).toBe(4);
    const v = Buffer.from(p);
    v[7] = 2; // format 2 is still read
    expect(checkPreamble(v)).toBeUndefined();
    expect(segmentFormat(v)).toBe(2);
    v[7] = 3;
    expect(checkPreamble(v)).toBe('WAL format version 3; this build reads versions 2 and 4');
    // No single flipped bit turns one readable version byte into another.
    for (const readable of [2, 4]) {
      for (let bit = 0; bit < 8; bit++) {
        v[7] = readable ^ (1 << bit);
        expect(checkPreamble(v), `${readable} with bit ${bit} flipped`).toMatch(/^WAL format version/);
      }
    }
    // A format-1 segment: [crc32c over the rest | length | type 1 | payload].
    const payload = Buffer.from([0x98, 1, 1, 1, 0, 0x93, 0, 0, 0]);
    const old = Buffer.alloc(9 + payload.length);
    old.writeUInt32LE(payload.length, 4);
    old[8] = 1;
    payload.copy(old, 9);
    old.writeUInt32LE(crc32c(old.subarray(4)), 0);
    expect(checkPreamble(old)).toMatch(/^segment is in WAL format 1 .* no upgrade path/);
    expect(checkPreamble(Buffer.from('hello, world'))).toMatch(/^not a Floe WAL segment/);
    expect(checkPreamble(Buffer.alloc(0))).toMatch(/^not a Floe WAL segment/);
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

  it('round-trips a conf entry with its resulting membership, with and without context (format 4)', () => {
    const entries: Entry[] = [
      {
        type: 'conf',
        index: 1,
        term: 1,
        change: { type: 'addLearner', nodeId: 4, resulting: { voters: [1, 2, 3], learners: [4] } },
      },
      {
        type: 'conf',
        index: 2,
        term: 1,
        change: {
          type: 'addVoter',
          nodeId: 4,
          context: new Uint8Array([7, 0]),
          resulting: { voters: [1, 2, 3, 4], learners: [] },
        },
      },
      {
        type: 'conf',
        index: 3,
        term: 1,
        change: { type: 'remove', nodeId: 1, resulting: { voters: [], learners: [] } },
      },
    ];
    expect(decodeEntries(encodeEntries(entries), 4)).toEqual(entries);
    expect(decodeEntries(encodeEntries(entries))).toEqual(entries);
  });

  it('reads format-2 conf rows (no resulting membership), and refuses a 7-field row in a format-2 segment', () => {
    // Without `resulting`, a row keeps its format-2 shape: 5 fields, or 6 with a context.
    const old: Entry[] = [
      { type: 'conf', index: 1, term: 1, change: { type: 'addVoter', nodeId: 4 } },
      {
        type: 'conf',
        index: 2,
        term: 1,
        change: { type: 'remove', nodeId: 2, context: new Uint8Array([1]) },
      },
    ];
    expect(decodeEntries(encodeEntries(old), 2)).toEqual(old);
    expect(decodeEntries(encodeEntries(old), 4)).toEqual(old);
    const withResulting = encodeEntries([
      {
        type: 'conf',
        index: 1,
        term: 1,
        change: { type: 'addVoter', nodeId: 4, resulting: { voters: [4], learners: [] } },
      },
    ]);
    expect(() => decodeEntries(withResulting, 2)).toThrow(/entry 1: unknown entry kind 1 \(7 fields\)/);
  });

  it('refuses a malformed resulting membership, naming the entry and the field', () => {
    const row = (resulting: unknown) =>
      Buffer.from(new Packr({ useRecords: false }).pack([[1, 1, 1, 1, 4, null, resulting]]));
    expect(() => decodeEntries(row([[1, 2]]))).toThrow(
      /entry 1: conf change resulting is not a \[voters, learners\] tuple/,
    );
    expect(() => decodeEntries(row([[1, 0], []]))).toThrow(
      /entry 1: resulting voters holds 0; expected positive integer node IDs/,
    );
    expect(() => decodeEntries(row([[1], 'x']))).toThrow(/entry 1: resulting learners is not a list/);
    expect(() => decodeEntries(row([[1], []]))).not.toThrow();
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
