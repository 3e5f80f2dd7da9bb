// Strangers on the peer transport (issue 10, "hostile clients"): processes that are not members connect to a
// node's peer port (`nN:7000`, the production PeerTransport's listener over peer-net.ts) and misbehave: garbage
// bytes, a HELLO with a wrong cluster id, listener id, wire version or an unknown dialer, a valid HELLO and then
// silence (slow handshakes, in floods past `maxPendingHandshakes`), an AUTH with a wrong proof, a replay of a
// member's recorded handshake bytes, a Raft message before any HELLO, and oversized length prefixes. Every
// stranger that gets as far as an ACCEPT (it never should) sends a Raft heartbeat of term STRANGER_TERM.
//
// Oracles (failure kind `peer-stranger`; a crash of the node is the existing `process-crash`):
// - nothing a stranger sends reaches Raft: peer-net.ts fails the run when the transport delivers a message of
//   STRANGER_TERM (no member's term gets near it);
// - the transport's unauthenticated connections stay bounded: 0 <= pendingHandshakes <= maxPendingHandshakes,
//   checked after every connection a stranger opens and every segment it gets;
// - no stranger connection outlives its welcome: at the end of the run (after healing, seconds past every
//   handshake timeout), the node has closed every stranger connection it accepted;
// - liveness after healing (the existing checks) with strangers having been at every node.
// Everything is drawn from the stream `peer-strangers` and the stranger process's own events, in seeds with
// `SimConfig.peerStrangers` only (stream `config-hostile`), so other seeds run as before.

import { crc32c } from '@node-rs/crc32';
import type { Message, NodeId } from '../../raft/types.js';
import { encodeMessage, WIRE_VERSION } from '../../transport/codec.js';
import { encodeFrame, FrameKind } from '../../transport/frame.js';
import {
  type Channel,
  decodeChallenge,
  encodeAuth,
  encodeHello,
  NONCE_BYTES,
} from '../../transport/handshake.js';
import type { Prng } from '../prng.js';
import type { PeerNet, SimPeerSocket } from './peer-net.js';
import type { SimProcess } from './process.js';
import type { World } from './world.js';

/** The term of every Raft message a stranger crafts; no run's terms come near it. */
export const STRANGER_TERM = 987_654_321;
/** Node ids strangers present to the network (never a member's). */
export const STRANGER_NET_ID_BASE = 9_000;

export interface PeerStrangerConfig {
  /** The transport's maxPendingHandshakes in these seeds (production default 64). */
  maxPendingHandshakes: number;
  /** Simulated ms between two stranger actions [min, max]. */
  gapMs: [number, number];
}

export const STRANGER_ACTIONS = [
  'garbage',
  'hello-wrong-cluster',
  'hello-wrong-listener',
  'hello-wrong-version',
  'hello-unknown-dialer',
  'slow',
  'slow-flood',
  'bad-proof',
  'replay',
  'message-first',
  'oversized',
  'oversized-bad-crc',
] as const;
export type StrangerAction = (typeof STRANGER_ACTIONS)[number];

export interface PeerStrangerStats {
  connections: number;
  actions: Partial<Record<StrangerAction, number>>;
  /** Connections on which the node sent REJECT, or closed. */
  rejected: number;
  closedByNode: number;
  /** ACCEPTs a stranger got (each one a failure of the oracle's premise: the proof or claim was not checked). */
  accepted: number;
  maxPendingSeen: number;
}

interface StrangerConn {
  sock: SimPeerSocket;
  target: NodeId;
  action: StrangerAction;
  openedUs: number;
}

export interface MemberView {
  id: NodeId;
  addr: string;
  /** The node's current process, if running. */
  proc: SimProcess | undefined;
}

export class PeerStrangers {
  readonly stats: PeerStrangerStats = {
    connections: 0,
    actions: {},
    rejected: 0,
    closedByNode: 0,
    accepted: 0,
    maxPendingSeen: 0,
  };
  private readonly conns: StrangerConn[] = [];
  private nextNetId = STRANGER_NET_ID_BASE;
  private stopped = false;
  stoppedAtUs = 0;

  constructor(
    private readonly w: World,
    private readonly net: PeerNet,
    private readonly proc: SimProcess,
    private readonly rng: Prng,
    private readonly cfg: PeerStrangerConfig,
    private readonly members: () => MemberView[],
  ) {}

  start(): void {
    this.schedule();
  }

  /** Ends the strangers' activity (at the heal): connects still waiting for their SYN's answer are given up. */
  stop(): void {
    this.stopped = true;
    this.stoppedAtUs = this.w.sched.nowUs;
    for (const c of this.conns) if (!c.sock.conn.listener && !c.sock.destroyed) c.sock.destroy();
  }

  /** Every stranger connection a node accepted is closed (or its node died). */
  allClosed(): boolean {
    return this.conns.every((c) => {
      const l = c.sock.conn.listener;
      return !l || l.destroyed || !l.proc.alive;
    });
  }

  /**
   * How long after the strangers stop every node must have closed their connections: the handshake timeout on a
   * clock up to 6% slow (a node paused or suspended meanwhile runs again by the heal), REJECT's 1 s grace, 1 s slack.
   */
  static readonly CLOSE_WITHIN_US = 8_000_000;

  private schedule(): void {
    const ms = this.rng.range(this.cfg.gapMs[0], this.cfg.gapMs[1]);
    this.w.sched.after(ms * 1000, this.proc, 'stranger', () => {
      if (this.stopped) return;
      this.act();
      this.schedule();
    });
  }

  private act(): void {
    const ms = this.members();
    if (ms.length === 0) return;
    const target = this.rng.pick(ms);
    const action = this.rng.pick(STRANGER_ACTIONS);
    this.stats.actions[action] = (this.stats.actions[action] ?? 0) + 1;
    if (action === 'slow-flood') {
      const n = this.cfg.maxPendingHandshakes + this.rng.range(1, 4);
      this.w.trace(`stranger: ${n} slow handshakes to n${target.id}`);
      for (let i = 0; i < n; i++) this.open(target, ms, 'slow');
      return;
    }
    this.open(target, ms, action);
  }

  /** A member id the stranger claims to be: a member that is down if there is one (its slot is free), else any. */
  private claimId(target: MemberView, ms: MemberView[]): NodeId {
    const others = ms.filter((m) => m.id !== target.id);
    if (others.length === 0) return target.id + 1;
    const down = others.filter((m) => m.proc === undefined);
    return this.rng.pick(down.length > 0 && this.rng.chance(0.7) ? down : others).id;
  }

  private hello(
    over: Partial<{ version: number; clusterId: string; dialerId: NodeId; listenerId: NodeId }>,
    target: NodeId,
    dialer: NodeId,
    channel: Channel,
  ): Buffer {
    const nonce = Buffer.alloc(NONCE_BYTES);
    for (let i = 0; i < NONCE_BYTES; i++) nonce[i] = this.rng.int(256);
    return encodeFrame(
      FrameKind.hello,
      encodeHello({
        version: over.version ?? WIRE_VERSION,
        clusterId: over.clusterId ?? 'sim',
        dialerId: over.dialerId ?? dialer,
        listenerId: over.listenerId ?? target,
        channel,
        nonce,
      }),
    );
  }

  private marker(from: NodeId, to: NodeId): Buffer {
    const m: Message = {
      type: 'heartbeat',
      from,
      to,
      term: STRANGER_TERM,
      commit: 0,
      context: new Uint8Array(0),
    };
    return encodeFrame(FrameKind.message, encodeMessage(m));
  }

  private open(target: MemberView, ms: MemberView[], action: StrangerAction): void {
    const w = this.w;
    const netId = this.nextNetId++;
    const claimed = this.claimId(target, ms);
    const channel: Channel = this.rng.chance(0.8) ? 'msg' : 'snap';
    // What to write once connected, and what to answer to a CHALLENGE and an ACCEPT.
    let first: Buffer[] = [];
    let onChallenge: ((nonce: Uint8Array) => Buffer | undefined) | undefined;
    const onAccept = () => this.marker(claimed, target.id);
    switch (action) {
      case 'garbage': {
        const n = this.rng.range(1, 2048);
        const b = Buffer.alloc(n);
        for (let i = 0; i < n; i++) b[i] = this.rng.int(256);
        first = [b];
        break;
      }
      case 'hello-wrong-cluster':
        first = [
          this.hello(
            { clusterId: this.rng.pick(['', 'prod', 'sim2', 'x'.repeat(128)]) },
            target.id,
            claimed,
            channel,
          ),
        ];
        break;
      case 'hello-wrong-listener':
        first = [this.hello({ listenerId: claimed }, target.id, claimed, channel)];
        break;
      case 'hello-wrong-version':
        first = [
          this.hello(
            { version: this.rng.pick([0, 1, 2, WIRE_VERSION + 1, 255]) },
            target.id,
            claimed,
            channel,
          ),
        ];
        break;
      case 'hello-unknown-dialer':
        first = [this.hello({ dialerId: this.rng.pick([target.id, 77, 1000]) }, target.id, claimed, channel)];
        break;
      case 'slow':
        first = [this.hello({}, target.id, claimed, channel)];
        break;
      case 'bad-proof':
        first = [this.hello({}, target.id, claimed, channel)];
        onChallenge = () => {
          const p = Buffer.alloc(32);
          for (let i = 0; i < 32; i++) p[i] = this.rng.int(256);
          return encodeFrame(FrameKind.auth, encodeAuth(p));
        };
        break;
      case 'replay': {
        const rec = this.net.recordedHandshakes.filter((r) => r.listener === target.addr);
        const r = rec.length > 0 ? this.rng.pick(rec) : undefined;
        if (!r) {
          first = [this.hello({}, target.id, claimed, channel)];
          break;
        }
        first = [r.hello];
        const auth = r.auth;
        onChallenge = () => auth;
        break;
      }
      case 'message-first':
        first = [this.marker(claimed, target.id)];
        break;
      case 'oversized':
      case 'oversized-bad-crc': {
        const prefix = encodeFrame(FrameKind.hello, Buffer.alloc(0)).subarray(0, 8);
        const len = this.rng.pick([HANDSHAKE_LIMIT + 1, 1 << 20, 0x7fff_ffff, 0xffff_ffff]);
        prefix.writeUInt32BE(len, 0);
        if (action === 'oversized') prefix.writeUInt32BE(crc32cOfLength(len), 4);
        first = [Buffer.concat([prefix, Buffer.alloc(this.rng.range(0, 64), 0x41)])];
        break;
      }
    }
    this.stats.connections++;
    let sock: SimPeerSocket | undefined;
    let buf = Buffer.alloc(0);
    sock = this.net.connectStranger(this.proc, netId, target.addr, () => {
      if (!sock || sock.destroyed) return;
      for (const b of first) sock.write(b);
      this.checkPending();
    });
    const s = sock;
    const c: StrangerConn = { sock: s, target: target.id, action, openedUs: w.sched.nowUs };
    this.conns.push(c);
    s.on('error', () => {});
    s.on('close', () => {
      this.stats.closedByNode++;
    });
    s.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        if (buf.length < 8) break;
        const L = buf.readUInt32BE(0);
        if (buf.length < 8 + L + 4) break;
        const kind = buf[8] as number;
        const payload = buf.subarray(9, 8 + L);
        buf = buf.subarray(8 + L + 4);
        if (kind === FrameKind.reject) this.stats.rejected++;
        else if (kind === FrameKind.challenge && onChallenge) {
          let nonce: Uint8Array = Buffer.alloc(0);
          try {
            nonce = decodeChallenge(payload).nonce;
          } catch {}
          const reply = onChallenge(nonce);
          if (reply) s.write(reply);
        } else if (kind === FrameKind.accept) {
          this.stats.accepted++;
          w.trace(`stranger ${action} to n${target.id} claiming n${claimed}: ACCEPTED`);
          s.write(onAccept());
        }
      }
      this.checkPending();
    });
  }

  /** The transports' pending handshakes stay within their limit. */
  checkPending(): void {
    for (const [id, t] of this.net.transports) {
      if (!t.proc.alive) continue;
      const p = t.transport.stats().pendingHandshakes;
      this.stats.maxPendingSeen = Math.max(this.stats.maxPendingSeen, p);
      if (p < 0 || p > this.cfg.maxPendingHandshakes) {
        this.w.fail(
          'peer-stranger',
          `n${id}'s transport holds ${p} pending handshakes (maxPendingHandshakes ${this.cfg.maxPendingHandshakes})`,
        );
      }
    }
  }

  /** At the end of the run (at least CLOSE_WITHIN_US after stop()): every stranger connection a live node accepted has been closed by it. */
  checkClosed(): void {
    for (const c of this.conns) {
      const l = c.sock.conn.listener;
      if (!l || l.destroyed || !l.proc.alive) continue;
      this.w.fail(
        'peer-stranger',
        `a stranger's ${c.action} connection to n${c.target}, opened at ${(c.openedUs / 1000).toFixed(0)} ms, is still open ${((this.w.sched.nowUs - this.stoppedAtUs) / 1e6).toFixed(1)} s after the strangers stopped (handshake timeout 5 s)`,
      );
      return;
    }
  }
}

/** The handshake's frame limit (handshake.ts HANDSHAKE_MAX_FRAME_BYTES), restated: a stranger only knows the docs. */
const HANDSHAKE_LIMIT = 1024;

function crc32cOfLength(len: number): number {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(len, 0);
  return crc32c(b) >>> 0;
}
