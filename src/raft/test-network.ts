// A tiny deterministic cluster for tests: several RawNodes, each with a MemoryStorage and a toy state
// machine (the list of applied payloads), connected by a FIFO network that can drop, cut and isolate.
// It follows the Ready contract exactly: persist, send, apply, advance.

import { MemoryStorage } from './memory-storage.js';
import { RawNode } from './raw-node.js';
import type { ConfState, Entry, Message, NodeId, RaftConfig, ReadState, Snapshot } from './types.js';

/** Deterministic PRNG (mulberry32) returning an integer in [0, n). */
export function seededRandom(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n: number) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const r = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    return Math.floor(r * n);
  };
}

const enc = new TextEncoder();
const dec = new TextDecoder();
export const bytes = (s: string): Uint8Array => enc.encode(s);
export const text = (b: Uint8Array): string => dec.decode(b);

export interface Peer {
  id: NodeId;
  node: RawNode;
  /** The durable state: survives restart(). */
  storage: MemoryStorage;
  /** Applied normal payloads (as strings), with their index. The toy state machine. */
  applied: { index: number; data: string }[];
  appliedIndex: number;
  conf: ConfState;
  readStates: ReadState[];
  stopped: boolean;
}

export type NetConfig = Omit<RaftConfig, 'id' | 'random'>;

export class TestNetwork {
  readonly peers = new Map<NodeId, Peer>();
  /** Every message ever handed to the network (delivered or not), for assertions. */
  readonly sent: Message[] = [];
  /** Messages captured by `hold` instead of delivered. */
  readonly held: Message[] = [];
  /** Return true to drop a message. */
  dropIf: ((m: Message) => boolean) | undefined;
  /** Return true to capture a message into `held` (deliver later with deliverHeld). */
  holdIf: ((m: Message) => boolean) | undefined;
  /** Rewrites each round of queued messages before delivery: reorder, duplicate or drop them. */
  mangle: ((queue: Message[]) => Message[]) | undefined;
  private queue: Message[] = [];
  private readonly cuts = new Set<string>();
  private readonly isolated = new Set<NodeId>();
  private seed: number;

  constructor(
    ids: NodeId[],
    readonly config: NetConfig = { electionTicks: 10, heartbeatTicks: 1 },
    opts: { learners?: NodeId[]; seed?: number } = {},
  ) {
    this.seed = opts.seed ?? 1;
    const conf: ConfState = {
      voters: ids.filter((i) => !opts.learners?.includes(i)),
      learners: opts.learners ?? [],
    };
    for (const id of ids) this.start(id, new MemoryStorage(conf));
  }

  /** Starts a node on the given durable storage (a new node, or a restart). */
  start(id: NodeId, storage: MemoryStorage, extra: Partial<NetConfig> = {}): Peer {
    const node = new RawNode(
      { ...this.config, ...extra, id, random: seededRandom(this.seed++ * 7919 + id) },
      storage,
    );
    const snap = storage.snapshot();
    const peer: Peer = {
      id,
      node,
      storage,
      applied: snap.data.length > 0 ? (JSON.parse(text(snap.data)) as Peer['applied']) : [],
      appliedIndex: snap.metadata.index,
      conf: storage.initialState().conf,
      readStates: [],
      stopped: false,
    };
    this.peers.set(id, peer);
    return peer;
  }

  /** A brand-new node joining an existing cluster: empty storage, learns everything from the leader. */
  addNode(id: NodeId): Peer {
    return this.start(id, new MemoryStorage());
  }

  /** Crash and restart: volatile state is lost, storage survives. */
  restart(id: NodeId, extra: Partial<NetConfig> = {}): Peer {
    return this.start(id, this.peer(id).storage.clone(), extra);
  }

  stop(id: NodeId): void {
    this.peer(id).stopped = true;
  }

  peer(id: NodeId): Peer {
    const p = this.peers.get(id);
    if (p === undefined) throw new Error(`no peer ${id}`);
    return p;
  }

  node(id: NodeId): RawNode {
    return this.peer(id).node;
  }

  isolate(id: NodeId): void {
    this.isolated.add(id);
  }

  cut(a: NodeId, b: NodeId): void {
    this.cuts.add(`${a}-${b}`);
    this.cuts.add(`${b}-${a}`);
  }

  heal(): void {
    this.isolated.clear();
    this.cuts.clear();
    this.dropIf = undefined;
    this.holdIf = undefined;
    this.mangle = undefined;
  }

  private reachable(m: Message): boolean {
    if (this.isolated.has(m.from) || this.isolated.has(m.to)) return false;
    if (this.cuts.has(`${m.from}-${m.to}`)) return false;
    const to = this.peers.get(m.to);
    return to !== undefined && !to.stopped;
  }

  /** Drains every node's Ready (persist, send, apply, advance). Returns whether anything happened. */
  processReadies(): boolean {
    let any = false;
    for (const p of this.peers.values()) {
      while (!p.stopped && p.node.hasReady()) {
        any = true;
        this.handleReady(p);
      }
    }
    return any;
  }

  private handleReady(p: Peer): void {
    const rd = p.node.ready();
    if (rd.hardState) p.storage.setHardState(rd.hardState);
    if (rd.snapshot) p.storage.applySnapshot(rd.snapshot);
    p.storage.append(rd.entries);
    for (const m of rd.messages) {
      this.sent.push(m);
      this.queue.push(m);
    }
    if (rd.snapshot) this.applySnapshot(p, rd.snapshot);
    for (const e of rd.committedEntries) this.applyEntry(p, e);
    for (const rs of rd.readStates) p.readStates.push(rs);
    p.node.advance(rd);
  }

  private applySnapshot(p: Peer, s: Snapshot): void {
    p.applied = s.data.length > 0 ? (JSON.parse(text(s.data)) as Peer['applied']) : [];
    p.appliedIndex = s.metadata.index;
    p.conf = s.metadata.conf;
  }

  private applyEntry(p: Peer, e: Entry): void {
    if (e.index !== p.appliedIndex + 1) {
      throw new Error(`node ${p.id} applied ${e.index} after ${p.appliedIndex}: gap or repeat`);
    }
    p.appliedIndex = e.index;
    if (e.type === 'conf') p.conf = p.node.applyConfChange(e.change);
    else if (e.data.length > 0) p.applied.push({ index: e.index, data: text(e.data) });
  }

  /** Delivers every queued message once (messages they cause are queued for the next round). */
  deliverQueued(): boolean {
    const q = this.mangle === undefined ? this.queue : this.mangle(this.queue);
    if (this.queue.length === 0) return false;
    // A transport must report every snapshot it fails to deliver, including ones lost on the way.
    if (q !== this.queue) {
      const kept = new Set(q);
      for (const m of this.queue) if (m.type === 'snap' && !kept.has(m)) this.reportSnapshot(m, false);
    }
    this.queue = [];
    for (const m of q) this.deliver(m);
    return true;
  }

  private deliver(m: Message): void {
    if (this.dropIf?.(m) || !this.reachable(m)) {
      if (m.type === 'snap') this.reportSnapshot(m, false);
      return;
    }
    if (this.holdIf?.(m)) {
      this.held.push(m);
      return;
    }
    this.peer(m.to).node.step(m);
    if (m.type === 'snap') this.reportSnapshot(m, true);
  }

  private reportSnapshot(m: Message, ok: boolean): void {
    const from = this.peers.get(m.from);
    if (from !== undefined && !from.stopped) from.node.reportSnapshot(m.to, ok);
  }

  /** Delivers held messages (all, or those matching `which`), in the order they were held. */
  deliverHeld(which: (m: Message) => boolean = () => true): void {
    const keep: Message[] = [];
    const go: Message[] = [];
    for (const m of this.held) (which(m) ? go : keep).push(m);
    this.held.length = 0;
    this.held.push(...keep);
    for (const m of go) if (this.reachable(m)) this.peer(m.to).node.step(m);
  }

  /** Runs Readies and deliveries until nothing moves. */
  stabilize(maxRounds = 10_000): void {
    for (let i = 0; i < maxRounds; i++) {
      const a = this.processReadies();
      const b = this.deliverQueued();
      if (!a && !b) return;
    }
    throw new Error('network did not stabilize');
  }

  /** Ticks every running node once, then stabilizes. */
  tick(n = 1, ids?: NodeId[]): void {
    for (let i = 0; i < n; i++) {
      for (const p of this.peers.values()) {
        if (!p.stopped && (ids === undefined || ids.includes(p.id))) p.node.tick();
      }
      this.stabilize();
    }
  }

  /** Makes `id` campaign and stabilizes; returns the resulting leader (if any). */
  elect(id: NodeId): NodeId | undefined {
    this.node(id).campaign();
    this.stabilize();
    return this.leader();
  }

  /** The node that is leader at the highest term, if any. */
  leader(): NodeId | undefined {
    let best: Peer | undefined;
    for (const p of this.peers.values()) {
      if (p.stopped) continue;
      const s = p.node.status();
      if (s.role === 'leader' && (best === undefined || s.term > best.node.status().term)) best = p;
    }
    return best?.id;
  }

  propose(id: NodeId, data: string): void {
    this.node(id).propose(bytes(data));
  }

  /** Payloads applied by a node, in order. */
  appliedData(id: NodeId): string[] {
    return this.peer(id).applied.map((a) => a.data);
  }

  /** Creates a snapshot of node id's applied state at its applied index and compacts to `compactTo`. */
  snapshotAndCompact(id: NodeId, compactTo?: number): Snapshot {
    const p = this.peer(id);
    const at = p.appliedIndex;
    const data = bytes(JSON.stringify(p.applied.filter((a) => a.index <= at)));
    const snap = p.storage.createSnapshot(at, p.conf, data);
    p.storage.compact(compactTo ?? at);
    return snap;
  }
}

/**
 * A lone node for unit-style tests: step messages in by hand, read what it says back.
 * `drain` handles Readies like a real caller and returns the messages sent.
 */
export class Solo {
  readonly storage: MemoryStorage;
  readonly node: RawNode;
  readonly committed: Entry[] = [];
  readonly readStates: ReadState[] = [];

  constructor(id: NodeId, conf: ConfState, config: Partial<NetConfig> = {}, storage?: MemoryStorage) {
    this.storage = storage ?? new MemoryStorage(conf);
    this.node = new RawNode(
      { electionTicks: 10, heartbeatTicks: 1, ...config, id, random: seededRandom(id) },
      this.storage,
    );
  }

  drain(): Message[] {
    const out: Message[] = [];
    while (this.node.hasReady()) {
      const rd = this.node.ready();
      if (rd.hardState) this.storage.setHardState(rd.hardState);
      if (rd.snapshot) this.storage.applySnapshot(rd.snapshot);
      this.storage.append(rd.entries);
      out.push(...rd.messages);
      for (const e of rd.committedEntries) {
        this.committed.push(e);
        if (e.type === 'conf') this.node.applyConfChange(e.change);
      }
      this.readStates.push(...rd.readStates);
      this.node.advance(rd);
    }
    return out;
  }
}
