import { splitInlineArgs } from './inline.js';

/** One request: the command name and its arguments, as raw bytes. */
export interface ParsedCommand {
  args: Buffer[];
  /** True for a telnet-style line, false for a RESP multibulk array. */
  inline: boolean;
}

/**
 * The input broke the protocol; the connection replies `-ERR <message>` and closes (as Redis does).
 * `message` starts with `Protocol error: `.
 */
export class ProtocolError {
  readonly message: string;
  constructor(detail: string) {
    this.message = `Protocol error: ${detail}`;
  }
}

/** The bounds the parser enforces (see `RespLimits` for defaults and meaning). */
export interface ParserLimits {
  maxBulkBytes: number;
  maxArgs: number;
  maxRequestBytes: number;
  maxInlineBytes: number;
}

/** A `*<count>` or `$<length>` line longer than this can never be valid (at most 20 digits plus sign). */
const MAX_HEADER_BYTES = 64;
const MIN_OWNED_CAPACITY = 16 * 1024;
const EMPTY = Buffer.alloc(0);

const CR = 13;
const LF = 10;

/**
 * Incremental parser of client requests: RESP arrays of bulk strings (`*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n`) and
 * inline lines (`ECHO hi\r\n`). Feed bytes with `push`, take commands one at a time with `next`, so the caller
 * decides how fast to consume (backpressure) and per-connection state changed by a command (e.g. AUTH
 * relaxing limits) applies to the very next command.
 *
 * Memory: the parser holds at most the unparsed bytes the caller pushed; one request may not exceed
 * `maxRequestBytes`, so a caller that consumes every complete command and stops reading while it cannot
 * keeps the buffer bounded. Byte-at-a-time input costs amortised O(1) per byte (the buffer grows geometrically
 * and is only appended to; bytes already handed out in a command are never overwritten).
 */
export class RequestParser {
  private buf: Buffer = EMPTY;
  private len = 0;
  private pos = 0;
  /** True when `buf` was allocated here, so its spare capacity may be appended to. */
  private owned = false;

  // State of a multibulk request in progress.
  private remaining = -1;
  private args: Buffer[] = [];
  private bulkLen = -1;
  private requestBytes = 0;
  private failed: ProtocolError | undefined;
  /** Where the multibulk request in progress starts in `buf`; -1 once `push` may have moved it. */
  private cmdStart = -1;
  /** Where the last command `next` returned lies in `buf` ([lastStart, lastEnd)); lastEnd -1: not known. */
  private lastStart = 0;
  private lastEnd = -1;

  readonly limits: ParserLimits;
  /**
   * Tighter limits while the client has not authenticated (set by the connection when auth is required), with
   * Redis's errors `unauthenticated multibulk length` / `unauthenticated bulk length`.
   */
  preAuth: { maxArgs: number; maxBulkBytes: number } | undefined;

  constructor(limits: ParserLimits) {
    this.limits = limits;
  }

  /** Bytes received and not yet consumed. */
  get bufferedBytes(): number {
    return this.len - this.pos;
  }

  /** True when a multibulk request has started but is not complete. */
  get midRequest(): boolean {
    return this.remaining >= 0;
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0 || this.failed) return;
    // Offsets into `buf` are not kept across a push (it may replace or compact the buffer).
    this.cmdStart = -1;
    this.lastEnd = -1;
    if (this.pos === this.len) {
      // Nothing pending: take the chunk as is (no copy).
      this.buf = chunk;
      this.pos = 0;
      this.len = chunk.length;
      this.owned = false;
      return;
    }
    if (this.owned && this.len + chunk.length <= this.buf.length) {
      chunk.copy(this.buf, this.len);
      this.len += chunk.length;
      return;
    }
    const live = this.len - this.pos;
    const next = Buffer.allocUnsafe(Math.max(MIN_OWNED_CAPACITY, 2 * (live + chunk.length)));
    this.buf.copy(next, 0, this.pos, this.len);
    chunk.copy(next, live);
    this.buf = next;
    this.pos = 0;
    this.len = live + chunk.length;
    this.owned = true;
  }

  /**
   * The next complete command, undefined when more bytes are needed, or a `ProtocolError` (after which the
   * parser stays failed: the connection must close).
   */
  next(): ParsedCommand | ProtocolError | undefined {
    if (this.failed) return this.failed;
    this.lastEnd = -1;
    for (;;) {
      if (this.remaining < 0) {
        if (this.pos >= this.len) return this.drained();
        if (this.buf[this.pos] !== 0x2a /* '*' */) {
          const r = this.inline();
          if (r === null) continue; // empty line
          return r;
        }
        const start = this.pos;
        const n = this.headerNumber('mbulk');
        if (n === undefined) return undefined;
        if (n instanceof ProtocolError) return this.fail(n);
        if (n > this.limits.maxArgs || n < -1)
          return this.fail(new ProtocolError('invalid multibulk length'));
        if (n <= 0) continue; // `*0` and `*-1` (a null array) are empty requests: Redis skips them silently.
        if (this.preAuth && n > this.preAuth.maxArgs) {
          return this.fail(new ProtocolError('unauthenticated multibulk length'));
        }
        this.remaining = n;
        this.args = [];
        this.bulkLen = -1;
        this.requestBytes = this.pos - start;
        this.cmdStart = start;
      }
      while (this.remaining > 0) {
        if (this.bulkLen < 0) {
          if (this.pos >= this.len) return undefined;
          const c = this.buf[this.pos]!;
          if (c !== 0x24 /* '$' */) {
            return this.fail(new ProtocolError(`expected '$', got '${String.fromCharCode(c)}'`));
          }
          const start = this.pos;
          const n = this.headerNumber('bulk');
          if (n === undefined) return undefined;
          if (n instanceof ProtocolError) return this.fail(n);
          if (n < 0 || n > this.limits.maxBulkBytes)
            return this.fail(new ProtocolError('invalid bulk length'));
          if (this.preAuth && n > this.preAuth.maxBulkBytes) {
            return this.fail(new ProtocolError('unauthenticated bulk length'));
          }
          this.requestBytes += this.pos - start + n + 2;
          if (this.requestBytes > this.limits.maxRequestBytes) {
            return this.fail(
              new ProtocolError(
                `too big request (more than ${this.limits.maxRequestBytes} bytes in one command)`,
              ),
            );
          }
          this.bulkLen = n;
        }
        const need = this.bulkLen + 2;
        if (this.len - this.pos < need) return undefined;
        const end = this.pos + this.bulkLen;
        if (this.buf[end] !== CR || this.buf[end + 1] !== LF) {
          return this.fail(new ProtocolError('expected CRLF after bulk string data'));
        }
        this.args.push(this.buf.subarray(this.pos, end));
        this.pos = end + 2;
        this.bulkLen = -1;
        this.remaining--;
      }
      this.remaining = -1;
      const args = this.args;
      this.args = [];
      if (this.cmdStart >= 0 && this.pos < this.len) {
        this.lastStart = this.cmdStart;
        this.lastEnd = this.pos;
      }
      this.cmdStart = -1;
      this.drained();
      return { args, inline: false };
    }
  }

  /**
   * How many exact copies (byte for byte) of the multibulk command `next` just returned follow it in the bytes
   * already received, up to `max`, without consuming them. 0 when not known: after anything but a successful
   * `next` of a multibulk command (a `push`, an inline command, `skipRepeats`). A copy is a complete, valid request
   * under the same limits as the command it copies, so it needs no parsing.
   */
  repeatsOfLast(max: number): number {
    const end = this.lastEnd;
    if (end < 0 || this.pos !== end) return 0;
    const start = this.lastStart;
    const n = end - start;
    // k copies follow iff the k·n bytes after the command equal the k·n bytes from its start (the bytes repeat with
    // period n): one comparison for the usual case, where every complete request behind it is a copy.
    const periodic = (k: number) => this.buf.compare(this.buf, start, start + k * n, end, end + k * n) === 0;
    let k = Math.min(max, Math.floor((this.len - end) / n));
    if (k === 0 || periodic(k)) return k;
    // Else the largest k that is (fewer copies, then something else): binary search, periodic(lo) holds.
    let lo = 0;
    while (lo + 1 < k) {
      const mid = (lo + k) >>> 1;
      if (periodic(mid)) lo = mid;
      else k = mid;
    }
    return lo;
  }

  /** Consumes `count` copies counted by `repeatsOfLast` (a count it returned, before any other call). */
  skipRepeats(count: number): void {
    if (count <= 0) return;
    if (this.lastEnd < 0) throw new Error('skipRepeats without repeatsOfLast');
    this.pos += count * (this.lastEnd - this.lastStart);
    this.lastEnd = -1;
    this.drained();
  }

  /** Parse `*<n>\r\n` or `$<n>\r\n` at `pos`; undefined = incomplete. Advances `pos` past the line when complete. */
  private headerNumber(what: 'mbulk' | 'bulk'): number | ProtocolError | undefined {
    const limit = Math.min(this.len, this.pos + MAX_HEADER_BYTES);
    const cr = this.buf.indexOf(CR, this.pos + 1);
    if (cr === -1 || cr >= limit) {
      if (this.len - this.pos >= MAX_HEADER_BYTES) return new ProtocolError(`too big ${what} count string`);
      return undefined;
    }
    if (cr + 1 >= this.len) return undefined;
    if (this.buf[cr + 1] !== LF) return new ProtocolError(`expected CRLF after ${what} count`);
    const n = parseStrictInt(this.buf, this.pos + 1, cr);
    if (n === undefined) {
      return new ProtocolError(what === 'mbulk' ? 'invalid multibulk length' : 'invalid bulk length');
    }
    this.pos = cr + 2;
    return n;
  }

  /** One inline line; null for an empty line; undefined when incomplete. */
  private inline(): ParsedCommand | ProtocolError | null | undefined {
    const max = this.limits.maxInlineBytes;
    const lf = this.buf.indexOf(LF, this.pos);
    if (lf === -1 || lf >= this.len) {
      if (this.len - this.pos > max) return this.fail(new ProtocolError('too big inline request'));
      return undefined;
    }
    let end = lf;
    if (end > this.pos && this.buf[end - 1] === CR) end--;
    if (end - this.pos > max) return this.fail(new ProtocolError('too big inline request'));
    const line = this.buf.subarray(this.pos, end);
    this.pos = lf + 1;
    const args = splitInlineArgs(line);
    if (args === undefined) return this.fail(new ProtocolError('unbalanced quotes in request'));
    if (args.length > this.limits.maxArgs) {
      return this.fail(
        new ProtocolError(
          `too many arguments in inline request (${args.length}; at most ${this.limits.maxArgs})`,
        ),
      );
    }
    this.drained();
    return args.length === 0 ? null : { args, inline: true };
  }

  /** Drop the buffer once everything in it was consumed, so an idle connection keeps no memory. */
  private drained(): undefined {
    if (this.pos >= this.len) {
      this.buf = EMPTY;
      this.pos = 0;
      this.len = 0;
      this.owned = false;
    }
    return undefined;
  }

  private fail(err: ProtocolError): ProtocolError {
    this.failed = err;
    this.buf = EMPTY;
    this.pos = 0;
    this.len = 0;
    this.args = [];
    return err;
  }
}

/**
 * Redis's `string2ll` rules: optional `-`, then either `0` alone or a digit 1-9 followed by digits; nothing else
 * (no `+`, no spaces, no leading zeros, no `-0`). Values beyond 2^53 come back as Infinity (still "too big").
 */
export function parseStrictInt(b: Uint8Array, start: number, end: number): number | undefined {
  let p = start;
  if (p >= end) return undefined;
  let negative = false;
  if (b[p] === 0x2d) {
    negative = true;
    p++;
    if (p >= end) return undefined;
  }
  if (b[p] === 0x30) return p + 1 === end && !negative ? 0 : undefined;
  let v = 0;
  for (; p < end; p++) {
    const d = b[p]! - 0x30;
    if (d < 0 || d > 9) return undefined;
    v = v * 10 + d;
  }
  if (end - start > 20) return undefined; // beyond int64: string2ll fails too
  if (!Number.isSafeInteger(v)) v = Number.POSITIVE_INFINITY;
  return negative ? -v : v;
}
