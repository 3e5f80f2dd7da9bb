/**
 * Test helpers: a raw TCP client that sends exact bytes and decodes replies (RESP2 and RESP3), and a two-node
 * fake cluster (leader + follower RESP servers sharing one `FakeCluster`). Not used by production code.
 */
import { connect, type Socket } from 'node:net';
import { FakeCluster, type FakeClusterOptions } from './fake-backend.js';
import type { RespLimits } from './limits.js';
import { type RespServer, type RespServerOptions, startRespServer } from './server.js';

/** A decoded reply: strings for simple/bulk/verbatim, `RespErr` for errors, Map for maps, `Push` for pushes. */
export type Decoded =
  | string
  | number
  | bigint
  | boolean
  | null
  | RespErr
  | Push
  | Decoded[]
  | Map<Decoded, Decoded>
  | Set<Decoded>;

export class RespErr {
  constructor(readonly message: string) {}
}

export class Push {
  constructor(readonly items: Decoded[]) {}
}

/** Decode one reply at `pos`; undefined when incomplete. */
export function decodeReply(buf: Buffer, pos: number): { value: Decoded; next: number } | undefined {
  if (pos >= buf.length) return undefined;
  const cr = buf.indexOf('\r\n', pos);
  if (cr === -1) return undefined;
  const type = String.fromCharCode(buf[pos]!);
  const line = buf.toString('latin1', pos + 1, cr);
  const after = cr + 2;
  const aggregate = (n: number, start: number): { value: Decoded[]; next: number } | undefined => {
    const items: Decoded[] = [];
    let p = start;
    for (let i = 0; i < n; i++) {
      const r = decodeReply(buf, p);
      if (!r) return undefined;
      items.push(r.value);
      p = r.next;
    }
    return { value: items, next: p };
  };
  switch (type) {
    case '+':
      return { value: buf.toString('utf8', pos + 1, cr), next: after };
    case '-':
      return { value: new RespErr(buf.toString('utf8', pos + 1, cr)), next: after };
    case ':':
      return { value: Number(line), next: after };
    case '(':
      return { value: BigInt(line), next: after };
    case ',':
      return {
        value: Number(line === 'inf' ? 'Infinity' : line === '-inf' ? '-Infinity' : line),
        next: after,
      };
    case '#':
      return { value: line === 't', next: after };
    case '_':
      return { value: null, next: after };
    case '$':
    case '=': {
      const n = Number(line);
      if (n < 0) return { value: null, next: after };
      if (buf.length < after + n + 2) return undefined;
      let s = buf.toString('utf8', after, after + n);
      if (type === '=') s = s.slice(4);
      return { value: s, next: after + n + 2 };
    }
    case '*':
    case '~':
    case '>': {
      const n = Number(line);
      if (n < 0) return { value: null, next: after };
      const r = aggregate(n, after);
      if (!r) return undefined;
      if (type === '~') return { value: new Set(r.value), next: r.next };
      if (type === '>') return { value: new Push(r.value), next: r.next };
      return r;
    }
    case '%': {
      const r = aggregate(Number(line) * 2, after);
      if (!r) return undefined;
      const m = new Map<Decoded, Decoded>();
      for (let i = 0; i < r.value.length; i += 2) m.set(r.value[i]!, r.value[i + 1]!);
      return { value: m, next: r.next };
    }
    default:
      throw new Error(`test decoder: unknown reply type ${JSON.stringify(type)} at ${pos}`);
  }
}

/** Encode a command as a RESP array of bulk strings. */
export function encodeCommand(...args: (string | Buffer)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const b = typeof a === 'string' ? Buffer.from(a) : a;
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

/** A raw socket client for exact-byte tests. */
export class RawClient {
  private buf = Buffer.alloc(0);
  private pos = 0;
  private waiters: (() => void)[] = [];
  readonly closed: Promise<void>;
  isClosed = false;

  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf.subarray(this.pos), d]);
      this.pos = 0;
      this.wake();
    });
    socket.on('error', () => {});
    this.closed = new Promise((resolve) => {
      socket.on('close', () => {
        this.isClosed = true;
        this.wake();
        resolve();
      });
    });
  }

  static connect(port: number): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const s = connect(port, '127.0.0.1', () => resolve(new RawClient(s)));
      s.once('error', reject);
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Send a command as a RESP array and read its reply. */
  async call(...args: (string | Buffer)[]): Promise<Decoded> {
    this.write(encodeCommand(...args));
    return this.read();
  }

  /** The next reply; rejects if the connection closes first. */
  async read(): Promise<Decoded> {
    for (;;) {
      const r = decodeReply(this.buf, this.pos);
      if (r) {
        this.pos = r.next;
        return r.value;
      }
      if (this.isClosed) throw new Error('connection closed before a complete reply');
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /** Read `n` replies. */
  async readN(n: number): Promise<Decoded[]> {
    const out: Decoded[] = [];
    for (let i = 0; i < n; i++) out.push(await this.read());
    return out;
  }

  /** Bytes received and not yet decoded. */
  pending(): string {
    return this.buf.toString('latin1', this.pos);
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A leader and a follower RESP server over one `FakeCluster` (members 1 and 2). */
export interface TwoNodes {
  cluster: FakeCluster;
  leader: RespServer;
  follower: RespServer;
  close(): Promise<void>;
}

export async function startTwoNodes(
  opts: { limits?: Partial<RespLimits>; cluster?: FakeClusterOptions } & Partial<
    Omit<RespServerOptions, 'backend' | 'limits'>
  > = {},
): Promise<TwoNodes> {
  const cluster = new FakeCluster(opts.cluster);
  const { limits, cluster: _c, ...rest } = opts;
  const leader = await startRespServer({ ...rest, backend: cluster.backend(1), limits });
  const follower = await startRespServer({ ...rest, backend: cluster.backend(2), limits });
  cluster.setMember(1, `127.0.0.1:${leader.address.port}`);
  cluster.setMember(2, `127.0.0.1:${follower.address.port}`);
  cluster.setLeader(1);
  return {
    cluster,
    leader,
    follower,
    close: async () => {
      await Promise.all([leader.close(), follower.close()]);
    },
  };
}

/** Resolve with the first emission of `event` matching `pred`. */
export function nextEvent<T>(
  emitter: { on(e: string, f: (v: T) => void): unknown; off(e: string, f: (v: T) => void): unknown },
  event: string,
  pred: (v: T) => boolean = () => true,
): Promise<T> {
  return new Promise((resolve) => {
    const f = (v: T) => {
      if (!pred(v)) return;
      emitter.off(event, f);
      resolve(v);
    };
    emitter.on(event, f);
  });
}

/**
 * A one-member fake cluster whose member 1 leads and knows the cluster UUID `uid` (undefined: not minted yet), served
 * by a real RESP server, and a raw client connected to it. `cleanups` gets the closing of both.
 */
export async function fakeLeaderWithUid(
  uid: string | undefined,
  cleanups: (() => unknown)[],
): Promise<{ c: RawClient; cluster: FakeCluster }> {
  const cluster = new FakeCluster();
  cluster.clusterUid = uid;
  const server = await startRespServer({ backend: cluster.backend(1) });
  cleanups.push(() => server.close());
  cluster.setMember(1, `127.0.0.1:${server.address.port}`);
  cluster.setLeader(1);
  const c = await RawClient.connect(server.address.port);
  cleanups.push(() => c.close());
  return { c, cluster };
}
