// WAL segment layout (format 4; format 2 is read too). A segment file is an 8-byte preamble, then
// frames:
//
//   preamble:  "FLOEWAL" (7 ASCII bytes) | format version (u8) = 4
//
//   frame:
//   0        4        8    9        13
//   +--------+--------+----+--------+------------------------+
//   |  hcrc  | length |type|  pcrc  | payload (length bytes) |
//   +--------+--------+----+--------+------------------------+
//
// Integers are little-endian u32. pcrc = crc32c(payload). hcrc = crc32c(bytes [4, 13)): the length,
// the type and pcrc. With the header checked on its own, recovery knows where a frame ends before it
// looks at the payload, so it can tell a frame that is incomplete (the file ends inside it: a torn
// write, cut) from a complete frame whose bytes changed (a bit flip: corruption, refused). Format 1
// had one checksum over the whole frame, and recovery had to guess. Format 4 has format 2's framing;
// a conf entry's row may carry a 7th field, the membership the change results in (payload.ts).
// There is no format 3: the version byte is outside every checksum, and 3 (0b011) is one flipped bit
// away from 2 (0b010). Readable versions must differ in at least two bits, so that one flipped bit
// in the preamble is always refused, never read as another format.
import { crc32c } from '@node-rs/crc32';
import { bugOn } from '../testing/bug-switches.js';

export const FRAME_HEADER_BYTES = 13;

/** Format of the segment files this build writes. Bump it for any change to the layout or record types. */
export const WAL_FORMAT_VERSION = 4;
/** Oldest format this build still reads (format 2: conf entries without their resulting membership). */
export const OLDEST_READABLE_WAL_FORMAT = 2;
const MAGIC = Buffer.from('FLOEWAL', 'ascii');
export const SEGMENT_PREAMBLE_BYTES = MAGIC.length + 1;

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

/** The first bytes of every segment file. */
export function segmentPreamble(): Buffer {
  const b = Buffer.alloc(SEGMENT_PREAMBLE_BYTES);
  MAGIC.copy(b, 0);
  b[MAGIC.length] = WAL_FORMAT_VERSION;
  return b;
}

/** Why `buf` does not start with this build's preamble, or undefined when it does. */
export function checkPreamble(buf: Buffer): string | undefined {
  if (buf.length >= SEGMENT_PREAMBLE_BYTES && buf.subarray(0, MAGIC.length).equals(MAGIC)) {
    const v = buf[MAGIC.length]!;
    if (v === OLDEST_READABLE_WAL_FORMAT || v === WAL_FORMAT_VERSION) return undefined;
    return `WAL format version ${v}; this build reads versions ${OLDEST_READABLE_WAL_FORMAT} and ${WAL_FORMAT_VERSION}`;
  }
  if (looksLikeFormat1(buf)) {
    return (
      `segment is in WAL format 1 (frames without a header checksum); this build reads formats ${OLDEST_READABLE_WAL_FORMAT} and ${WAL_FORMAT_VERSION} ` +
      'and has no upgrade path: move the data directory aside and let the node rejoin from a peer'
    );
  }
  return `not a Floe WAL segment (the file does not start with the ${JSON.stringify(MAGIC.toString())} preamble)`;
}

/** The format version of a segment whose preamble checkPreamble accepted. */
export function segmentFormat(buf: Buffer): number {
  return buf[MAGIC.length]!;
}

/** Format 1 segments began with a frame [crc32c | length | type=1 | payload], crc over bytes 4.. . */
function looksLikeFormat1(buf: Buffer): boolean {
  if (buf.length < 9 || buf[8] !== RecordType.segmentHeader) return false;
  const end = 9 + buf.readUInt32LE(4);
  return end <= buf.length && crc32c(buf.subarray(4, end)) === buf.readUInt32LE(0);
}

/** Frames `payload` as one record (a fresh buffer the caller owns). */
export function encodeFrame(type: RecordTypeCode, payload: Uint8Array): Buffer {
  if (payload.length > MAX_PAYLOAD_BYTES) {
    throw new RangeError(
      `WAL record payload is ${payload.length} bytes; at most ${MAX_PAYLOAD_BYTES} allowed`,
    );
  }
  return frameOf(type, payload);
}

/** Frames without checking the type or size: for tests that build frames a writer never would. */
export function frameOf(type: number, payload: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  frame.writeUInt32LE(payload.length, 4);
  frame[8] = type;
  frame.writeUInt32LE(crc32c(payload), 9);
  frame.writeUInt32LE(crc32c(frame.subarray(4, FRAME_HEADER_BYTES)), 0);
  frame.set(payload, FRAME_HEADER_BYTES);
  return frame;
}

export type FrameRead =
  | { kind: 'ok'; type: RecordTypeCode; payload: Buffer; next: number }
  /** Clean end: offset is exactly the end of the buffer. */
  | { kind: 'end' }
  /**
   * The buffer ends before the frame does: its header is cut short, or its header is intact and
   * its payload runs past the end, or its header is damaged and nothing but zeros follows it
   * (bytes never written). What an interrupted append leaves; the frame reaches the end of the buffer.
   */
  | { kind: 'incomplete'; reason: string }
  /** A complete frame that fails a check: its bytes changed after they were written, or a writer bug. */
  | { kind: 'bad'; reason: string };

/** Reads the frame starting at `offset` of `buf`, checking the header, then the payload. */
export function readFrame(buf: Buffer, offset: number): FrameRead {
  const remaining = buf.length - offset;
  if (remaining === 0) return { kind: 'end' };
  if (remaining < FRAME_HEADER_BYTES) {
    return {
      kind: 'incomplete',
      reason: `frame header cut short (${remaining} of ${FRAME_HEADER_BYTES} bytes)`,
    };
  }
  const storedH = buf.readUInt32LE(offset);
  const actualH = crc32c(buf.subarray(offset + 4, offset + FRAME_HEADER_BYTES));
  if (storedH !== actualH) {
    // A header that was being written when the crash came, followed only by bytes that were never
    // written (a file system may extend a file with zeros). A bit flip in a complete frame cannot
    // look like this: every payload has non-zero bytes, and a flip in the header leaves them alone.
    if (allZero(buf, offset + FRAME_HEADER_BYTES)) {
      return {
        kind: 'incomplete',
        reason: `frame header damaged and followed only by ${remaining - FRAME_HEADER_BYTES} zero bytes (never written)`,
      };
    }
    return {
      kind: 'bad',
      reason: `frame header checksum mismatch (stored crc32c ${hex(storedH)}, computed ${hex(actualH)})`,
    };
  }
  // The header is exactly as written from here on: anything wrong with it is not a torn write.
  const length = buf.readUInt32LE(offset + 4);
  const type = buf[offset + 8]!;
  if (!isKnownRecordType(type)) return { kind: 'bad', reason: `unknown record type ${type}` };
  if (length > MAX_PAYLOAD_BYTES) {
    return { kind: 'bad', reason: `frame length ${length} exceeds the ${MAX_PAYLOAD_BYTES}-byte limit` };
  }
  const end = offset + FRAME_HEADER_BYTES + length;
  if (end > buf.length) {
    return {
      kind: 'incomplete',
      reason: `frame length ${length} runs ${end - buf.length} bytes past end of file`,
    };
  }
  const payload = buf.subarray(offset + FRAME_HEADER_BYTES, end);
  const storedP = buf.readUInt32LE(offset + 9);
  const actualP = crc32c(payload);
  if (storedP !== actualP && !bugOn('wal-skip-crc')) {
    return {
      kind: 'bad',
      reason: `payload checksum mismatch (stored crc32c ${hex(storedP)}, computed ${hex(actualP)})`,
    };
  }
  return { kind: 'ok', type, payload, next: end };
}

function allZero(buf: Buffer, from: number): boolean {
  for (let i = from; i < buf.length; i++) if (buf[i] !== 0) return false;
  return true;
}

function hex(n: number): string {
  return `0x${n.toString(16).padStart(8, '0')}`;
}
