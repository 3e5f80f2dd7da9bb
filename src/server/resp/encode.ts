import type { Reply } from './reply.js';

/** The protocol a connection speaks: RESP2 until the client sends `HELLO 3`. */
export type ProtocolVersion = 2 | 3;

const INITIAL_CAPACITY = 16 * 1024;
/** Batches at most this big are copied out so the scratch buffer can be reused; bigger ones are handed over. */
const COPY_OUT_LIMIT = 4 * 1024;

/**
 * A growable byte buffer replies are encoded into; a connection flushes it with one `socket.write` per batch
 * (many pipelined replies → one syscall).
 */
export class OutWriter {
  private buf: Buffer = Buffer.allocUnsafe(INITIAL_CAPACITY);
  private len = 0;

  get length(): number {
    return this.len;
  }

  /** Everything written since the last `take`, or undefined when empty. The caller owns the returned bytes. */
  take(): Buffer | undefined {
    if (this.len === 0) return undefined;
    let out: Buffer;
    if (this.len <= COPY_OUT_LIMIT) {
      out = Buffer.allocUnsafe(this.len);
      this.buf.copy(out, 0, 0, this.len);
    } else {
      out = this.buf.subarray(0, this.len);
      this.buf = Buffer.allocUnsafe(INITIAL_CAPACITY);
    }
    this.len = 0;
    return out;
  }

  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + n));
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }

  /** Text known to be ASCII (protocol markers, numbers, simple strings). */
  ascii(s: string): void {
    this.reserve(s.length);
    this.len += this.buf.write(s, this.len, 'latin1');
  }

  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }

  /** A bulk-string body from text: `$<bytes>\r\n<utf8>\r\n` (or `=` for verbatim, whose length includes the format). */
  private utf8Bulk(marker: string, s: string, prefix = ''): void {
    const n = Buffer.byteLength(s, 'utf8') + prefix.length;
    this.ascii(`${marker}${n}\r\n${prefix}`);
    this.reserve(n + 2);
    this.len += this.buf.write(s, this.len, 'utf8');
    this.buf[this.len++] = 13;
    this.buf[this.len++] = 10;
  }

  /** Encode replies in order; a run of integers (INCR copies answered together) as one string. */
  replies(rs: readonly Reply[], proto: ProtocolVersion): void {
    let text = '';
    for (const r of rs) {
      if (r.kind === 'integer') {
        text += `:${r.value}\r\n`;
        continue;
      }
      if (text !== '') this.ascii(text);
      text = '';
      this.reply(r, proto);
    }
    if (text !== '') this.ascii(text);
  }

  /** Encode one reply for the given protocol. */
  reply(r: Reply, proto: ProtocolVersion): void {
    switch (r.kind) {
      case 'raw':
        this.bytes(proto === 3 ? r.resp3 : r.resp2);
        return;
      case 'simple':
        this.utf8Line('+', oneLine(r.value));
        return;
      case 'error':
        this.utf8Line('-', oneLine(r.value));
        return;
      case 'integer':
        this.ascii(`:${r.value}\r\n`);
        return;
      case 'fieldNumber':
        if (proto === 3) this.ascii(`:${r.value}\r\n`);
        else {
          const s = String(r.value);
          this.ascii(`$${s.length}\r\n${s}\r\n`);
        }
        return;
      case 'bulk':
        if (typeof r.value === 'string') this.utf8Bulk('$', r.value);
        else {
          this.ascii(`$${r.value.length}\r\n`);
          this.bytes(r.value);
          this.ascii('\r\n');
        }
        return;
      case 'verbatim':
        if (proto === 3) this.utf8Bulk('=', r.value, `${r.format.padEnd(3, ' ').slice(0, 3)}:`);
        else this.utf8Bulk('$', r.value);
        return;
      case 'null':
        this.ascii(proto === 3 ? '_\r\n' : '$-1\r\n');
        return;
      case 'nullArray':
        this.ascii(proto === 3 ? '_\r\n' : '*-1\r\n');
        return;
      case 'bool':
        this.ascii(proto === 3 ? (r.value ? '#t\r\n' : '#f\r\n') : r.value ? ':1\r\n' : ':0\r\n');
        return;
      case 'double': {
        const s = formatDouble(r.value);
        this.ascii(proto === 3 ? `,${s}\r\n` : `$${s.length}\r\n${s}\r\n`);
        return;
      }
      case 'array':
      case 'set':
      case 'push': {
        const marker = proto === 3 ? (r.kind === 'set' ? '~' : r.kind === 'push' ? '>' : '*') : '*';
        this.ascii(`${marker}${r.items.length}\r\n`);
        for (const item of r.items) this.reply(item, proto);
        return;
      }
      case 'multi':
        for (const item of r.items) this.reply(item, proto);
        return;
      case 'map':
        this.ascii(proto === 3 ? `%${r.entries.length}\r\n` : `*${r.entries.length * 2}\r\n`);
        for (const [k, v] of r.entries) {
          this.reply(k, proto);
          this.reply(v, proto);
        }
        return;
    }
  }

  private utf8Line(marker: string, s: string): void {
    const n = Buffer.byteLength(s, 'utf8');
    this.reserve(n + marker.length + 2);
    this.len += this.buf.write(marker, this.len, 'latin1');
    this.len += this.buf.write(s, this.len, 'utf8');
    this.buf[this.len++] = 13;
    this.buf[this.len++] = 10;
  }
}

/** Simple strings and errors must not contain CR or LF (Redis replaces them with spaces too). */
function oneLine(s: string): string {
  return /[\r\n]/.test(s) ? s.replace(/[\r\n]/g, ' ') : s;
}

function formatDouble(v: number): string {
  if (Number.isNaN(v)) return 'nan';
  if (v === Number.POSITIVE_INFINITY) return 'inf';
  if (v === Number.NEGATIVE_INFINITY) return '-inf';
  return String(v);
}

/** Encode one reply to bytes (tests and one-off writes). */
export function encodeReply(r: Reply, proto: ProtocolVersion): Buffer {
  const w = new OutWriter();
  w.reply(r, proto);
  return w.take() ?? Buffer.alloc(0);
}
