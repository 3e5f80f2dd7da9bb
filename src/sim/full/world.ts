// What every part of one simulated run shares: the scheduler, the seeded randomness, the trace,
// process ids, and the list of failures found so far.

import type { Prng } from '../prng.js';
import type { SimProcess } from './process.js';
import type { Scheduler } from './scheduler.js';

/** Kinds of failure the full simulation reports. */
export type FailureKind =
  /** A Raft invariant of src/sim/checker.ts. */
  | 'raft'
  /** The same ID was issued twice. */
  | 'duplicate-id'
  /** Two holders used one worker ID at overlapping global times. */
  | 'lease-overlap'
  /** An ID's timestamp is not above its worker's high-water mark at grant time. */
  | 'below-floor'
  /** Two holders of one worker ID issued IDs in overlapping timestamp ranges. */
  | 'timestamp-ranges-overlap'
  /** A reply did not answer its request. */
  | 'reply-mismatch'
  /** Two replicas hold different cluster UUIDs, or one changed its UUID. */
  | 'cluster-identity'
  /** A strict sequence's value was not above one answered before its request was sent. */
  | 'sequence-order'
  /** A key-value or counter history is not linearizable. */
  | 'linearizability'
  /** An acknowledged write is missing after healing. */
  | 'lost-write'
  /** A process died of an uncaught error / unhandled rejection, or a node halted without a disk fault. */
  | 'process-crash'
  /** A node process acknowledged a save, sent, applied or ran on after its Raft storage's fsync failed (EIO). */
  | 'fail-stop'
  /** A stranger on the peer transport reached Raft, or a node's transport let its handshakes grow unbounded or kept a stranger's connection. */
  | 'peer-stranger'
  /** A hostile RESP client was not answered as documented. */
  | 'resp-hostile'
  /** After healing, the cluster did not make progress in time. */
  | 'liveness'
  /** A removed member still ran some seconds after healing (it must learn its removal and stop by itself: FS-23). */
  | 'removed-lingers'
  /** The simulation itself could not run the production code deterministically. */
  | 'harness';

export interface Failure {
  kind: FailureKind;
  detail: string;
  atUs: number;
}

export class FailureFound extends Error {
  constructor(readonly failure: Failure) {
    super(`${failure.kind}: ${failure.detail}`);
    this.name = 'FailureFound';
  }
}

export interface World {
  readonly sched: Scheduler;
  readonly seed: number;
  /** Named independent streams (see Prng.fork). */
  rng(label: string): Prng;
  trace(line: string): void;
  /**
   * Verbose-only detail, outside the trace and its hash: stack traces, which depend on the build (tsx or
   * compiled) and are only captured in verbose runs (see run.ts, Error.stackTraceLimit).
   */
  detail?(line: string): void;
  /** A fresh positive pid for a process of this run. */
  nextPid(): number;
  /** Registers a live process under its pid (for lock files that ask whether a pid lives). */
  register(p: SimProcess): void;
  isPidAlive(pid: number): boolean;
  processByPid(pid: number): SimProcess | undefined;
  /** Records a failure; the run stops after the current event. */
  fail(kind: FailureKind, detail: string): void;
  /** Bugs re-introduced on purpose (test-only switches threaded to production code later). */
  readonly bugs: ReadonlySet<string>;
  /** The cluster's UUID once a replica learned it (every replica must learn this one). */
  clusterUid?: string;
}
