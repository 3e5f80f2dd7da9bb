import { Packr } from 'msgpackr';
import type { NodeId } from '../raft/types.js';

const packr = new Packr({ useRecords: false });

/**
 * Every normal log entry Floe proposes is wrapped so that the proposing node can match the
 * applied entry to the caller waiting for it, and so every replica sees the leader's timestamp.
 */
export interface Envelope {
  origin: NodeId;
  seq: number;
  leaderTimeMs: number;
  /** 'app' commands go to the application state machine; 'sys' commands to the node's own metadata. */
  kind: 'app' | 'sys';
  payload: Uint8Array;
}

export function encodeEnvelope(e: Envelope): Uint8Array {
  return packr.pack([e.origin, e.seq, e.leaderTimeMs, e.kind === 'app' ? 0 : 1, e.payload]);
}

export function decodeEnvelope(data: Uint8Array): Envelope {
  const v: unknown = packr.unpack(data);
  if (!Array.isArray(v) || v.length !== 5) throw new Error('log entry is not a Floe envelope');
  const [origin, seq, leaderTimeMs, kind, payload] = v as [number, number, number, number, Uint8Array];
  return { origin, seq, leaderTimeMs, kind: kind === 0 ? 'app' : 'sys', payload };
}

export function pack(value: unknown): Uint8Array {
  return packr.pack(value);
}

export function unpack<T>(data: Uint8Array): T {
  return packr.unpack(data) as T;
}
