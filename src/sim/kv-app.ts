// The application state machine every simulated node runs: a map of counters, plus a chain hash
// over every applied entry. Two replicas that applied the same entries in the same order have the
// same chain hash at every index, so comparing one short string per index is enough to check
// state machine safety, including across snapshots and restarts.

import type { Entry } from '../raft/types.js';
import { Digest, digestBytes } from './hash.js';

/** A client command. `id` is unique per run, so the simulator can follow a proposal to its fate. */
export type KvOp =
  | { id: number; op: 'incr'; key: string; by: number }
  | { id: number; op: 'set'; key: string; value: number }
  /** Changes nothing; proposed after faults heal to prove the cluster can still commit. */
  | { id: number; op: 'barrier' };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeOp(op: KvOp): Uint8Array {
  return encoder.encode(JSON.stringify(op));
}

/** Undefined for an empty payload (a new leader's no-op). Throws on a payload that is not a KvOp. */
export function decodeOp(data: Uint8Array): KvOp | undefined {
  if (data.length === 0) return undefined;
  const parsed = JSON.parse(decoder.decode(data)) as KvOp;
  if (typeof parsed !== 'object' || parsed === null || typeof parsed.id !== 'number') {
    throw new Error(`kv-app: entry payload is not a command: ${decoder.decode(data).slice(0, 80)}`);
  }
  return parsed;
}

/** What identifies an entry's content, independent of where it sits in the log. */
export function entryDigest(entry: Entry): string {
  if (entry.type === 'normal') return digestBytes(entry.data);
  return `conf:${entry.change.type}:${entry.change.nodeId}`;
}

/** Chain hash after applying `entry` on top of a state whose chain hash is `prev`. */
export function chainNext(prev: string, entry: Entry): string {
  return new Digest().updateString(`${prev}|${entry.index}|${entry.term}|${entryDigest(entry)}`).hex();
}

/** Chain hash of the empty state at index 0 (the bootstrap snapshot). */
export const GENESIS_CHAIN = '0000000000000000';

interface SerializedKv {
  applied: number;
  chain: string;
  kv: Array<[string, number]>;
}

export class KvApp {
  applied = 0;
  chain = GENESIS_CHAIN;
  readonly kv = new Map<string, number>();

  /** Applies one committed entry (normal or conf: both advance the chain). */
  apply(entry: Entry): void {
    if (entry.type === 'normal') {
      const op = decodeOp(entry.data);
      if (op?.op === 'incr') this.kv.set(op.key, (this.kv.get(op.key) ?? 0) + op.by);
      else if (op?.op === 'set') this.kv.set(op.key, op.value);
    }
    this.applied = entry.index;
    this.chain = chainNext(this.chain, entry);
  }

  serialize(): Uint8Array {
    const s: SerializedKv = { applied: this.applied, chain: this.chain, kv: [...this.kv.entries()] };
    return encoder.encode(JSON.stringify(s));
  }

  /** Rebuilds the state from a snapshot's data. Empty data is the bootstrap (genesis) state. */
  static restore(data: Uint8Array): KvApp {
    const app = new KvApp();
    if (data.length === 0) return app;
    const s = JSON.parse(decoder.decode(data)) as SerializedKv;
    app.applied = s.applied;
    app.chain = s.chain;
    for (const [k, v] of s.kv) app.kv.set(k, v);
    return app;
  }
}
