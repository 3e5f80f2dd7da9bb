// WAL record framing. One frame on disk:
//
//   0        4        8    9
//   +--------+--------+----+------------------------+
//   | crc32c | length |type| payload (length bytes) |
//   +--------+--------+----+------------------------+
//
// crc32c (Castagnoli, little-endian u32) covers bytes [4, 9 + length): the length, the type and the
// payload, so a corrupted length is caught as surely as a corrupted payload.
import { crc32c } from '@node-rs/crc32';

export const FRAME_HEADER_BYTES = 9;

/** Largest payload a frame may carry. A length above it is treated as garbage, never allocated. */
export const MAX_PAYLOAD_BYTES = 256 * 1024 * 1024;

/** Record types. 0 is deliberately invalid so that zero-filled bytes never parse as a record. */
export const RecordType = {
  /** First record of every segment: where it starts and the state carried over from older segments. */
  segmentHeader: 1,
  /** A run of consecutive entries; on replay it replaces any entries at or after its first index. */
  entries: 2,
  /** term, vote, commit; the last one replayed wins. */
  hardState: 3,
  /** A snapshot at (index, term) is durable in snap/; `reset` when it replaced the log (sent by a leader). */
  snapshot: 4,
} as const;

export type RecordTypeCode = (typeof RecordType)[keyof typeof RecordType];

export function isKnownRecordType(t: number): t is RecordTypeCode {
  return t >= RecordType.segmentHeader && t <= RecordType.snapshot;
}

/** Frames `payload` as one record (a fresh buffer the caller owns). */
export function encodeFrame(type: RecordTypeCode, payload: Uint8Array): Buffer {
  if (payload.length > MAX_PAYLOAD_BYTES) {
    throw new RangeError(
      `WAL record payload is ${payload.length} bytes; at most ${MAX_PAYLOAD_BYTES} allowed`,
    );
  }
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  frame.writeUInt32LE(payload.length, 4);
  frame[8] = type;
  frame.set(payload, FRAME_HEADER_BYTES);
  frame.writeUInt32LE(crc32c(frame.subarray(4)), 0);
  return frame;
}

export type FrameRead =
  | { kind: 'ok'; type: RecordTypeCode; payload: Buffer; next: number }
  /** Clean end: offset is exactly the end of the buffer. */
  | { kind: 'end' }
  /** `maybeTorn`: the damage is what an interrupted write leaves (short frame, bad checksum). */
  | { kind: 'bad'; reason: string; maybeTorn: boolean };

/** Reads the frame starting at `offset` of `buf`, checking length, type and checksum. */
export function readFrame(buf: Buffer, offset: number): FrameRead {
  const remaining = buf.length - offset;
  if (remaining === 0) return { kind: 'end' };
  if (remaining < FRAME_HEADER_BYTES) {
    return {
      kind: 'bad',
      reason: `frame header cut short (${remaining} of ${FRAME_HEADER_BYTES} bytes)`,
      maybeTorn: true,
    };
  }
  const length = buf.readUInt32LE(offset + 4);
  if (length > MAX_PAYLOAD_BYTES) {
    return {
      kind: 'bad',
      reason: `frame length ${length} exceeds the ${MAX_PAYLOAD_BYTES}-byte limit`,
      maybeTorn: true,
    };
  }
  const end = offset + FRAME_HEADER_BYTES + length;
  if (end > buf.length) {
    return {
      kind: 'bad',
      reason: `frame length ${length} runs ${end - buf.length} bytes past end of file`,
      maybeTorn: true,
    };
  }
  const stored = buf.readUInt32LE(offset);
  const actual = crc32c(buf.subarray(offset + 4, end));
  if (stored !== actual) {
    return {
      kind: 'bad',
      reason: `checksum mismatch (stored crc32c ${hex(stored)}, computed ${hex(actual)})`,
      maybeTorn: true,
    };
  }
  const type = buf[offset + 8]!;
  // A checksummed frame of an unknown type was written whole: never a torn write.
  if (!isKnownRecordType(type))
    return { kind: 'bad', reason: `unknown record type ${type}`, maybeTorn: false };
  return { kind: 'ok', type, payload: buf.subarray(offset + FRAME_HEADER_BYTES, end), next: end };
}

/**
 * True when some byte offset at or after `from` starts a complete, checksummed frame of a known
 * type. Used to tell a torn tail (nothing valid follows the bad frame) from corruption in the
 * middle of the log (valid records follow, so the bad one was once durable). Most offsets fail the
 * type or length test before any checksum is computed. Only known types are looked for: a build
 * that writes new record types must also bump the segment header version, which older builds refuse.
 */
export function hasValidFrameAfter(buf: Buffer, from: number): boolean {
  for (let p = from; p + FRAME_HEADER_BYTES <= buf.length; p++) {
    if (!isKnownRecordType(buf[p + 8]!)) continue;
    const length = buf.readUInt32LE(p + 4);
    if (length > MAX_PAYLOAD_BYTES || p + FRAME_HEADER_BYTES + length > buf.length) continue;
    if (crc32c(buf.subarray(p + 4, p + FRAME_HEADER_BYTES + length)) === buf.readUInt32LE(p)) return true;
  }
  return false;
}

function hex(n: number): string {
  return `0x${n.toString(16).padStart(8, '0')}`;
}
