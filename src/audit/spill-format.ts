/**
 * The audit spill file format: a sequence of CRC-framed batches of JSONEachRow rows.
 *
 *   frame = magic "FAU1" (4) | rows u32 LE (4) | length u32 LE (4) | crc u32 LE (4) | payload (length)
 *   crc   = crc32c(rows ‖ length ‖ payload)
 *   payload = `rows` lines of JSON (one `floe_audit_events` row each), every line ending in "\n"
 *
 * A reader stops at the first frame that is not whole and valid and reports the byte offset where it
 * starts; frames before it are good. Used by the spill (ClickHouse slow or down) and by the embedded
 * default (no ClickHouse configured): both are shipped with `floe audit replay`.
 */
import { crc32c } from '@node-rs/crc32';

export const SPILL_MAGIC = Buffer.from('FAU1', 'latin1');
export const FRAME_HEADER_BYTES = 16;
/** Frames larger than this are refused as corrupt (a batch of 10,000 rows is ~4 MB). */
export const MAX_FRAME_PAYLOAD = 256 * 1024 * 1024;

/** Encode rows (already-serialised JSON lines, without newlines) as one frame. */
export function encodeFrame(lines: readonly string[]): Buffer {
  const payload = Buffer.from(lines.length === 0 ? '' : `${lines.join('\n')}\n`, 'utf8');
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  SPILL_MAGIC.copy(frame, 0);
  frame.writeUInt32LE(lines.length, 4);
  frame.writeUInt32LE(payload.length, 8);
  payload.copy(frame, FRAME_HEADER_BYTES);
  const crc = crc32c(payload, crc32c(frame.subarray(4, 12)));
  frame.writeUInt32LE(crc >>> 0, 12);
  return frame;
}

export interface SpillFrame {
  /** Byte offset of the frame in its file. */
  offset: number;
  rows: number;
  /** JSONEachRow text (each row ends in "\n"). */
  payload: Buffer;
}

export interface SpillCorruption {
  /** Byte offset where the first bad frame starts. */
  offset: number;
  reason: string;
}

/** Decode a whole spill file's bytes: the good frames, and the first corruption if any. */
export function decodeFrames(buf: Buffer): { frames: SpillFrame[]; corruption?: SpillCorruption } {
  const frames: SpillFrame[] = [];
  let off = 0;
  while (off < buf.length) {
    if (buf.length - off < FRAME_HEADER_BYTES)
      return {
        frames,
        corruption: { offset: off, reason: `truncated frame header (${buf.length - off} bytes)` },
      };
    if (!buf.subarray(off, off + 4).equals(SPILL_MAGIC))
      return { frames, corruption: { offset: off, reason: 'bad frame magic (expected "FAU1")' } };
    const rows = buf.readUInt32LE(off + 4);
    const len = buf.readUInt32LE(off + 8);
    const crc = buf.readUInt32LE(off + 12);
    if (len > MAX_FRAME_PAYLOAD)
      return {
        frames,
        corruption: { offset: off, reason: `frame length ${len} exceeds ${MAX_FRAME_PAYLOAD}` },
      };
    const end = off + FRAME_HEADER_BYTES + len;
    if (end > buf.length)
      return {
        frames,
        corruption: {
          offset: off,
          reason: `truncated frame (needs ${len} payload bytes, ${buf.length - off - 16} left)`,
        },
      };
    const payload = buf.subarray(off + FRAME_HEADER_BYTES, end);
    if (crc32c(payload, crc32c(buf.subarray(off + 4, off + 12))) >>> 0 !== crc)
      return { frames, corruption: { offset: off, reason: 'CRC mismatch' } };
    let newlines = 0;
    for (let i = payload.indexOf(10); i !== -1; i = payload.indexOf(10, i + 1)) newlines++;
    if (newlines !== rows || (len > 0 && payload[len - 1] !== 10))
      return {
        frames,
        corruption: { offset: off, reason: `frame says ${rows} rows, payload has ${newlines}` },
      };
    frames.push({ offset: off, rows, payload });
    off = end;
  }
  return { frames };
}
