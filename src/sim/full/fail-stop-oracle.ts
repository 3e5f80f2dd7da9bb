// Fail-stop after an fsync error (issue 10: "fsync that fails with EIO (the node must fail-stop)"; audit gap 3).
//
// After an fdatasync or directory fsync of a node's Raft storage (its data directory; not the Snowflake lease cache,
// whose EIO answers one request with an error) fails with EIO in process P, the kernel may have dropped the dirty
// pages, so nothing P wrote before can be trusted to be on the disk. From the instant the error is returned to P
// (MemoryFs's `syncError` hook, called when the fsync completes), P must:
// - acknowledge no save: no `NodeStorage.save` of P resolves (no Ready is taken as persisted, whether or not it
//   asked for a sync: the storage must refuse all work);
// - send no Raft message (hand nothing to its transport: votes, appends and acks all claim what it persisted);
// - apply no entry (the node's `applied` event: what it applies and answers depends on a save after the failed one);
// - halt: stop itself (its `stopped` event) or die, by the end of the run.
// A violation is `fail-stop`, naming the process, the EIO's time and file, and what it did after it.

import type { World } from './world.js';

interface Eio {
  atUs: number;
  path: string;
}

export interface FailStopStats {
  /** Fsync EIOs returned to a node process by its Raft storage. */
  eios: number;
  /** Processes that halted after one. */
  halted: number;
}

export class FailStopOracle {
  /** process name → its first Raft-storage fsync EIO. */
  private readonly eio = new Map<string, Eio>();
  private readonly halted = new Set<string>();
  readonly stats: FailStopStats = { eios: 0, halted: 0 };

  constructor(private readonly world: World) {}

  /** An fsync of `path` failed with EIO in process `proc` (only Raft-storage paths are given). */
  fsyncFailed(proc: string, path: string): void {
    if (this.eio.has(proc)) return;
    this.stats.eios++;
    if (this.halted.has(proc)) this.stats.halted++;
    this.eio.set(proc, { atUs: this.world.sched.nowUs, path });
  }

  /** Whether `proc` had its Raft storage's fsync fail (in this process). */
  failed(proc: string): boolean {
    return this.eio.has(proc);
  }

  /** Process `proc` did `what` (a save resolved, a message handed to the transport, an entry applied). */
  acted(proc: string, what: string): void {
    const e = this.eio.get(proc);
    if (e === undefined) return;
    this.world.fail(
      'fail-stop',
      `${proc} ${what} after its fsync of ${e.path} failed with EIO at t=${(e.atUs / 1000).toFixed(3)}ms`,
    );
  }

  /**
   * Process `proc` stopped itself (its node's `stopped` event). Remembered whether or not an EIO came first: a node
   * stopping after its removal closes its storage, and an fsync in that close may fail after it has halted (swarm
   * seeds 801760, 802028: the oracle called such a node one that never halted).
   */
  stopped(proc: string): void {
    if (!this.halted.has(proc)) {
      this.halted.add(proc);
      if (this.eio.has(proc)) this.stats.halted++;
    }
  }

  /** At the end of a run: every process that had an fsync EIO halted or died (`alive` tells which still run). */
  checkHalted(alive: (proc: string) => boolean): void {
    for (const [proc, e] of this.eio) {
      if (this.halted.has(proc) || !alive(proc)) continue;
      this.world.fail(
        'fail-stop',
        `${proc} still runs at the end, never halted after its fsync of ${e.path} failed with EIO at t=${(e.atUs / 1000).toFixed(3)}ms`,
      );
      return;
    }
  }
}
