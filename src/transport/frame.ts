import { crc32c } from '@node-rs/crc32';
import { bugOn } from '../testing/bug-switches.js';
import { ProtocolError } from './errors.js';

/**
 * Wire framing (wire version 3): every frame is
 *
 *   u32 big-endian length L | u32 big-endian crc32c(L's 4 bytes) | u8 kind | L-1 bytes of payload |
 *   u32 big-endian crc32c(kind ‖ payload)
 *
 * L counts the kind byte and the payload, so L >= 1. The receiver checks L's own checksum, then L against its
 * limit, before buffering anything beyond the 8-byte prefix, so a hostile length can never make it allocate. The
 * CRC-32C trailer (since wire version 2) catches bytes corrupted in transit that TCP's 16-bit checksum let through:
 * a frame that fails it closes the connection and is never delivered. The length's checksum (since version 3)
 * catches a corrupted length at once: before it, a length bent to a value under the limit left the receiver waiting
 * for bytes that never came, deaf to its peer until the idle timeout (10 s) closed the connection (finding FS-17,
 * full-stack simulator, swarm seed 700648: no leader for 10 s after healing).
 */
export const FrameKind = {
  /** dialer → listener: version, cluster id, both node ids, channel, dialer nonce. */
  hello: 1,
  /** listener → dialer: listener nonce and the listener's proof. */
  challenge: 2,
  /** dialer → listener: the dialer's proof. */
  auth: 3,
  /** listener → dialer: authenticated; Raft traffic may flow. */
  accept: 4,
  /** either way during the handshake: refused, with a reason code; the connection closes. */
  reject: 5,
  /** dialer → listener keepalive on a message connection. */
  ping: 6,
  /** listener → dialer keepalive answer. */
  pong: 7,
  /** one Raft message (dialer → listener). */
  message: 8,
  /** snapshot stream: the snap message without its data, the total length and the crc32c. */
  snapBegin: 9,
  /** snapshot stream: raw bytes at an offset (binary payload, no msgpack). */
  snapChunk: 10,
  /** snapshot stream: listener → dialer, bytes received so far (flow control). */
  snapAck: 11,
  /** snapshot stream: listener → dialer, final outcome. */
  snapDone: 12,
} as const;

export type FrameKindCode = (typeof FrameKind)[keyof typeof FrameKind];

export const FRAME_HEADER_BYTES = 9;
export const FRAME_TRAILER_BYTES = 4;
const LENGTH_BYTES = 4;
/** The length and its checksum: what the receiver checks before it waits for a frame's body. */
const PREFIX_BYTES = 8;

function writePrefix(into: Buffer, length: number): void {
  into.writeUInt32BE(length, 0);
  into.writeUInt32BE(crc32c(into.subarray(0, LENGTH_BYTES)) >>> 0, LENGTH_BYTES);
}

/** Builds one frame in a single buffer (one copy of the payload, one socket write). */
export function encodeFrame(kind: FrameKindCode, payload: Uint8Array = EMPTY): Buffer {
  const end = FRAME_HEADER_BYTES + payload.length;
  const frame = Buffer.allocUnsafe(end + FRAME_TRAILER_BYTES);
  writePrefix(frame, 1 + payload.length);
  frame[PREFIX_BYTES] = kind;
  frame.set(payload, FRAME_HEADER_BYTES);
  frame.writeUInt32BE(crc32c(frame.subarray(PREFIX_BYTES, end)) >>> 0, end);
  return frame;
}

/**
 * The 4-byte checksum trailer of a frame written in pieces (encodeFrameHeader, then the payload in `parts`
 * as written: their concatenation is the payload).
 */
export function encodeFrameTrailer(kind: FrameKindCode, ...parts: Uint8Array[]): Buffer {
  let crc = crc32c(Buffer.of(kind));
  for (const p of parts) crc = crc32c(p, crc);
  const trailer = Buffer.allocUnsafe(FRAME_TRAILER_BYTES);
  trailer.writeUInt32BE(crc >>> 0, 0);
  return trailer;
}

/** The 9-byte header of a frame whose payload is written separately (snapshot chunks: no copy); the trailer follows it. */
export function encodeFrameHeader(kind: FrameKindCode, payloadBytes: number): Buffer {
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  writePrefix(header, 1 + payloadBytes);
  header[PREFIX_BYTES] = kind;
  return header;
}

const EMPTY = new Uint8Array(0);

/**
 * Splits a byte stream into frames. Chunks are kept as received and only copied when a frame spans
 * several of them, so a run of small frames in one TCP read costs no copies at all.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  /** Read position inside chunks[0]. */
  private head = 0;
  private buffered = 0;

  constructor(
    /** Largest accepted L (kind byte + payload). May be raised after the handshake. */
    public maxFrameBytes: number,
  ) {}

  /** Bytes received but not yet returned as frames. */
  get bufferedBytes(): number {
    return this.buffered;
  }

  /**
   * Feeds received bytes and calls onFrame for every complete frame, in order. Throws ProtocolError on
   * a length whose checksum fails, a zero or oversized length, or a CRC-32C trailer that does not match (nothing of that frame is delivered;
   * frames before it in the same chunk passed their own check and were); the caller must then close the connection (the decoder is
   * left unusable). Exceptions from onFrame propagate and leave the remaining bytes buffered.
   */
  push(chunk: Buffer, onFrame: (kind: number, payload: Buffer) => void): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    while (this.buffered >= PREFIX_BYTES) {
      const prefix = this.peekPrefix();
      const length = prefix.readUInt32BE(0);
      if (
        crc32c(prefix.subarray(0, LENGTH_BYTES)) >>> 0 !== prefix.readUInt32BE(LENGTH_BYTES) &&
        !bugOn('transport-no-frame-crc')
      ) {
        throw new ProtocolError(
          `frame length checksum mismatch (length prefix reads ${length}): corrupted in transit, or a peer ` +
            `of another wire version`,
        );
      }
      if (length === 0)
        throw new ProtocolError('frame length prefix is 0; a frame holds at least its kind byte');
      if (length > this.maxFrameBytes) {
        throw new ProtocolError(
          `frame length prefix ${length} exceeds the limit of ${this.maxFrameBytes} bytes (maxFrameBytes)`,
        );
      }
      if (this.buffered < PREFIX_BYTES + length + FRAME_TRAILER_BYTES) return;
      this.skip(PREFIX_BYTES);
      const frame = this.take(length);
      const expected = this.take(FRAME_TRAILER_BYTES).readUInt32BE(0);
      if (crc32c(frame) >>> 0 !== expected && !bugOn('transport-no-frame-crc')) {
        throw new ProtocolError(
          `frame checksum mismatch (kind ${frame[0]}, ${length} bytes): corrupted in transit`,
        );
      }
      onFrame(frame[0]!, frame.subarray(1));
    }
  }

  /** The first 8 buffered bytes (length and its checksum), without consuming them. */
  private peekPrefix(): Buffer {
    const first = this.chunks[0]!;
    if (first.length - this.head >= PREFIX_BYTES) return first.subarray(this.head, this.head + PREFIX_BYTES);
    const out = Buffer.allocUnsafe(PREFIX_BYTES);
    let got = 0;
    for (let i = 0; got < PREFIX_BYTES; i++) {
      const c = this.chunks[i]!;
      for (let j = i === 0 ? this.head : 0; j < c.length && got < PREFIX_BYTES; j++) out[got++] = c[j]!;
    }
    return out;
  }

  private skip(n: number): void {
    this.take(n);
  }

  /** Removes exactly n buffered bytes (n <= buffered): a view when they sit in one chunk, else a copy. */
  private take(n: number): Buffer {
    this.buffered -= n;
    const first = this.chunks[0]!;
    const available = first.length - this.head;
    if (available >= n) {
      const out = first.subarray(this.head, this.head + n);
      this.head += n;
      if (this.head === first.length) {
        this.chunks.shift();
        this.head = 0;
      }
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const c = this.chunks[0]!;
      const step = Math.min(c.length - this.head, n - filled);
      c.copy(out, filled, this.head, this.head + step);
      filled += step;
      this.head += step;
      if (this.head === c.length) {
        this.chunks.shift();
        this.head = 0;
      }
    }
    return out;
  }
}
