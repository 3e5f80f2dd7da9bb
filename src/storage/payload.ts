// Payload codecs for WAL records (msgpack). Tuples rather than maps keep a 64-byte entry's record
// small; decoding validates every field, because a checksum only proves the bytes are the ones
// written, not that a future or buggy writer wrote something this reader understands.
// Every payload is a msgpack array, so its first byte is never 0: WAL recovery relies on that to
// tell a damaged header followed by unwritten zeros (torn) from a complete frame (record.ts).
import { Packr } from 'msgpackr';
import type { ConfChange, ConfState, Entry, HardState } from '../raft/types.js';
import { WAL_FORMAT_VERSION } from './record.js';

// useRecords: false → plain msgpack arrays/maps, decodable without shared state between records.
// copyBuffers: true → decoded entry data does not pin the whole segment buffer in memory.
const packr = new Packr({ useRecords: false, copyBuffers: true });

/** A snapshot recorded in the WAL. `reset`: the snapshot replaced the whole log (sent by a leader). */
export interface SnapshotMarker {
  index: number;
  term: number;
  reset: boolean;
}

export const NO_SNAPSHOT: SnapshotMarker = { index: 0, term: 0, reset: false };

/**
 * The vote of a hard state recovered after a torn tail was cut: "voted in this term, for a
 * candidate we no longer know". Not NONE (0, free to vote) and never a member ID (IDs are positive),
 * so the Raft core grants no vote in that term: it grants only when vote is NONE or the requester.
 */
export const UNKNOWN_VOTE = -1;

/** First record of a segment: carries the state older segments held, so they can be deleted. */
export interface SegmentHeader {
  seq: number;
  /** Index the next entry was expected at when the segment was created (also in the file name). */
  firstIndex: number;
  /** Term of entry firstIndex - 1 (0 when firstIndex is 1). */
  prevTerm: number;
  hardState: HardState;
  /** The newest snapshot marker written before this segment. */
  snapshot: SnapshotMarker;
  /** Membership the log started from, before any snapshot (DurableStorage's bootstrapConf). */
  bootstrapConf: ConfState;
}

export class PayloadError extends Error {}

const HEADER_VERSION = 1;
const CHANGE_TYPES = ['addLearner', 'addVoter', 'remove'] as const;

export function encodeHeader(h: SegmentHeader): Buffer {
  return packr.pack([
    HEADER_VERSION,
    h.seq,
    h.firstIndex,
    h.prevTerm,
    hardStateTuple(h.hardState),
    markerTuple(h.snapshot),
    h.bootstrapConf.voters,
    h.bootstrapConf.learners,
  ]);
}

export function decodeHeader(payload: Buffer): SegmentHeader {
  const v = unpackArray(payload, 'segment header');
  if (v[0] !== HEADER_VERSION)
    throw new PayloadError(`segment header version ${String(v[0])}; this build reads ${HEADER_VERSION}`);
  if (v.length !== 8) throw new PayloadError(`segment header has ${v.length} fields, expected 8`);
  return {
    seq: uint(v[1], 'header seq'),
    firstIndex: uint(v[2], 'header firstIndex'),
    prevTerm: uint(v[3], 'header prevTerm'),
    hardState: hardStateFrom(v[4]),
    snapshot: markerFrom(v[5]),
    bootstrapConf: { voters: idList(v[6], 'voters'), learners: idList(v[7], 'learners') },
  };
}

export function encodeHardState(hs: HardState): Buffer {
  return packr.pack(hardStateTuple(hs));
}

export function decodeHardState(payload: Buffer): HardState {
  return hardStateFrom(unpackArray(payload, 'hard state'));
}

export function encodeMarker(m: SnapshotMarker): Buffer {
  return packr.pack(markerTuple(m));
}

export function decodeMarker(payload: Buffer): SnapshotMarker {
  return markerFrom(unpackArray(payload, 'snapshot marker'));
}

export function encodeEntries(entries: readonly Entry[]): Buffer {
  const rows: unknown[] = new Array(entries.length);
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (e.type === 'normal') rows[i] = [e.index, e.term, 0, e.data];
    else {
      const c = e.change;
      const row: unknown[] = [e.index, e.term, 1, CHANGE_TYPES.indexOf(c.type), c.nodeId];
      // Without `resulting` the row keeps its format-2 shape (5 or 6 fields).
      if (c.context !== undefined || c.resulting !== undefined) row.push(c.context ?? null);
      if (c.resulting !== undefined) row.push([c.resulting.voters, c.resulting.learners]);
      rows[i] = row;
    }
  }
  return packr.pack(rows);
}

/** The WAL format whose conf rows may carry a 7th field: the membership the change results in. */
const RESULTING_SINCE_FORMAT = 4;

/**
 * Decodes an entries record of a segment in WAL format `format`; checks the indexes are
 * consecutive. A conf row's 7th field (its resulting membership) came with format 4; in a format-2
 * segment such a row is refused.
 */
export function decodeEntries(payload: Buffer, format: number = WAL_FORMAT_VERSION): Entry[] {
  const rows = unpackArray(payload, 'entries');
  if (rows.length === 0) throw new PayloadError('entries record holds no entries');
  const confFields = format >= RESULTING_SINCE_FORMAT ? 7 : 6;
  const out: Entry[] = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    if (!Array.isArray(row) || row.length < 4) throw new PayloadError(`entry #${i} is not a tuple`);
    const index = uint(row[0], 'entry index');
    const term = uint(row[1], 'entry term');
    if (i > 0 && index !== out[i - 1]!.index + 1) {
      throw new PayloadError(`entry indexes not consecutive: ${out[i - 1]!.index} then ${index}`);
    }
    if (row[2] === 0 && row.length === 4) {
      out[i] = { type: 'normal', index, term, data: bytes(row[3], 'entry data') };
    } else if (row[2] === 1 && row.length >= 5 && row.length <= confFields) {
      const type = CHANGE_TYPES[row[3] as number];
      if (type === undefined)
        throw new PayloadError(`entry ${index}: unknown conf change type ${String(row[3])}`);
      const change: ConfChange = { type, nodeId: uint(row[4], 'conf change nodeId') };
      // A 7-field row has nil here when the change has no context; a 6-field row never does.
      if (row.length === 6 || (row.length === 7 && row[5] !== null))
        change.context = bytes(row[5], 'conf change context');
      if (row.length === 7) change.resulting = resultingFrom(row[6], index);
      out[i] = { type: 'conf', index, term, change };
    } else {
      throw new PayloadError(`entry ${index}: unknown entry kind ${String(row[2])} (${row.length} fields)`);
    }
  }
  return out;
}

function resultingFrom(v: unknown, index: number): ConfState {
  if (!Array.isArray(v) || v.length !== 2)
    throw new PayloadError(`entry ${index}: conf change resulting is not a [voters, learners] tuple`);
  return {
    voters: memberIds(v[0], `entry ${index}: resulting voters`),
    learners: memberIds(v[1], `entry ${index}: resulting learners`),
  };
}

function hardStateTuple(hs: HardState): number[] {
  return [hs.term, hs.vote, hs.commit];
}

function hardStateFrom(v: unknown): HardState {
  if (!Array.isArray(v) || v.length !== 3)
    throw new PayloadError('hard state is not a [term, vote, commit] tuple');
  const vote = v[1] === UNKNOWN_VOTE ? UNKNOWN_VOTE : uint(v[1], 'vote');
  return { term: uint(v[0], 'term'), vote, commit: uint(v[2], 'commit') };
}

function markerTuple(m: SnapshotMarker): number[] {
  return [m.index, m.term, m.reset ? 1 : 0];
}

function markerFrom(v: unknown): SnapshotMarker {
  if (!Array.isArray(v) || v.length !== 3 || (v[2] !== 0 && v[2] !== 1)) {
    throw new PayloadError('snapshot marker is not an [index, term, reset] tuple');
  }
  return { index: uint(v[0], 'snapshot index'), term: uint(v[1], 'snapshot term'), reset: v[2] === 1 };
}

function unpackArray(payload: Buffer, what: string): unknown[] {
  let v: unknown;
  try {
    v = packr.unpack(payload);
  } catch (err) {
    throw new PayloadError(`${what} payload is not valid msgpack (${(err as Error).message})`);
  }
  if (!Array.isArray(v)) throw new PayloadError(`${what} payload is not an array`);
  return v;
}

function uint(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new PayloadError(`${what} is ${String(v)}; expected a non-negative safe integer`);
  }
  return v;
}

function idList(v: unknown, what: string): number[] {
  if (!Array.isArray(v)) throw new PayloadError(`${what} is not a list`);
  return v.map((x) => uint(x, what));
}

/** Node IDs of a membership: a list of positive safe integers. */
function memberIds(v: unknown, what: string): number[] {
  if (!Array.isArray(v)) throw new PayloadError(`${what} is not a list`);
  return v.map((x) => {
    if (typeof x !== 'number' || !Number.isSafeInteger(x) || x <= 0)
      throw new PayloadError(`${what} holds ${String(x)}; expected positive integer node IDs`);
    return x;
  });
}

function bytes(v: unknown, what: string): Uint8Array {
  if (!(v instanceof Uint8Array)) throw new PayloadError(`${what} is not a byte string`);
  // A plain Uint8Array view (not a Buffer) so values read back compare equal to what was written.
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}
