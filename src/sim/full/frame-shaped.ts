// Values shaped like a WAL frame (issue 10, teeth for issue 9 item 7b). A key-value client that stores binary-minded
// values — a serialized record, a copy of a log line, a hostile client probing the server — can hand the node bytes
// that form a complete, checksummed WAL frame (src/storage/record.ts: header checksum, length, type, payload
// checksum, payload). Values travel as JSON strings and reach the WAL through msgpack, which writes a string's UTF-8
// bytes verbatim; so the frame is made of ASCII bytes only (every byte < 0x80, NUL included), found by varying a
// nonce in its payload until both CRC-32Cs, the length and the type are all ASCII. A torn write of the record holding
// such a value leaves a valid frame after the tear: recovery must still cut the tail (a never-acknowledged write),
// not refuse to start.
import { FRAME_HEADER_BYTES, frameOf, RecordType } from '../../storage/record.js';

let cached: string | undefined;

/** A complete WAL frame (an `entries` record type) whose every byte is ASCII, as a string of those bytes. */
export function frameShapedText(): string {
  if (cached !== undefined) return cached;
  for (let nonce = 0; ; nonce++) {
    const payload = Buffer.from(
      `floe-sim frame-shaped value, nonce ${nonce.toString().padStart(8, '0')}`,
      'ascii',
    );
    const frame = frameOf(RecordType.entries, payload);
    if (frame.subarray(0, FRAME_HEADER_BYTES).every((b) => b < 0x80)) {
      cached = frame.toString('latin1');
      return cached;
    }
  }
}

/** What follows the frame in a value (the rest of a binary record): a tear anywhere in it leaves the frame whole. */
export const FRAME_VALUE_TAIL = '~'.repeat(192);
