// A small RESP client for the simulation: the request encoder, a RESP2 reply parser, and a connection
// that sends one command or a pipeline of them and matches each reply to its request, in order. Replies
// are only ever taken from the parser in request order; a reply with no request waiting, or bytes that do
// not parse, is a failure of the server (`reply-mismatch`), never a result.

import type { SimProcess } from './process.js';
import type { RespNet, SimSocket } from './resp-link.js';
import type { World } from './world.js';

export type RespValue =
  | { type: 'simple'; value: string }
  | { type: 'error'; value: string }
  | { type: 'int'; value: bigint }
  | { type: 'bulk'; value: string | null }
  | { type: 'array'; value: RespValue[] | null };

/** `*n\r\n$len\r\narg\r\n...` */
export function encodeCommand(args: readonly string[]): Buffer {
  let s = `*${args.length}\r\n`;
  for (const a of args) s += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
  return Buffer.from(s);
}

/** Incremental RESP2 reply parser. `next()`: a reply, undefined (needs more bytes), or an Error (bad bytes). */
export class ReplyParser {
  private buf: Buffer = Buffer.alloc(0);
  private pos = 0;

  push(chunk: Buffer): void {
    this.buf = this.pos < this.buf.length ? Buffer.concat([this.buf.subarray(this.pos), chunk]) : chunk;
    this.pos = 0;
  }

  get buffered(): number {
    return this.buf.length - this.pos;
  }

  next(): RespValue | undefined | Error {
    try {
      const r = this.parse(this.pos);
      if (r === undefined) return undefined;
      this.pos = r.end;
      return r.value;
    } catch (err) {
      return err as Error;
    }
  }

  private line(at: number): { text: string; end: number } | undefined {
    const i = this.buf.indexOf('\r\n', at);
    if (i < 0) return undefined;
    return { text: this.buf.toString('latin1', at, i), end: i + 2 };
  }

  private parse(at: number): { value: RespValue; end: number } | undefined {
    if (at >= this.buf.length) return undefined;
    const kind = String.fromCharCode(this.buf[at] as number);
    const l = this.line(at + 1);
    if (!l) return undefined;
    switch (kind) {
      case '+':
        return { value: { type: 'simple', value: l.text }, end: l.end };
      case '-':
        return { value: { type: 'error', value: l.text }, end: l.end };
      case ':':
        if (!/^-?\d+$/.test(l.text)) throw new Error(`bad integer reply ${JSON.stringify(l.text)}`);
        return { value: { type: 'int', value: BigInt(l.text) }, end: l.end };
      case '$': {
        const n = Number(l.text);
        if (n === -1) return { value: { type: 'bulk', value: null }, end: l.end };
        if (!Number.isInteger(n) || n < 0) throw new Error(`bad bulk length ${JSON.stringify(l.text)}`);
        if (this.buf.length < l.end + n + 2) return undefined;
        if (this.buf.toString('latin1', l.end + n, l.end + n + 2) !== '\r\n')
          throw new Error('bulk without CRLF');
        return {
          value: { type: 'bulk', value: this.buf.toString('utf8', l.end, l.end + n) },
          end: l.end + n + 2,
        };
      }
      case '*': {
        const n = Number(l.text);
        if (n === -1) return { value: { type: 'array', value: null }, end: l.end };
        if (!Number.isInteger(n) || n < 0) throw new Error(`bad array length ${JSON.stringify(l.text)}`);
        const items: RespValue[] = [];
        let end = l.end;
        for (let i = 0; i < n; i++) {
          const r = this.parse(end);
          if (!r) return undefined;
          items.push(r.value);
          end = r.end;
        }
        return { value: { type: 'array', value: items }, end };
      }
      default:
        throw new Error(`unknown reply type byte ${JSON.stringify(kind)}`);
    }
  }
}

/** What became of one command: its reply, or no reply ('lost': outcome unknown; 'refused': never sent). */
export type RespOutcome = RespValue | 'lost' | 'refused';

/** An outcome and when it reached the client (global µs). */
export interface RespAnswer {
  outcome: RespOutcome;
  atUs: number;
}

interface Pending {
  args: readonly string[];
  resolve: (a: RespAnswer) => void;
}

/** One client's connection to one node, opened on first use and dropped on any error or timeout. */
export class RespConnection {
  private socket: SimSocket | undefined;
  private connecting: Promise<SimSocket | undefined> | undefined;
  private readonly parser = new ReplyParser();
  private readonly waiting: Pending[] = [];
  private timer: unknown;

  constructor(
    private readonly world: World,
    private readonly net: RespNet,
    private readonly proc: SimProcess,
    private readonly clientName: string,
    readonly addr: string,
    private readonly timeoutMs: number,
  ) {}

  /** Sends `cmds` in one write (a pipeline) and resolves with one outcome per command, in order. */
  /**
   * Sends `cmds` in one write, or in two when `split` is given (the bytes cut at `1 + split % (length - 1)`: the
   * server may read them in two chunks, a command cut in the middle).
   */
  async pipeline(cmds: ReadonlyArray<readonly string[]>, split?: number): Promise<RespAnswer[]> {
    const s = await this.open();
    const now = this.world.sched.nowUs;
    if (!s) return cmds.map(() => ({ outcome: 'refused' as const, atUs: now }));
    const outcomes = cmds.map(
      (args) =>
        new Promise<RespAnswer>((resolve) => {
          this.waiting.push({ args, resolve });
        }),
    );
    const bytes = Buffer.concat(cmds.map((c) => encodeCommand(c)));
    if (split === undefined || bytes.length < 2) s.write(bytes);
    else {
      const at = 1 + (split % (bytes.length - 1));
      s.write(bytes.subarray(0, at));
      s.write(bytes.subarray(at));
    }
    this.armTimer();
    return Promise.all(outcomes);
  }

  private open(): Promise<SimSocket | undefined> {
    if (this.socket) return Promise.resolve(this.socket);
    this.connecting ??= new Promise<SimSocket | undefined>((resolve) => {
      let settled = false;
      const t = this.proc.setTimeout(
        () => {
          if (settled) return;
          settled = true;
          this.gone('connect timeout');
          resolve(undefined);
        },
        this.timeoutMs,
        'resp-connect-timeout',
      );
      this.net.connect(this.proc, this.clientName, this.addr, (r) => {
        if (settled) {
          if (!(r instanceof Error)) r.destroy(); // too late: we gave up on it
          return;
        }
        settled = true;
        this.proc.clearTimer(t);
        if (r instanceof Error) {
          this.gone(r.message);
          resolve(undefined);
          return;
        }
        this.socket = r;
        this.connecting = undefined;
        // Events of a socket given up on already never touch the next one.
        r.on('data', (chunk) => this.socket === r && this.onData(chunk));
        r.on('end', () => this.socket === r && this.gone('the server closed the connection'));
        r.on('error', (err) => this.socket === r && this.gone(err.message));
        r.on('close', () => this.socket === r && this.gone('closed'));
        resolve(r);
      });
    });
    return this.connecting;
  }

  private armTimer(): void {
    if (this.timer !== undefined) return;
    this.timer = this.proc.setTimeout(
      () => {
        this.timer = undefined;
        if (this.waiting.length > 0) this.gone(`no reply within ${this.timeoutMs} ms`);
      },
      this.timeoutMs,
      'resp-timeout',
    );
  }

  private onData(chunk: Buffer): void {
    this.parser.push(chunk);
    for (;;) {
      const r = this.parser.next();
      if (r === undefined) break;
      if (r instanceof Error) {
        this.world.fail(
          'reply-mismatch',
          `${this.clientName}: ${this.addr} sent bytes that are no RESP reply: ${r.message}`,
        );
        this.gone('bad reply');
        return;
      }
      const p = this.waiting.shift();
      if (!p) {
        this.world.fail(
          'reply-mismatch',
          `${this.clientName}: ${this.addr} sent a reply to no request: ${show(r)}`,
        );
        this.gone('unexpected reply');
        return;
      }
      p.resolve({ outcome: r, atUs: this.world.sched.nowUs });
    }
    if (this.waiting.length === 0 && this.timer !== undefined) {
      this.proc.clearTimer(this.timer);
      this.timer = undefined;
    }
  }

  /** The connection is over: every command without a reply has an unknown outcome. */
  private gone(why: string): void {
    if (this.timer !== undefined) this.proc.clearTimer(this.timer);
    this.timer = undefined;
    const s = this.socket;
    this.socket = undefined;
    this.connecting = undefined;
    if (s && !s.destroyed) s.destroy();
    const left = this.waiting.splice(0);
    if (left.length > 0 || s) this.world.trace(`${this.clientName} resp ${this.addr}: ${why}`);
    for (const p of left) p.resolve({ outcome: 'lost', atUs: this.world.sched.nowUs });
  }
}

export function show(v: RespOutcome): string {
  if (typeof v === 'string') return v;
  if (v.type === 'array') return `[${v.value === null ? 'nil' : v.value.map(show).join(', ')}]`;
  if (v.type === 'error') return `-${v.value}`;
  return String(v.value);
}
