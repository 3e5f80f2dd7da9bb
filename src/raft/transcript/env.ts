// The interaction environment transcripts drive: a few RawNodes, each with a durable MemoryStorage
// and a toy state machine (the list of applied payloads), and a network that holds every sent
// message until a command delivers or drops it. Nothing happens unless a command says so — no
// automatic Ready handling, no automatic delivery, no automatic transport reports — so a
// transcript shows every step of the protocol, in the order the caller performs it.
//
// The Ready contract is followed as docs/raft-core.md states it: persist (snapshot, entries, hard
// state), send, apply (snapshot, committed entries, conf changes), advance. `process-ready torn=K`
// persists only the first K of those units and then crashes the node, as a power cut would.

import { MemoryStorage } from '../memory-storage.js';
import { RawNode } from '../raw-node.js';
import {
  type ConfChange,
  type ConfState,
  type Entry,
  InvalidConfChangeError,
  type Message,
  type NodeId,
  ProposalDroppedError,
  type RaftConfig,
  type Ready,
  type Snapshot,
} from '../types.js';
import type { Block } from './datadriven.js';
import * as fmt from './format.js';

/** Per-node settings, given to add-nodes and kept for restarts. */
type NodeSettings = Omit<RaftConfig, 'id' | 'random'> & { randomOffset: number };

interface TNode {
  id: NodeId;
  settings: NodeSettings;
  /** What survives a crash. */
  storage: MemoryStorage;
  /** Undefined while the node is down. */
  raw: RawNode | undefined;
  /** The toy state machine: applied non-empty payloads with their index. */
  applied: { index: number; data: string }[];
  appliedIndex: number;
  conf: ConfState;
}

/** A bad command or argument in a transcript: reported with the file and line, fails the test. */
export class CommandError extends Error {}

const encoder = new TextEncoder();
const CHANGE_TYPES: Record<string, ConfChange['type']> = {
  'add-learner': 'addLearner',
  'add-voter': 'addVoter',
  remove: 'remove',
};

export class Env {
  private readonly nodes = new Map<NodeId, TNode>();
  /** Sent and not yet delivered or dropped, in send order. */
  private inflight: Message[] = [];
  /** Directed links that are down, as "from>to". */
  private readonly cuts = new Set<string>();
  /** Nodes cut off from every other node, including ones added later. */
  private readonly isolated = new Set<NodeId>();
  private out: string[] = [];

  /** Runs one block and returns its output lines (never empty: "ok" when nothing was printed). */
  run(block: Block): string[] {
    this.out = [];
    const handler = this.handlers[block.command];
    if (handler === undefined) {
      throw new CommandError(
        `unknown command "${block.command}" (known: ${Object.keys(this.handlers).sort().join(', ')})`,
      );
    }
    handler(new Args(block));
    return this.out.length > 0 ? this.out : ['ok'];
  }

  private print(line: string): void {
    this.out.push(line);
  }

  private readonly handlers: Record<string, (a: Args) => void> = {
    'add-nodes': (a) => this.addNodes(a),
    campaign: (a) => this.forEach(this.ids(a), (n) => this.core(this.up(n.id), (raw) => raw.campaign())),
    propose: (a) => this.propose(a),
    'propose-conf-change': (a) => this.proposeConfChange(a),
    'transfer-leader': (a) => {
      a.allow();
      const from = a.positionalInt(0);
      const to = a.positionalInt(1);
      this.core(this.up(from), (raw) => raw.transferLeadership(to));
    },
    'read-index': (a) => {
      a.allow();
      const id = a.positionalInt(0);
      const ctx = a.positional(1);
      this.core(this.up(id), (raw) => raw.readIndex(encoder.encode(ctx)));
    },
    tick: (a) => {
      const nodes = this.ids(a, { keys: ['n'] });
      const n = a.int('n', 1);
      this.forEach(nodes, (node) => this.tick(node, n));
    },
    'tick-election': (a) => this.forEach(this.ids(a), (n) => this.tick(n, n.settings.electionTicks)),
    'tick-heartbeat': (a) => this.forEach(this.ids(a), (n) => this.tick(n, n.settings.heartbeatTicks)),
    'process-ready': (a) => this.processReadyCommand(a),
    deliver: (a) => this.deliverCommand(a, false),
    drop: (a) => this.deliverCommand(a, true),
    'in-flight': (a) => {
      a.allow();
      for (const m of this.inflight) this.print(fmt.message(m));
      if (this.inflight.length === 0) this.print('no messages in flight');
    },
    stabilize: (a) => this.stabilize(a),
    crash: (a) => this.forEach(this.ids(a), (n) => this.crash(n)),
    restart: (a) => this.forEach(this.ids(a), (n) => this.restart(n)),
    status: (a) => this.forEach(this.ids(a, { all: true }), (n) => this.status(n)),
    'raft-log': (a) => this.forEach(this.ids(a, { all: true }), (n) => this.raftLog(n)),
    applied: (a) =>
      this.forEach(this.ids(a, { all: true }), (n) =>
        // The state machine is volatile: a node that is down has none.
        this.print(
          n.raw === undefined
            ? `n${n.id}: down`
            : `n${n.id}: applied=${n.appliedIndex} [${n.applied.map((x) => `${x.index}:${x.data}`).join(' ')}] ${fmt.conf(n.conf)}`,
        ),
      ),
    snapshot: (a) => this.forEach(this.ids(a), (n) => this.snapshot(n)),
    compact: (a) => {
      a.allow();
      const id = a.positionalInt(0);
      const index = a.positionalInt(1);
      const n = this.get(id);
      n.storage.compact(index);
      this.print(`n${id}: log now ${n.storage.firstIndex()}..${n.storage.lastIndex()}`);
    },
    'strip-resulting': (a) => this.forEach(this.ids(a), (n) => this.stripResulting(n)),
    'report-snapshot': (a) => {
      a.allow();
      const from = a.positionalInt(0);
      const to = a.positionalInt(1);
      const outcome = a.positional(2);
      if (outcome !== 'ok' && outcome !== 'fail') {
        throw new CommandError(`report-snapshot: the outcome must be "ok" or "fail", got "${outcome}"`);
      }
      this.core(this.up(from), (raw) => raw.reportSnapshot(to, outcome === 'ok'));
    },
    'report-unreachable': (a) => {
      a.allow();
      const from = a.positionalInt(0);
      const to = a.positionalInt(1);
      this.core(this.up(from), (raw) => raw.reportUnreachable(to));
    },
    isolate: (a) => this.forEach(this.ids(a), (n) => this.isolated.add(n.id)),
    cut: (a) => {
      a.allow('one-way');
      const x = a.positionalInt(0);
      const y = a.positionalInt(1);
      this.cuts.add(`${x}>${y}`);
      if (!a.bool('one-way', false)) this.cuts.add(`${y}>${x}`);
    },
    heal: (a) => {
      a.allow();
      this.cuts.clear();
      this.isolated.clear();
    },
  };

  // ---- nodes -----------------------------------------------------------------------------------

  private addNodes(a: Args): void {
    a.allow(
      'voters',
      'learners',
      'pre-vote',
      'check-quorum',
      'lease',
      'election',
      'heartbeat',
      'random',
      'max-inflight',
      'max-entries',
      'max-committed',
    );
    const count = a.positionalInt(0);
    const settings: NodeSettings = {
      electionTicks: a.int('election', 10),
      heartbeatTicks: a.int('heartbeat', 1),
      preVote: a.bool('pre-vote', true),
      checkQuorum: a.bool('check-quorum', true),
      leaderLease: a.bool('lease', false),
      maxInflightMessages: a.int('max-inflight', 256),
      maxEntriesPerMessage: a.int('max-entries', 4096),
      maxCommittedEntriesPerReady: a.int('max-committed', 4096),
      randomOffset: a.int('random', 0),
    };
    const voters = a.intList('voters');
    const learners = a.intList('learners') ?? [];
    let next = Math.max(0, ...this.nodes.keys()) + 1;
    for (let i = 0; i < count; i++) {
      const id = next++;
      // With a membership: a founding member. Without: a node joining a running cluster, which
      // learns everything (the membership included) from the leader.
      const storage = voters === undefined ? new MemoryStorage() : new MemoryStorage({ voters, learners });
      const n: TNode = {
        id,
        settings,
        storage,
        raw: undefined,
        applied: [],
        appliedIndex: 0,
        conf: storage.initialState().conf,
      };
      this.nodes.set(id, n);
      this.start(n);
      this.status(n);
    }
  }

  /** Builds a fresh core on the node's durable storage and rebuilds the state machine from its snapshot. */
  private start(n: TNode): boolean {
    const { randomOffset, ...config } = n.settings;
    // The election timeout is electionTicks + randomOffset (the core draws it in [e, 2e)): fixed, so
    // a transcript decides who times out first.
    const random = (bound: number): number => Math.min(randomOffset, bound - 1);
    // A clone: nothing the previous incarnation held by reference survives the restart.
    n.storage = n.storage.clone();
    const snap = n.storage.snapshot();
    try {
      n.raw = new RawNode({ ...config, id: n.id, random }, n.storage);
    } catch (err) {
      n.raw = undefined;
      this.print(`n${n.id}: cannot start: ${(err as Error).message}`);
      return false;
    }
    n.applied = snap.data.length > 0 ? (JSON.parse(fmt.text(snap.data)) as TNode['applied']) : [];
    n.appliedIndex = snap.metadata.index;
    n.conf = n.storage.initialState().conf;
    return true;
  }

  private crash(n: TNode): void {
    if (n.raw === undefined) throw new CommandError(`n${n.id} is already down`);
    n.raw = undefined;
    this.print(`n${n.id} crashed`);
    // Messages on their way to a dead process are lost with it.
    const kept: Message[] = [];
    for (const m of this.inflight) {
      if (m.to === n.id) this.print(`  lost ${fmt.message(m)}`);
      else kept.push(m);
    }
    this.inflight = kept;
  }

  private restart(n: TNode): void {
    if (n.raw !== undefined) throw new CommandError(`n${n.id} is running; crash it first`);
    if (this.start(n)) this.status(n);
  }

  private status(n: TNode): void {
    if (n.raw === undefined) {
      this.print(`n${n.id}: down`);
      return;
    }
    for (const l of fmt.status(n.raw.status())) this.print(l);
  }

  private raftLog(n: TNode): void {
    const s = n.storage;
    this.print(
      `n${n.id}: hard state ${fmt.hardState(s.hardState())}; snapshot ${fmt.snapshot(s.snapshot())}`,
    );
    const first = s.firstIndex();
    const last = s.lastIndex();
    if (last < first) this.print('  (no entries)');
    for (const e of s.entries(first, last + 1)) this.print(`  ${fmt.entry(e)}`);
  }

  private snapshot(n: TNode): void {
    const data = encoder.encode(JSON.stringify(n.applied));
    const snap = n.storage.createSnapshot(n.appliedIndex, n.conf, data);
    this.print(`n${n.id}: snapshot ${fmt.snapshot(snap)}`);
  }

  /** Simulates a storage that loses conf entries' `resulting` (finding FS-2): rewrites the durable log without it. */
  private stripResulting(n: TNode): void {
    if (n.raw !== undefined)
      throw new CommandError(`strip-resulting: n${n.id} must be down (crash it first)`);
    const s = n.storage;
    const first = s.firstIndex();
    const ents = s.entries(first, s.lastIndex() + 1).map((e): Entry => {
      if (e.type !== 'conf') return e;
      const { resulting: _dropped, ...change } = e.change;
      return { ...e, change };
    });
    s.append(ents);
    this.print(
      `n${n.id}: conf entries in ${first}..${s.lastIndex()} no longer carry their resulting membership`,
    );
  }

  // ---- requests --------------------------------------------------------------------------------

  private propose(a: Args): void {
    a.allow();
    const id = a.positionalInt(0);
    const data = a.positional(1);
    const pos = this.core(this.up(id), (raw) => raw.propose(encoder.encode(data)));
    if (pos !== undefined) this.print(`n${id}: proposed ${JSON.stringify(data)} at ${pos.index}/${pos.term}`);
  }

  private proposeConfChange(a: Args): void {
    a.allow();
    const id = a.positionalInt(0);
    const kind = a.positional(1);
    const type = CHANGE_TYPES[kind];
    if (type === undefined) {
      throw new CommandError(
        `propose-conf-change: the change must be one of ${Object.keys(CHANGE_TYPES).join(', ')}, got "${kind}"`,
      );
    }
    const nodeId = a.positionalInt(2);
    this.core(this.up(id), (raw) => raw.proposeConfChange({ type, nodeId }));
  }

  private tick(n: TNode, times: number): void {
    const raw = this.up(n.id).raw as RawNode;
    for (let i = 0; i < times; i++) raw.tick();
  }

  /**
   * Calls the core; a refusal it documents (ProposalDroppedError, InvalidConfChangeError) is part of
   * the behaviour under test and is printed. Anything else fails the transcript.
   */
  private core<T>(n: TNode, fn: (raw: RawNode) => T): T | undefined {
    try {
      return fn(n.raw as RawNode);
    } catch (err) {
      if (err instanceof ProposalDroppedError || err instanceof InvalidConfChangeError) {
        this.print(`n${n.id}: refused: ${err.message}`);
        return undefined;
      }
      throw err;
    }
  }

  // ---- Ready handling --------------------------------------------------------------------------

  private processReadyCommand(a: Args): void {
    const ids = this.ids(a, { all: true, keys: ['torn'] });
    const torn = a.has('torn') ? a.int('torn', 0) : undefined;
    const explicit = a.positionals().length > 0;
    if (torn !== undefined && ids.length !== 1) {
      throw new CommandError('process-ready torn=K takes exactly one node');
    }
    for (const n of ids) {
      if (n.raw === undefined) {
        if (explicit) this.print(`> n${n.id} is down`);
        continue;
      }
      if (!n.raw.hasReady()) {
        if (explicit) this.print(`> n${n.id} has no Ready`);
        continue;
      }
      this.handleReady(n, torn);
    }
  }

  /** Handles one Ready of a node that has one (or, with `torn`, persists part of it and crashes). */
  private handleReady(n: TNode, torn?: number): void {
    const raw = n.raw as RawNode;
    const rd = raw.ready();
    this.print(`> n${n.id} handles a Ready`);
    for (const l of fmt.ready(rd)) this.print(l);

    // 1. Persist: snapshot, entries, hard state (or only the first `torn` of those units).
    const hasSnap = rd.snapshot !== undefined;
    const units = (hasSnap ? 1 : 0) + rd.entries.length + (rd.hardState ? 1 : 0);
    if (torn !== undefined && units === 0) {
      throw new CommandError(`process-ready torn=${torn}: n${n.id}'s Ready has nothing to persist`);
    }
    let budget = torn === undefined ? units : Math.min(torn, units);
    if (hasSnap && budget > 0) {
      n.storage.applySnapshot(rd.snapshot as Snapshot);
      budget--;
    }
    const k = Math.min(budget, rd.entries.length);
    if (k > 0) n.storage.append(rd.entries.slice(0, k));
    budget -= k;
    if (rd.hardState && budget > 0) n.storage.setHardState(rd.hardState);
    if (torn !== undefined) {
      this.print(
        `  torn write: persisted ${Math.min(torn, units)} of ${units} units (snapshot, entries, hard state); n${n.id} dies before sending`,
      );
      this.crash(n);
      return;
    }

    // 2. Send.
    for (const m of rd.messages) this.inflight.push(structuredClone(m));

    // 3. Apply.
    this.apply(n, rd);

    // 4. Advance.
    raw.advance(rd);
  }

  private apply(n: TNode, rd: Ready): void {
    if (rd.snapshot) {
      const s = rd.snapshot;
      n.applied = s.data.length > 0 ? (JSON.parse(fmt.text(s.data)) as TNode['applied']) : [];
      n.appliedIndex = s.metadata.index;
      n.conf = s.metadata.conf;
    }
    for (const e of rd.committedEntries) {
      if (e.index !== n.appliedIndex + 1) {
        // Never fails the run here: the transcript shows it, so a regression reads as one.
        this.print(
          `  APPLY ERROR: n${n.id} applied ${e.index} right after ${n.appliedIndex} (gap or repeat)`,
        );
      }
      n.appliedIndex = e.index;
      if (e.type === 'conf') {
        n.conf = (n.raw as RawNode).applyConfChange(e.change);
        this.print(`  applied ${fmt.entry(e).split(' => ')[0]}: now ${fmt.conf(n.conf)}`);
      } else if (e.data.length > 0) {
        n.applied.push({ index: e.index, data: fmt.text(e.data) });
      }
    }
  }

  // ---- the network -----------------------------------------------------------------------------

  private matcher(a: Args): (m: Message) => boolean {
    const from = a.intList('from');
    const to = a.intList('to');
    const types = a.list('type');
    return (m) =>
      (from === undefined || from.includes(m.from)) &&
      (to === undefined || to.includes(m.to)) &&
      (types === undefined || types.includes(m.type));
  }

  /** Delivers (or drops) every in-flight message that matches the filters, in send order. */
  private deliverCommand(a: Args, drop: boolean): void {
    a.allow('from', 'to', 'type');
    if (a.positionals().length > 0) {
      throw new CommandError(`${drop ? 'drop' : 'deliver'} takes only from=, to= and type= filters`);
    }
    const match = this.matcher(a);
    const go: Message[] = [];
    const keep: Message[] = [];
    for (const m of this.inflight) (match(m) ? go : keep).push(m);
    this.inflight = keep;
    for (const m of go) {
      if (drop) this.print(`dropped ${fmt.message(m)}`);
      else this.deliverOne(m);
    }
    if (go.length === 0) this.print('no matching messages');
  }

  private deliverOne(m: Message): void {
    const to = this.nodes.get(m.to);
    if (to === undefined || to.raw === undefined) {
      this.print(`${fmt.message(m)} -- lost: n${m.to} is down`);
      return;
    }
    if (this.linkDown(m)) {
      this.print(`${fmt.message(m)} -- lost: link cut`);
      return;
    }
    this.print(fmt.message(m));
    to.raw.step(m);
  }

  /** Handles Readies and delivers messages until nothing moves (only among the given nodes, if any). */
  private stabilize(a: Args): void {
    const ids = this.ids(a, { all: true }).map((n) => n.id);
    const inScope = (m: Message): boolean => ids.includes(m.from) && ids.includes(m.to);
    for (let round = 0; round < 1000; round++) {
      let moved = false;
      for (const id of ids) {
        const n = this.get(id);
        while (n.raw?.hasReady()) {
          moved = true;
          this.handleReady(n);
        }
      }
      const go = this.inflight.filter(inScope);
      if (go.length > 0) {
        moved = true;
        this.inflight = this.inflight.filter((m) => !inScope(m));
        this.print('> deliver');
        for (const m of go) {
          this.print(`  ${this.describeDelivery(m)}`);
          this.deliverQuiet(m);
        }
      }
      if (!moved) return;
    }
    throw new CommandError('stabilize: still moving after 1000 rounds');
  }

  private describeDelivery(m: Message): string {
    const to = this.nodes.get(m.to);
    if (to === undefined || to.raw === undefined) return `${fmt.message(m)} -- lost: n${m.to} is down`;
    if (this.linkDown(m)) return `${fmt.message(m)} -- lost: link cut`;
    return fmt.message(m);
  }

  private deliverQuiet(m: Message): void {
    const to = this.nodes.get(m.to);
    if (to?.raw === undefined || this.linkDown(m)) return;
    to.raw.step(m);
  }

  private linkDown(m: Message): boolean {
    return this.isolated.has(m.from) || this.isolated.has(m.to) || this.cuts.has(`${m.from}>${m.to}`);
  }

  // ---- helpers ---------------------------------------------------------------------------------

  private get(id: NodeId): TNode {
    const n = this.nodes.get(id);
    if (n === undefined) {
      throw new CommandError(`no node ${id} (nodes: ${[...this.nodes.keys()].join(', ') || 'none yet'})`);
    }
    return n;
  }

  private up(id: NodeId): TNode {
    const n = this.get(id);
    if (n.raw === undefined) throw new CommandError(`n${id} is down`);
    return n;
  }

  private forEach(nodes: TNode[], fn: (n: TNode) => void): void {
    for (const n of nodes) fn(n);
  }

  /**
   * The nodes a command names: its positional arguments. With `all`, every node (in id order) when
   * none is named; otherwise at least one is required. `keys` are the named arguments it takes.
   */
  private ids(a: Args, opts: { all?: boolean; keys?: string[] } = {}): TNode[] {
    a.allow(...(opts.keys ?? []));
    const ids = a.positionalIds();
    if (ids.length === 0) {
      if (!opts.all) throw new CommandError(`${a.command}: name at least one node`);
      return [...this.nodes.values()].sort((x, y) => x.id - y.id);
    }
    return ids.map((id) => this.get(id));
  }
}

/** A command's arguments, with typed accessors whose errors name the command, the argument and what was wrong. */
class Args {
  constructor(private readonly block: Block) {}

  get command(): string {
    return this.block.command;
  }

  private named(key: string): string[] | undefined {
    return this.block.args.find((a) => a.key === key && a.values !== undefined)?.values;
  }

  /** Rejects named arguments the command does not take. */
  allow(...keys: string[]): void {
    for (const a of this.block.args) {
      if (a.values !== undefined && !keys.includes(a.key)) {
        const takes = keys.length > 0 ? ` (it takes ${keys.map((k) => `${k}=`).join(', ')})` : '';
        throw new CommandError(`${this.command} does not take ${a.key}=${takes}`);
      }
    }
  }

  has(key: string): boolean {
    return this.named(key) !== undefined;
  }

  positionals(): string[] {
    return this.block.args.filter((a) => a.values === undefined).map((a) => a.key);
  }

  positional(i: number): string {
    const p = this.positionals()[i];
    if (p === undefined) throw new CommandError(`${this.command}: missing argument ${i + 1}`);
    return p;
  }

  positionalInt(i: number): number {
    return toInt(this.command, `argument ${i + 1}`, this.positional(i));
  }

  /** Every positional argument as a node id. */
  positionalIds(): number[] {
    return this.positionals().map((p, i) => toInt(this.command, `argument ${i + 1} (a node id)`, p));
  }

  int(key: string, dflt: number): number {
    const v = this.named(key);
    if (v === undefined) return dflt;
    if (v.length !== 1) throw new CommandError(`${this.command}: ${key}= takes one integer`);
    return toInt(this.command, `${key}=`, v[0] as string);
  }

  bool(key: string, dflt: boolean): boolean {
    const v = this.named(key);
    if (v === undefined) return dflt;
    if (v.length !== 1 || (v[0] !== 'true' && v[0] !== 'false')) {
      throw new CommandError(`${this.command}: ${key}= must be true or false, got "${v.join(',')}"`);
    }
    return v[0] === 'true';
  }

  list(key: string): string[] | undefined {
    return this.named(key);
  }

  intList(key: string): number[] | undefined {
    return this.list(key)?.map((v) => toInt(this.command, `${key}=`, v));
  }
}

function toInt(command: string, what: string, raw: string): number {
  const v = Number(raw);
  if (raw === '' || !Number.isSafeInteger(v)) {
    throw new CommandError(`${command}: ${what} must be an integer, got "${raw}"`);
  }
  return v;
}
