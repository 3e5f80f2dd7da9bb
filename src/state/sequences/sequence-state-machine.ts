import { pack, unpack } from '../../node/envelope.js';
import type { ApplyContext, StateMachine } from '../../node/state-machine.js';
import { decodeSequenceCommand, parseSequenceCommand, sequenceError } from './codec.js';
import {
  type AllocOk,
  type CreateOk,
  MAX_SEQUENCES,
  type SequenceCommand,
  type SequenceConfig,
  type SequenceError,
  type SequenceInfo,
  type SequenceMode,
  type SequenceResult,
} from './types.js';

/** Per key: a shared (interned) configuration, so a million keys with the same settings hold one. */
interface SequenceRecord {
  cfg: SequenceConfig;
  next: bigint;
  allocations: number;
}

const SNAPSHOT_VERSION = 1;
type SnapshotSeq = [
  key: string,
  start: string,
  max: string,
  step: number,
  minStep: number,
  maxStep: number,
  mode: 'strict' | 'node',
  next: string,
  allocations: number,
];
interface SnapshotData {
  v: number;
  seqs: SnapshotSeq[];
  /** Deleted keys and their high-water marks. */
  tombs: [key: string, next: string][];
}

/** An applied allocation: the segment [start, end) of `key` went to `owner`, by the entry at `index`. */
export interface SegmentAllocated {
  key: string;
  owner: string;
  start: string;
  end: string;
  index: number;
  leaderTimeMs: number;
}

/**
 * The replicated sequence state: configuration and high-water mark per key. The high-water mark
 * only ever grows, also across delete and re-create (a tombstone keeps it), so no value is ever
 * allocated twice. Deterministic; `apply` never throws.
 */
export class SequenceStateMachine implements StateMachine<SequenceResult> {
  private readonly allocListeners: Array<(a: SegmentAllocated) => void> = [];
  private readonly seqs = new Map<string, SequenceRecord>();
  private readonly configs = new Map<string, SequenceConfig>();
  private readonly tombs = new Map<string, bigint>();

  apply(command: Uint8Array, ctx: ApplyContext): SequenceResult {
    return this.applyParsed(decodeSequenceCommand(command), ctx);
  }

  applyUnpacked(value: unknown, ctx: ApplyContext): SequenceResult {
    return this.applyParsed(parseSequenceCommand(value), ctx);
  }

  /**
   * Calls `fn` after every applied allocation, with the entry's index and leader time (the audit trail's segment
   * events). Returns an unsubscribe.
   */
  onAllocated(fn: (a: SegmentAllocated) => void): () => void {
    this.allocListeners.push(fn);
    return () => {
      const i = this.allocListeners.indexOf(fn);
      if (i >= 0) this.allocListeners.splice(i, 1);
    };
  }

  private applyParsed(cmd: SequenceCommand | SequenceError, ctx: ApplyContext): SequenceResult {
    if ('ok' in cmd) return cmd;
    switch (cmd.op) {
      case 'create':
        return this.create(cmd);
      case 'delete': {
        const s = this.seqs.get(cmd.key);
        if (!s) return sequenceError('not_found', `no sequence ${JSON.stringify(cmd.key)}`);
        this.seqs.delete(cmd.key);
        this.tombs.set(cmd.key, s.next);
        return { ok: true, op: 'delete', key: cmd.key };
      }
      case 'alloc': {
        const r = this.alloc(cmd);
        if (r.ok && this.allocListeners.length > 0) {
          const a: SegmentAllocated = {
            key: r.key,
            owner: r.owner,
            start: r.start,
            end: r.end,
            index: ctx.index,
            leaderTimeMs: ctx.leaderTimeMs,
          };
          for (const l of this.allocListeners) l(a);
        }
        return r;
      }
    }
  }

  private create(cmd: Extract<SequenceCommand, { op: 'create' }>): CreateOk | SequenceError {
    const cfg: SequenceConfig = {
      start: BigInt(cmd.start),
      max: BigInt(cmd.max),
      step: cmd.step,
      minStep: cmd.minStep,
      maxStep: cmd.maxStep,
      mode: cmd.mode,
    };
    const existing = this.seqs.get(cmd.key);
    if (existing) {
      if (sameConfig(existing.cfg, cfg))
        return { ok: true, op: 'create', key: cmd.key, created: false, info: info(cmd.key, existing) };
      return sequenceError('exists', `sequence ${JSON.stringify(cmd.key)} exists with another configuration`);
    }
    if (this.seqs.size >= MAX_SEQUENCES)
      return sequenceError('too_many_sequences', `at most ${MAX_SEQUENCES} sequences may exist`);
    const tomb = this.tombs.get(cmd.key);
    const rec: SequenceRecord = {
      cfg: this.intern(cfg),
      next: tomb !== undefined && tomb > cfg.start ? tomb : cfg.start,
      allocations: 0,
    };
    this.tombs.delete(cmd.key);
    this.seqs.set(cmd.key, rec);
    return { ok: true, op: 'create', key: cmd.key, created: true, info: info(cmd.key, rec) };
  }

  private alloc(cmd: Extract<SequenceCommand, { op: 'alloc' }>): AllocOk | SequenceError {
    const s = this.seqs.get(cmd.key);
    if (!s) return sequenceError('not_found', `no sequence ${JSON.stringify(cmd.key)}`);
    const left = s.cfg.max + 1n - s.next;
    if (left <= 0n)
      return sequenceError('exhausted', `sequence ${JSON.stringify(cmd.key)} reached its max ${s.cfg.max}`);
    const want = BigInt(cmd.count);
    if (cmd.exact && want > left)
      return sequenceError(
        'exhausted',
        `sequence ${JSON.stringify(cmd.key)} has ${left} values left below its max ${s.cfg.max}, ${want} asked`,
      );
    const start = s.next;
    const end = start + (want < left ? want : left);
    s.next = end;
    s.allocations++;
    return {
      ok: true,
      op: 'alloc',
      key: cmd.key,
      owner: cmd.owner,
      requestId: cmd.requestId,
      start: String(start),
      end: String(end),
      mode: s.cfg.mode,
      step: s.cfg.step,
      minStep: s.cfg.minStep,
      maxStep: s.cfg.maxStep,
    };
  }

  private intern(cfg: SequenceConfig): SequenceConfig {
    const id = `${cfg.start}|${cfg.max}|${cfg.step}|${cfg.minStep}|${cfg.maxStep}|${cfg.mode}`;
    const have = this.configs.get(id);
    if (have) return have;
    if (this.configs.size >= 10_000) this.configs.clear(); // bounded; records keep their own reference
    this.configs.set(id, cfg);
    return cfg;
  }

  /**
   * An opaque identity of the key's current record: another one once the key is deleted and created again (or this
   * replica restores a snapshot that does not continue it). Serving state made for one record is not used for another
   * (review of stop 35).
   */
  recordOf(key: string): object | undefined {
    return this.seqs.get(key);
  }

  /** The key's mode, or undefined when there is no such sequence (no allocation: for the serving hot path). */
  modeOf(key: string): SequenceMode | undefined {
    return this.seqs.get(key)?.cfg.mode;
  }

  get(key: string): SequenceInfo | undefined {
    const s = this.seqs.get(key);
    return s ? info(key, s) : undefined;
  }

  /** Sorted by key; `after` and `limit` page through them. */
  list(after = '', limit = 1000): SequenceInfo[] {
    const keys = [...this.seqs.keys()].filter((k) => k > after).sort();
    return keys.slice(0, limit).map((k) => info(k, this.seqs.get(k) as SequenceRecord));
  }

  get size(): number {
    return this.seqs.size;
  }

  get hasTombstones(): boolean {
    return this.tombs.size > 0;
  }

  snapshot(): Uint8Array {
    const seqs: SnapshotSeq[] = [];
    for (const [k, s] of this.seqs)
      seqs.push([
        k,
        String(s.cfg.start),
        String(s.cfg.max),
        s.cfg.step,
        s.cfg.minStep,
        s.cfg.maxStep,
        s.cfg.mode,
        String(s.next),
        s.allocations,
      ]);
    const tombs: [string, string][] = [...this.tombs].map(([k, n]) => [k, String(n)]);
    return pack({ v: SNAPSHOT_VERSION, seqs, tombs } satisfies SnapshotData);
  }

  restore(data: Uint8Array): void {
    const d = unpack<SnapshotData>(data);
    if (d.v !== SNAPSHOT_VERSION)
      throw new Error(`sequence snapshot format ${d.v} is not supported by this Floe version`);
    // A record that the snapshot continues (same configuration, neither its mark nor its allocation count lower: a
    // delete and re-create resets the count) keeps its identity (`recordOf`), so serving state made for it stays in
    // use; on the etcd store a restore follows the node's own writes (review 2 of stop 35).
    const before = new Map(this.seqs);
    this.seqs.clear();
    this.tombs.clear();
    this.configs.clear();
    for (const [key, start, max, step, minStep, maxStep, mode, next, allocations] of d.seqs) {
      const cfg = this.intern({ start: BigInt(start), max: BigInt(max), step, minStep, maxStep, mode });
      const mark = BigInt(next);
      const old = before.get(key);
      if (old && sameConfig(old.cfg, cfg) && mark >= old.next && allocations >= old.allocations) {
        old.cfg = cfg;
        old.next = mark;
        old.allocations = allocations;
        this.seqs.set(key, old);
      } else this.seqs.set(key, { cfg, next: mark, allocations });
    }
    for (const [key, next] of d.tombs) this.tombs.set(key, BigInt(next));
  }
}

function sameConfig(a: SequenceConfig, b: SequenceConfig): boolean {
  return (
    a.start === b.start &&
    a.max === b.max &&
    a.step === b.step &&
    a.minStep === b.minStep &&
    a.maxStep === b.maxStep &&
    a.mode === b.mode
  );
}

function info(key: string, s: SequenceRecord): SequenceInfo {
  return {
    key,
    start: String(s.cfg.start),
    max: String(s.cfg.max),
    step: s.cfg.step,
    minStep: s.cfg.minStep,
    maxStep: s.cfg.maxStep,
    mode: s.cfg.mode,
    next: String(s.next),
    allocations: s.allocations,
  };
}
