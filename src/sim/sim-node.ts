// One simulated server: its durable storage (what survives a crash), its volatile Raft core and
// state machine (what does not), and the process-level conditions the fault director controls.

import { MemoryStorage } from '../raft/memory-storage.js';
import { RawNode } from '../raft/raw-node.js';
import type { ConfState, HardState, Message, NodeId, RaftConfig, Role } from '../raft/types.js';
import type { LogView } from './checker.js';
import { KvApp } from './kv-app.js';

export type ProcessState = 'up' | 'down' | 'retired';

export class SimNode {
  /** Durable storage. The core reads it; only the simulation's persist step writes it. */
  durable: MemoryStorage;
  raw: RawNode | undefined;
  app = new KvApp();
  conf: ConfState;
  state: ProcessState = 'down';
  paused = false;
  /** Identifies the current pause, so a stale resume timer cannot end a later pause early. */
  pauseToken = 0;
  /** Messages that arrived while paused, delivered in order on resume. */
  inbox: Array<{ msg: Message; senderLife: number }> = [];
  role: Role = 'follower';
  lead: NodeId = 0;
  /** Mirror of the durable hard state (what a restart would read). */
  durableHs: HardState = { term: 0, vote: 0, commit: 0 };
  /** Armed torn write: the next Ready with something to persist is persisted only in part. */
  tornPending = false;
  /** Bumped on every crash, so timers scheduled for an earlier life can tell they are stale. */
  incarnation = 0;
  /** Set once a committed conf change removed this node. */
  removed = false;

  constructor(
    readonly id: NodeId,
    /** Virtual microseconds between two ticks of this node's clock (its clock rate). */
    readonly tickPeriodUs: number,
    /** Builds the core's config; `applied` is the snapshot index the state machine restarts from. */
    private readonly makeConfig: (applied: number) => RaftConfig,
    bootstrapConf: ConfState,
  ) {
    this.durable = new MemoryStorage(bootstrapConf);
    this.conf = bootstrapConf;
  }

  get alive(): boolean {
    return this.state === 'up' && this.raw !== undefined;
  }

  /** Up and not paused: able to take a step right now. */
  get active(): boolean {
    return this.alive && !this.paused;
  }

  /** (Re)starts from durable storage only: a fresh core, and a state machine rebuilt from the snapshot. */
  start(): void {
    // Clone so that nothing the previous incarnation held by reference can leak into this one.
    this.durable = this.durable.clone();
    const snap = this.durable.snapshot();
    this.app = KvApp.restore(snap.data);
    this.conf = { voters: snap.metadata.conf.voters.slice(), learners: snap.metadata.conf.learners.slice() };
    this.durableHs = { ...this.durable.initialState().hardState };
    this.raw = new RawNode(this.makeConfig(snap.metadata.index), this.durable);
    this.state = 'up';
    this.paused = false;
    this.inbox = [];
    this.role = 'follower';
    this.lead = 0;
  }

  /** Drops every volatile thing: the core, the state machine, queued messages. */
  crash(): void {
    this.raw = undefined;
    this.state = 'down';
    this.paused = false;
    this.inbox = [];
    this.role = 'follower';
    this.lead = 0;
    this.tornPending = false;
    this.incarnation++;
  }

  retire(): void {
    this.crash();
    this.state = 'retired';
  }

  /** A LogView over the durable log, for the checker. */
  view(): LogView {
    return storageView(this.durable);
  }
}

export function storageView(s: MemoryStorage): LogView {
  const meta = s.snapshot().metadata;
  const first = s.firstIndex();
  const last = s.lastIndex();
  return {
    snapshotIndex: meta.index,
    snapshotTerm: meta.term,
    lastIndex: last,
    term: (i: number) => {
      if (i === meta.index) return meta.term;
      if (i < first - 1 || i > last) return undefined;
      return s.term(i);
    },
  };
}
