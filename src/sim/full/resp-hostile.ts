// Hostile RESP clients (issue 10): a process of its own connects to the nodes' RESP ports (the production
// `ClientConnection`, parser and command table over resp-link.ts) and sends what docs/resp.md and limits.ts say the
// server must refuse or survive: a bulk length past `maxBulkBytes`, a multibulk count past `maxArgs`, a request left
// unfinished (slowloris, `requestTimeoutMs`), an inline line past `maxInlineBytes`, inline commands with unbalanced
// quotes, inline garbage words, random binary bytes, and pipelines of hundreds to thousands of PINGs in one write
// (past `readHighWaterBytes`, so the connection pauses its reading and resumes).
//
// Oracle (failure kind `resp-hostile`): each connection gets what is documented —
// - a protocol error or an unfinished request: that one `-ERR` reply, then the server closes the connection
//   (within `closeGraceMs` of its reply, also when the client never closes its end);
// - garbage inline words: one `-ERR unknown command` per line, in order, and the connection stays usable;
// - a pipeline of N PINGs: exactly N `+PONG`s, in order;
// - random binary bytes: anything, as long as the node does not crash (the existing `process-crash`).
// A connection reset by a node's death is exempt. The well-behaved RESP clients of the same nodes (a seed with hostile
// RESP clients has at least one `resp` sequence client) keep their own oracles and liveness.
// Drawn from the stream `resp-hostile` in seeds with `SimConfig.respHostile` (stream `config-hostile`) only.

import type { RespLimits } from '../../server/resp/limits.js';
import type { Prng } from '../prng.js';
import type { SimProcess } from './process.js';
import type { RespNet, SimSocket } from './resp-link.js';
import type { World } from './world.js';

export interface RespHostileConfig {
  /** Simulated ms between two hostile actions [min, max]. */
  gapMs: [number, number];
  /** The RESP server's requestTimeoutMs in these seeds (floe serve's 30 s would outlast a run). */
  requestTimeoutMs: number;
  /**
   * Workaround `resp-request-boundary` (finding FS-18, fixed; off by default): an unfinished request never ends right
   * after a CRLF, where production's request timer did not run (set by run.ts, not drawn).
   */
  avoidBoundary?: boolean;
}

export const RESP_HOSTILE_ACTIONS = [
  'bulk-oversized',
  'mbulk-oversized',
  'unterminated',
  'inline-too-big',
  'inline-unbalanced',
  'inline-garbage',
  'binary-garbage',
  'pipeline-flood',
] as const;
export type RespHostileAction = (typeof RESP_HOSTILE_ACTIONS)[number];

type Expect =
  | { kind: 'error-close'; prefix: string }
  | { kind: 'replies'; reply: string; n: number }
  | { kind: 'anything' };

interface HostileConn {
  action: RespHostileAction;
  node: number;
  expect: Expect;
  sock: SimSocket | undefined;
  text: string;
  reset: boolean;
  ended: boolean;
  /** The first bytes sent, for the report. */
  sent: string;
  openedUs: number;
}

export interface RespHostileStats {
  connections: number;
  refused: number;
  actions: Partial<Record<RespHostileAction, number>>;
  errorsClosed: number;
  pipelinedReplies: number;
  resets: number;
}

export class RespHostile {
  readonly stats: RespHostileStats = {
    connections: 0,
    refused: 0,
    actions: {},
    errorsClosed: 0,
    pipelinedReplies: 0,
    resets: 0,
  };
  private readonly conns: HostileConn[] = [];
  private stopped = false;
  stoppedAtUs = 0;
  private n = 0;

  /** How long after stop() every connection must be settled: requestTimeoutMs (≤ 3 s) + closeGraceMs (2 s) + slack. */
  static readonly SETTLE_WITHIN_US = 8_000_000;

  constructor(
    private readonly w: World,
    private readonly net: RespNet,
    private readonly proc: SimProcess,
    private readonly rng: Prng,
    private readonly cfg: RespHostileConfig,
    private readonly limits: RespLimits,
    private readonly nodes: () => { id: number; addr: string }[],
  ) {}

  start(): void {
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.stoppedAtUs = this.w.sched.nowUs;
  }

  private schedule(): void {
    const ms = this.rng.range(this.cfg.gapMs[0], this.cfg.gapMs[1]);
    this.w.sched.after(ms * 1000, this.proc, 'resp-hostile', () => {
      if (this.stopped) return;
      this.act();
      this.schedule();
    });
  }

  private act(): void {
    const nodes = this.nodes();
    if (nodes.length === 0) return;
    const target = this.rng.pick(nodes);
    const action = this.rng.pick(RESP_HOSTILE_ACTIONS);
    this.stats.actions[action] = (this.stats.actions[action] ?? 0) + 1;
    const L = this.limits;
    let bytes: Buffer;
    let expect: Expect;
    switch (action) {
      case 'bulk-oversized': {
        const len = this.rng.pick([L.maxBulkBytes + 1, 2 * L.maxBulkBytes, 2 ** 31, 2 ** 40]);
        bytes = Buffer.from(`*2\r\n$4\r\nINCR\r\n$${len}\r\nabc`);
        expect = { kind: 'error-close', prefix: '-ERR Protocol error: invalid bulk length' };
        break;
      }
      case 'mbulk-oversized': {
        const n = this.rng.pick([L.maxArgs + 1, 10 * L.maxArgs, 2 ** 31]);
        bytes = Buffer.from(`*${n}\r\n$4\r\nINCR\r\n`);
        expect = { kind: 'error-close', prefix: '-ERR Protocol error: invalid multibulk length' };
        break;
      }
      case 'unterminated': {
        const wire = '*2\r\n$4\r\nINCR\r\n$8\r\nseq-keyX\r\n';
        let cut = this.rng.range(1, 20);
        if (this.cfg.avoidBoundary && wire[cut - 1] === '\n') cut++;
        bytes = Buffer.from(wire.slice(0, cut));
        expect = { kind: 'error-close', prefix: '-ERR request not completed within' };
        break;
      }
      case 'inline-too-big':
        bytes = Buffer.alloc(L.maxInlineBytes + this.rng.range(1, 100), 0x61);
        expect = { kind: 'error-close', prefix: '-ERR Protocol error: too big inline request' };
        break;
      case 'inline-unbalanced':
        bytes = Buffer.from(`zzping "unbalanced ${this.rng.range(0, 999)}\r\n`);
        expect = { kind: 'error-close', prefix: '-ERR Protocol error: unbalanced quotes in request' };
        break;
      case 'inline-garbage': {
        const n = this.rng.range(1, 50);
        const lines: string[] = [];
        for (let i = 0; i < n; i++) {
          const word = Array.from({ length: this.rng.range(1, 12) }, () =>
            String.fromCharCode(97 + this.rng.int(26)),
          ).join('');
          lines.push(`zz${word} ${this.rng.range(0, 1e6)}\r\n`);
        }
        bytes = Buffer.from(lines.join(''));
        expect = { kind: 'replies', reply: '-ERR unknown command', n };
        break;
      }
      case 'binary-garbage': {
        const n = this.rng.range(1, 4096);
        bytes = Buffer.alloc(n);
        for (let i = 0; i < n; i++) bytes[i] = this.rng.int(256);
        expect = { kind: 'anything' };
        break;
      }
      case 'pipeline-flood': {
        const n = this.rng.pick([100, 1000, 6000]);
        bytes = Buffer.from(this.rng.chance(0.5) ? 'PING\r\n'.repeat(n) : '*1\r\n$4\r\nPING\r\n'.repeat(n));
        expect = { kind: 'replies', reply: '+PONG', n };
        break;
      }
    }
    const c: HostileConn = {
      action,
      node: target.id,
      expect,
      sock: undefined,
      text: '',
      reset: false,
      ended: false,
      sent: bytes.subarray(0, 48).toString('latin1'),
      openedUs: this.w.sched.nowUs,
    };
    this.stats.connections++;
    this.net.connect(this.proc, `hostile${++this.n}`, target.addr, (s) => {
      if (s instanceof Error) {
        this.stats.refused++;
        return;
      }
      this.conns.push(c);
      c.sock = s;
      s.on('error', () => {
        c.reset = true;
        this.stats.resets++;
      });
      s.on('data', (chunk: Buffer) => {
        c.text += chunk.toString('latin1');
        this.onData(c);
      });
      s.on('end', () => {
        c.ended = true;
        this.onEnd(c);
      });
      s.write(bytes);
    });
  }

  private fail(c: HostileConn, what: string): undefined {
    this.w.fail(
      'resp-hostile',
      `${c.action} ${JSON.stringify(c.sent)} to n${c.node} (opened at ${(c.openedUs / 1000).toFixed(0)} ms): ${what}; got ${JSON.stringify(c.text.slice(0, 120))}`,
    );
    return undefined;
  }

  private onData(c: HostileConn): undefined {
    const e = c.expect;
    if (e.kind === 'error-close') {
      if (c.text.length >= e.prefix.length && !c.text.startsWith(e.prefix))
        this.fail(c, `expected ${e.prefix}`);
      return;
    }
    if (e.kind === 'replies') {
      const lines = c.text.split('\r\n');
      lines.pop(); // an incomplete last line
      for (const l of lines) if (!l.startsWith(e.reply)) return this.fail(c, `a reply other than ${e.reply}`);
      if (lines.length > e.n) return this.fail(c, `${lines.length} replies to ${e.n} commands`);
      if (lines.length === e.n && c.sock && !c.sock.destroyed) {
        this.stats.pipelinedReplies += e.n;
        c.sock.end(); // done: a polite close
      }
    }
  }

  private onEnd(c: HostileConn): undefined {
    const e = c.expect;
    if (e.kind === 'error-close' && !c.reset) {
      if (!c.text.startsWith(e.prefix)) return this.fail(c, `closed without ${e.prefix}`);
      this.stats.errorsClosed++;
      c.sock?.end();
    }
  }

  /** Every connection settled: the server closed its end (or the node died), or a pipeline got all its replies. */
  allSettled(): boolean {
    return this.conns.every((c) => this.settled(c));
  }

  private settled(c: HostileConn): boolean {
    if (c.reset || !c.sock) return true;
    const server = c.sock.peer;
    if (!server || server.destroyed || !server.proc.alive) return true;
    const e = c.expect;
    if (e.kind === 'replies') return c.text.split('\r\n').length - 1 >= e.n;
    if (e.kind === 'anything') return true;
    return false;
  }

  /** At the end of the run (at least SETTLE_WITHIN_US after stop()). */
  checkSettled(): undefined {
    for (const c of this.conns) {
      if (this.settled(c)) continue;
      const e = c.expect;
      if (e.kind === 'replies')
        return this.fail(c, `${c.text.split('\r\n').length - 1} of ${e.n} replies by the end of the run`);
      return this.fail(
        c,
        `the server (${c.sock?.peer?.proc.name}) did not close the connection by the end of the run`,
      );
    }
  }
}
