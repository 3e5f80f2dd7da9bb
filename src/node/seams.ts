import type { ConfState, Entry, HardState, Message, NodeId, Snapshot, Storage } from '../raft/types.js';

/**
 * Durable storage as the node runtime sees it (hashicorp/raft style seam): the disk-backed
 * implementation lives in src/storage, an in-memory twin in ./memory-seams.ts for tests.
 */
export interface NodeStorage {
  /** Synchronous read side for the Raft core. */
  readonly storage: Storage;
  /** Resolves once everything given is durable (when sync) and visible through `storage`. */
  save(
    batch: { hardState?: HardState; entries: Entry[]; snapshot?: Snapshot },
    opts: { sync: boolean },
  ): Promise<void>;
  /** Persists a snapshot of applied state at `index` and compacts the log behind it. */
  createSnapshot(index: number, conf: ConfState, data: Uint8Array): Promise<void>;
  /**
   * Optional lock watchdog, run about once a second: rejects (and stops the storage) when the data dir's lock
   * is lost (LOCK deleted or replaced, the directory moved or copied while open). The node then fail-stops.
   */
  checkLock?(): Promise<void>;
  close(): Promise<void>;
}

/** Peer messaging. `send` never blocks or throws; delivery is best effort (Raft retries). */
export interface NodeTransport {
  send(messages: Message[]): void;
  addPeer(id: NodeId, addr: string): void;
  removePeer(id: NodeId): void;
  close(): Promise<void>;
}

/** Callbacks a transport delivers into the node. */
export interface TransportSink {
  onMessage(msg: Message): void;
  onUnreachable(peer: NodeId): void;
  onSnapshotStatus(peer: NodeId, ok: boolean): void;
  /**
   * FS-23, dialer side: member `from` proved (under the cluster secret) that it applied this node's removal at
   * log index `removedAt`. Every transport reports it the same way: only from a member that has the tombstone,
   * only on a dial that this node made to it.
   */
  onRemoved?(from: NodeId, removedAt: number): void;
  /**
   * FS-23, listener side: the log index at which this node applied the removal of `id`, or undefined (never
   * removed, or a member). A transport refuses a dialer it names with the "removed" verdict.
   */
  removedAt?(id: NodeId): number | undefined;
}

/** Time and timers, injectable so tests can control them. */
export interface NodeClock {
  /** Monotonic milliseconds (performance.now()). */
  monotonicMs(): number;
  /** Wall-clock milliseconds since the Unix epoch, stamped on proposals by the leader. */
  wallMs(): number;
}

export const systemClock: NodeClock = {
  monotonicMs: () => performance.now(),
  wallMs: () => Date.now(),
};

/**
 * Timers, injectable so a deterministic simulator can drive the production runtime (issue 10).
 * Handles are opaque. The default calls the global functions at call time.
 */
export interface NodeTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
  /** Runs fn once the current callback and its microtasks are done (the Ready loop's wake-up). */
  setImmediate(fn: () => void): unknown;
}

export const systemTimers: NodeTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout | undefined),
  setInterval: (fn, ms) => setInterval(fn, ms),
  clearInterval: (h) => clearInterval(h as NodeJS.Timeout | undefined),
  setImmediate: (fn) => setImmediate(fn),
};
