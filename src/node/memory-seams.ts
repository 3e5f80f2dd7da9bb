// In-memory twins of the node's seams, for tests of the runtime without disks or sockets.
import { MemoryStorage } from '../raft/memory-storage.js';
import type { ConfState, Entry, HardState, Message, NodeId, Snapshot } from '../raft/types.js';
import { checkEntries, checkSnapshotIndex } from '../storage/durable-storage.js';
import { StorageConfigError, StorageFailedError, StorageUsageError } from '../storage/errors.js';
import type { NodeStorage, NodeTransport, TransportSink } from './seams.js';

/** One write the twin takes, as its fault hooks see it. */
export interface MemoryStorageOp {
  kind: 'save' | 'snapshot';
  /** 1, 2, ...: the order in which the writes were asked for (saves and snapshots together). */
  n: number;
  /** Whether it is made durable (survives a power loss) before it resolves. Snapshots always are. */
  sync: boolean;
}

/** Faults of the twin's disk; mutable (`storage.faults.fail = ...`) at any time. */
export interface MemoryStorageFaults {
  /**
   * Called when a write is asked for; a promise returned holds the write (and every write asked for
   * after it: the order is kept) until it settles. The test owns the promise: no timers.
   */
  delay?: (op: MemoryStorageOp) => Promise<void> | undefined;
  /**
   * Called when a write would become durable: return an error code (e.g. 'EIO') to fail it, as a
   * failed fdatasync does. It rejects with StorageFailedError and the twin refuses every later write
   * (fail-stop, as DurableStorage). The failed write stays in the "page cache": a process crash keeps
   * it, a power loss does not (MemoryFs's semantics of a failed fsync).
   */
  fail?: (op: MemoryStorageOp) => string | undefined;
}

export interface MemoryNodeStorageOptions {
  /**
   * Entries kept behind each local snapshot (DurableStorage's `trailingEntries`). Default 100 (the
   * production default is 5000); allowed 0 .. 100,000,000.
   */
  trailingEntries?: number;
  faults?: MemoryStorageFaults;
}

/** What crash() keeps: 'process' everything written; 'power' only what was made durable. */
export type MemoryCrashKind = 'process' | 'power';

type Write =
  | {
      kind: 'save';
      hardState?: HardState;
      entries: readonly Entry[];
      snapshot?: Snapshot;
      sync: boolean;
    }
  | { kind: 'snapshot'; index: number; conf: ConfState; data: Uint8Array; sync: true };

export const MEMORY_DEFAULT_TRAILING_ENTRIES = 100;

/**
 * The in-memory twin of DurableStorage (src/storage/durable-storage.ts), with the same contract:
 * - `storage` shows a write once its save resolves, never before; writes take effect in call order;
 * - `sync: false` resolves without making the write durable: crash('power') drops it unless a later
 *   synced write (which, like an fdatasync of the WAL, covers everything before it) completed;
 *   crash('process') keeps it. Saves carrying a leader's snapshot, and createSnapshot, always sync;
 * - createSnapshot compacts the log to `trailingEntries` behind the snapshot;
 * - the same saves are refused with StorageUsageError (gaps, rewriting snapshotted entries, a commit
 *   index beyond the log, an older snapshot, snapshotting past the commit index);
 * - a failed write (faults.fail) rejects with StorageFailedError and the twin then refuses every write.
 * Differences: records are never torn (a power loss keeps whole writes only, so recovery never cuts a
 * tail or fences the hard state), and close() only waits for queued writes: the twin stays usable
 * afterwards, as a directory reopened by a restart in the same process (node tests rely on it).
 */
export class MemoryNodeStorage implements NodeStorage {
  readonly storage: MemoryStorage;
  /** save() calls so far. */
  saves = 0;
  faults: MemoryStorageFaults;
  readonly trailingEntries: number;

  /** What survives a power loss: every write up to the last one made durable. */
  private readonly durable: MemoryStorage;
  /** Writes visible in `storage` but not yet in `durable`, oldest first. */
  private unsynced: Write[] = [];
  /** A write whose "fsync" failed: written (a process crash keeps it) but neither durable nor visible. */
  private failedWrite: Write | undefined;
  private failure: StorageFailedError | undefined;
  private crashed = false;
  private writes = 0;
  /** Writes held back or queued behind one that is; while > 0 every new write queues too. */
  private queued = 0;
  /** Settles once the last queued write is done (never rejects). */
  private tail: Promise<void> = Promise.resolve();
  /** Last index once every queued write is done (validates new saves before they are queued). */
  private pendingLast: number;
  /** Newest snapshot index once every queued write is done. */
  private pendingSnapIndex: number;
  /** Entries at or below this index are never rewritten. */
  private rewriteFloor: number;

  /**
   * @param conf membership of a brand-new cluster; omit it for a node that joins an existing one.
   * @param recovered internal: the log crash() hands to the restarted twin.
   */
  constructor(conf?: ConfState, options: MemoryNodeStorageOptions = {}, recovered?: MemoryStorage) {
    const trailing = options.trailingEntries ?? MEMORY_DEFAULT_TRAILING_ENTRIES;
    if (!Number.isSafeInteger(trailing) || trailing < 0 || trailing > 100_000_000) {
      throw new StorageConfigError(`trailingEntries = ${trailing}; allowed: an integer from 0 to 100000000`);
    }
    this.trailingEntries = trailing;
    this.faults = options.faults ?? {};
    this.storage = recovered ?? new MemoryStorage(conf);
    this.durable = this.storage.clone();
    this.pendingLast = this.storage.lastIndex();
    this.pendingSnapIndex = this.storage.snapshot().metadata.index;
    this.rewriteFloor = this.pendingSnapIndex;
  }

  /**
   * Resolves once the batch is visible through `storage` (and durable when `sync`, or when it carries
   * a snapshot). `opts` defaults to `{ sync: true }` for callers written before it was honoured.
   */
  async save(
    batch: { hardState?: HardState; entries: Entry[]; snapshot?: Snapshot },
    opts: { sync: boolean } = { sync: true },
  ): Promise<void> {
    this.saves++;
    if (this.crashed) return never();
    if (this.failure) throw this.failure;
    const { entries, hardState, snapshot } = batch;
    let last = this.pendingLast;
    let snapIndex = this.pendingSnapIndex;
    if (snapshot) {
      const md = snapshot.metadata;
      if (md.index < snapIndex) {
        throw new StorageUsageError(
          `snapshot at index ${md.index} is older than the snapshot already saved (${snapIndex})`,
        );
      }
      last = md.index;
      snapIndex = md.index;
    }
    if (entries.length > 0) {
      const problem = checkEntries(entries, last, Math.max(snapIndex, this.rewriteFloor));
      if (problem) throw new StorageUsageError(problem);
      last = entries[entries.length - 1]!.index;
    }
    if (hardState && hardState.commit > last) {
      throw new StorageUsageError(`hard state commit ${hardState.commit} is beyond the last index ${last}`);
    }
    this.pendingLast = last;
    this.pendingSnapIndex = snapIndex;
    if (snapIndex > this.rewriteFloor) this.rewriteFloor = snapIndex;
    const held = this.write({
      kind: 'save',
      hardState,
      entries,
      snapshot,
      sync: opts.sync || snapshot !== undefined,
    });
    if (held) await held;
  }

  /**
   * Records a snapshot of applied state at `index` (durable and committed) and compacts the log to
   * `trailingEntries` behind it. A snapshot at the current snapshot's index is a no-op.
   */
  async createSnapshot(index: number, conf: ConfState, data: Uint8Array): Promise<void> {
    if (this.crashed) return never();
    if (this.failure) throw this.failure;
    if (index === this.pendingSnapIndex) return;
    const m = this.storage;
    const problem = checkSnapshotIndex(index, this.pendingSnapIndex, m.lastIndex(), m.hardState().commit);
    if (problem) throw new StorageUsageError(problem);
    this.pendingSnapIndex = index;
    if (index > this.rewriteFloor) this.rewriteFloor = index;
    const held = this.write({
      kind: 'snapshot',
      index,
      conf: { voters: [...conf.voters], learners: [...conf.learners] },
      data,
      sync: true,
    });
    if (held) await held;
  }

  /** Waits for queued writes (a write held by faults.delay holds this too). The twin stays usable. */
  async close(): Promise<void> {
    if (this.queued > 0) await this.tail;
  }

  /**
   * The process dies (and, for 'power', the machine loses power). Returns the twin the restarted
   * process opens: 'process' keeps every write taken so far (a failed one too, as the page cache
   * does); 'power' only what was made durable. This twin is dead: its pending and later calls
   * never settle. Fault hooks and the trailing window carry over; the failure does not (a reopen).
   */
  crash(kind: MemoryCrashKind): MemoryNodeStorage {
    if (this.crashed) throw new Error('MemoryNodeStorage.crash: this twin already crashed');
    this.crashed = true;
    let mem: MemoryStorage;
    if (kind === 'power') {
      mem = this.durable.clone();
    } else {
      mem = this.storage.clone();
      if (this.failedWrite) applyWrite(mem, this.failedWrite, this.trailingEntries);
    }
    // Recovery's rule: a snapshot only holds committed state, so the commit index is at least its index.
    const hs = mem.hardState();
    const s = mem.snapshot().metadata.index;
    if (hs.commit < s) mem.setHardState({ ...hs, commit: s });
    return new MemoryNodeStorage(
      undefined,
      { trailingEntries: this.trailingEntries, faults: this.faults },
      mem,
    );
  }

  /** Takes a write now, or queues it (returning its promise) when it is held or behind one that is. */
  private write(w: Write): Promise<void> | undefined {
    const op: MemoryStorageOp = { kind: w.kind, n: ++this.writes, sync: w.sync };
    const delay = this.faults.delay?.(op);
    if (!delay && this.queued === 0) {
      this.complete(w, op);
      return undefined;
    }
    if (w.kind === 'save') w.entries = [...w.entries]; // the caller may reuse its array meanwhile
    this.queued++;
    const prev = this.tail;
    const done = (async () => {
      await prev;
      if (delay) await delay;
      if (this.crashed) return never();
      this.queued--;
      this.complete(w, op);
    })();
    this.tail = done.then(
      () => {},
      () => {},
    );
    return done;
  }

  private complete(w: Write, op: MemoryStorageOp): void {
    if (this.failure) throw this.failure;
    const code = this.faults.fail?.(op);
    if (code) {
      this.failedWrite = w;
      const cause = Object.assign(new Error(`${code}: ${w.kind} ${op.n} failed (injected)`), { code });
      this.failure = new StorageFailedError(
        `MemoryNodeStorage write failed; refusing further writes: ${cause.message}`,
        { cause },
      );
      throw this.failure;
    }
    applyWrite(this.storage, w, this.trailingEntries);
    if (w.sync) {
      for (const u of this.unsynced) applyWrite(this.durable, u, this.trailingEntries);
      this.unsynced = [];
      applyWrite(this.durable, w, this.trailingEntries);
    } else {
      this.unsynced.push(w);
    }
  }
}

function applyWrite(m: MemoryStorage, w: Write, trailing: number): void {
  if (w.kind === 'save') {
    if (w.snapshot) m.applySnapshot(w.snapshot);
    if (w.entries.length > 0) m.append(w.entries);
    if (w.hardState) m.setHardState(w.hardState);
    return;
  }
  // A leader's snapshot taken in between may have superseded this one: then there is nothing to do.
  if (w.index <= m.snapshot().metadata.index) return;
  m.createSnapshot(w.index, w.conf, w.data);
  const c = w.index - trailing;
  if (c > m.firstIndex() - 1) m.compact(c);
}

function never(): Promise<never> {
  return new Promise<never>(() => {});
}

export interface MemoryNetworkOptions {
  /** Runs a delivery (or a verdict, or a snapshot's status) later. Default setImmediate. */
  schedule?: (fn: () => void) => void;
  /** Links that carry nothing now, decided when sent and again when delivered (on top of `isolate`). */
  blocked?: (from: NodeId, to: NodeId) => boolean;
  /** A Raft message for which this answers true is lost on the wire (decided when sent). */
  lose?: (m: Message) => boolean;
}

interface MemoryEndpoint {
  sink: TransportSink | undefined;
  peers: Set<NodeId>;
  closed: boolean;
}

/**
 * A hub that delivers messages between in-process nodes asynchronously; links can be cut. It keeps
 * the production transport's rules of who talks to whom (src/transport): a message goes out only to
 * a peer of its sender (addPeer) and is taken only from a peer of its receiver (the handshake refuses
 * anyone else, and removePeer closes the connections); a sender the receiver has removed (its sink's
 * `removedAt`) is told so (`onRemoved`), as the handshake's removal verdict does (FS-23).
 */
export class MemoryNetwork {
  private readonly endpoints = new Map<NodeId, MemoryEndpoint>();
  private readonly cut = new Set<string>();
  private readonly schedule: (fn: () => void) => void;

  constructor(private readonly options: MemoryNetworkOptions = {}) {
    this.schedule = options.schedule ?? ((fn) => setImmediate(fn));
  }

  /** The transport of one node process; a restarted process takes a new endpoint. */
  endpoint(id: NodeId): NodeTransport & { bind(sink: TransportSink): void } {
    const net = this;
    const ep: MemoryEndpoint = { sink: undefined, peers: new Set(), closed: false };
    this.endpoints.set(id, ep);
    return {
      bind(sink: TransportSink) {
        ep.sink = sink;
      },
      send(messages: Message[]) {
        if (ep.closed) return;
        for (const m of messages) net.send(ep, m);
      },
      addPeer(peer: NodeId) {
        if (peer === id) return;
        ep.peers.add(peer);
        net.dial(id, peer);
      },
      removePeer(peer: NodeId) {
        ep.peers.delete(peer);
        // The production transport closes the connections; the peer, if it still counts this node, dials again.
        net.dial(peer, id);
      },
      async close() {
        ep.closed = true;
        ep.sink = undefined;
      },
    };
  }

  isolate(id: NodeId, others: NodeId[]): void {
    for (const o of others) {
      this.cut.add(`${id}->${o}`);
      this.cut.add(`${o}->${id}`);
    }
  }

  heal(): void {
    this.cut.clear();
    // The production transport keeps dialing its peers (with a backoff): each gets through now.
    for (const [a, ep] of this.endpoints) for (const b of ep.peers) this.dial(a, b);
  }

  /**
   * The production transport dials every peer when it is added, and again after a connection closes, whether the
   * node has anything to send or not: a dialer that the other side removed is told so in the handshake (FS-23),
   * even one that never sends a message (a learner). Here: the verdict, when `to` refuses `from` and knows why.
   */
  private dial(from: NodeId, to: NodeId): void {
    this.schedule(() => {
      const a = this.endpoints.get(from);
      const b = this.endpoints.get(to);
      if (!a || a.closed || !a.peers.has(to) || !b || b.closed || b.peers.has(from)) return;
      if (this.down(from, to) || this.down(to, from)) return;
      const removedAt = b.sink?.removedAt?.(from);
      if (removedAt !== undefined) a.sink?.onRemoved?.(to, removedAt);
    });
  }

  private down(from: NodeId, to: NodeId): boolean {
    return this.cut.has(`${from}->${to}`) || this.options.blocked?.(from, to) === true;
  }

  /** The receiver's endpoint, when it is up and takes messages from `from`. */
  private accepting(from: NodeId, to: NodeId): MemoryEndpoint | undefined {
    const ep = this.endpoints.get(to);
    return ep && !ep.closed && ep.peers.has(from) ? ep : undefined;
  }

  private send(from: MemoryEndpoint, m: Message): void {
    const lost = () => {
      // The core needs an outcome for every snapshot it sends, lost ones included.
      if (m.type === 'snap') this.schedule(() => from.sink?.onSnapshotStatus(m.to, false));
    };
    // Not a peer: the production transport has no connection to use (`unsendable`).
    if (!from.peers.has(m.to) || this.down(m.from, m.to)) {
      lost();
      return;
    }
    const to = this.endpoints.get(m.to);
    if (to && !to.closed && !to.peers.has(m.from)) {
      // The receiver refuses the connection; one that removed the sender says so (both links must work).
      const removedAt = to.sink?.removedAt?.(m.from);
      if (removedAt !== undefined && !this.down(m.to, m.from)) {
        this.schedule(() => {
          if (!from.closed) from.sink?.onRemoved?.(m.to, removedAt);
        });
      }
      lost();
      return;
    }
    if (this.options.lose?.(m)) {
      lost();
      return;
    }
    this.schedule(() => {
      const dest = this.accepting(m.from, m.to);
      if (this.down(m.from, m.to) || !dest) {
        lost();
        return;
      }
      dest.sink?.onMessage(m);
      if (m.type === 'snap') from.sink?.onSnapshotStatus(m.to, true);
    });
  }
}
