import { Packr } from 'msgpackr';
import type {
  AppendMessage,
  AppendResponse,
  ConfChange,
  ConfEntry,
  ConfState,
  Entry,
  HeartbeatMessage,
  HeartbeatResponse,
  Message,
  MessageType,
  NodeId,
  NormalEntry,
  ReadIndexRequest,
  ReadIndexResponse,
  Snapshot,
  SnapshotMessage,
  SnapshotMetadata,
  TimeoutNowMessage,
  VoteRequest,
  VoteResponse,
} from '../raft/types.js';
import { ProtocolError } from './errors.js';

/**
 * Raft messages on the wire: a msgpack array per message, fields by position (wire schema v1 below).
 *
 * Why positional tuples rather than msgpack maps or msgpackr records: they are the smallest and
 * the fastest to pack + unpack + shape-check (figures: `npx tsx bench/transport.ts codec`, and
 * docs/transport.md), and unlike shared record structures they carry no state between the two
 * ends, so a dropped or reordered frame can never desynchronise a decoder. Decoding rebuilds every
 * message from known fields only, which is also where the shape is checked: a malformed peer can
 * never hand the Raft core a message with a missing or mistyped field.
 *
 * Wire schema v1, `[code, from, to, term, ...fields]`; `?` marks an optional field, sent as nil when
 * absent and left out of the decoded object:
 *   app 1             logIndex, logTerm, commit, entries, sentTick?
 *   appResp 2         index, reject, rejectHint, logTermHint, sentTick?
 *   vote 3/preVote 4  lastIndex, lastTerm, transfer
 *   voteResp 5/preVoteResp 6  reject
 *   heartbeat 7       commit, context, sentTick?
 *   heartbeatResp 8   context, sentTick?
 *   snap 9            metaIndex, metaTerm, voters, learners, data
 *   timeoutNow 10     (none)
 *   readIndex 11      context
 *   readIndexResp 12  index, context
 * entries: `[0, term, index, data]` (normal) or
 *          `[1, term, index, changeType, nodeId, context?, resulting?]` (conf), where changeType is
 *          0 addLearner, 1 addVoter, 2 remove, and resulting is `[voters, learners]`.
 *
 * The Raft types may grow: WIRE_FIELDS below lists every field the schema carries, and the type check
 * under it stops the build when a message, entry or snapshot type gains a field the wire would drop.
 */
export const WIRE_VERSION = 3;

// useRecords false: plain msgpack, no shared state. copyBuffers: every decoded Uint8Array owns its
// bytes, so an entry kept in the Raft log never pins a whole 64 KiB socket read in memory.
const packr = new Packr({ useRecords: false, copyBuffers: true });

/** msgpack-encodes a plain value (arrays of numbers, strings, booleans, Uint8Arrays, null). */
export function pack(value: unknown): Buffer {
  return packr.pack(value);
}

/** msgpack-decodes one value that must fill `bytes` exactly. Throws ProtocolError on anything invalid. */
export function unpack(bytes: Uint8Array): unknown {
  let value: unknown;
  try {
    value = packr.unpack(bytes);
  } catch (err) {
    throw new ProtocolError(`invalid msgpack: ${err instanceof Error ? err.message : String(err)}`);
  }
  return value;
}

// ---- Compile-time completeness of the schema ------------------------------------------------------
const BASE = ['type', 'from', 'to', 'term'] as const;
/** true when the listed names are exactly the keys of T (a missing or extra name makes it false). */
type Exactly<T, Names extends readonly PropertyKey[]> = [keyof T] extends [Names[number]]
  ? [Names[number]] extends [keyof T]
    ? true
    : false
  : false;
// If the build fails here, a Raft type gained (or lost) a field: add it to the schema above, to
// messageToTuple / tupleToMessage, to the list here, and to sampleMessages in test-support.ts.
const WIRE_FIELDS_COMPLETE: [
  Exactly<AppendMessage, [...typeof BASE, 'logIndex', 'logTerm', 'commit', 'entries', 'sentTick']>,
  Exactly<AppendResponse, [...typeof BASE, 'index', 'reject', 'rejectHint', 'logTermHint', 'sentTick']>,
  Exactly<VoteRequest, [...typeof BASE, 'lastIndex', 'lastTerm', 'transfer']>,
  Exactly<VoteResponse, [...typeof BASE, 'reject']>,
  Exactly<HeartbeatMessage, [...typeof BASE, 'commit', 'context', 'sentTick']>,
  Exactly<HeartbeatResponse, [...typeof BASE, 'context', 'sentTick']>,
  Exactly<SnapshotMessage, [...typeof BASE, 'snapshot']>,
  Exactly<TimeoutNowMessage, typeof BASE>,
  Exactly<ReadIndexRequest, [...typeof BASE, 'context']>,
  Exactly<ReadIndexResponse, [...typeof BASE, 'index', 'context']>,
  Exactly<NormalEntry, ['type', 'term', 'index', 'data']>,
  Exactly<ConfEntry, ['type', 'term', 'index', 'change']>,
  Exactly<ConfChange, ['type', 'nodeId', 'context', 'resulting']>,
  Exactly<Snapshot, ['metadata', 'data']>,
  Exactly<SnapshotMetadata, ['index', 'term', 'conf']>,
  Exactly<ConfState, ['voters', 'learners']>,
] = [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true];
// A new message type fails to compile in TYPE_CODES and in messageToTuple's switch.
void WIRE_FIELDS_COMPLETE;

const TYPE_CODES: Record<MessageType, number> = {
  app: 1,
  appResp: 2,
  vote: 3,
  preVote: 4,
  voteResp: 5,
  preVoteResp: 6,
  heartbeat: 7,
  heartbeatResp: 8,
  snap: 9,
  timeoutNow: 10,
  readIndex: 11,
  readIndexResp: 12,
};

const CHANGE_CODES: Record<ConfChange['type'], number> = { addLearner: 0, addVoter: 1, remove: 2 };
const CHANGE_TYPES: readonly ConfChange['type'][] = ['addLearner', 'addVoter', 'remove'];

const NO_BYTES = new Uint8Array(0);

/**
 * The wire tuple of a message. With `withoutSnapshotData`, a snap message carries an empty data field:
 * its bytes travel in snapshot chunk frames instead.
 */
export function messageToTuple(m: Message, withoutSnapshotData = false): unknown[] {
  const code = TYPE_CODES[m.type];
  switch (m.type) {
    case 'app':
      return [
        code,
        m.from,
        m.to,
        m.term,
        m.logIndex,
        m.logTerm,
        m.commit,
        m.entries.map(entryToTuple),
        m.sentTick ?? null,
      ];
    case 'appResp':
      return [code, m.from, m.to, m.term, m.index, m.reject, m.rejectHint, m.logTermHint, m.sentTick ?? null];
    case 'vote':
    case 'preVote':
      return [code, m.from, m.to, m.term, m.lastIndex, m.lastTerm, m.transfer];
    case 'voteResp':
    case 'preVoteResp':
      return [code, m.from, m.to, m.term, m.reject];
    case 'heartbeat':
      return [code, m.from, m.to, m.term, m.commit, m.context, m.sentTick ?? null];
    case 'heartbeatResp':
      return [code, m.from, m.to, m.term, m.context, m.sentTick ?? null];
    case 'snap': {
      const md = m.snapshot.metadata;
      const data = withoutSnapshotData ? NO_BYTES : m.snapshot.data;
      return [code, m.from, m.to, m.term, md.index, md.term, md.conf.voters, md.conf.learners, data];
    }
    case 'timeoutNow':
      return [code, m.from, m.to, m.term];
    case 'readIndex':
      return [code, m.from, m.to, m.term, m.context];
    case 'readIndexResp':
      return [code, m.from, m.to, m.term, m.index, m.context];
  }
}

function entryToTuple(e: Entry): unknown[] {
  if (e.type === 'normal') return [0, e.term, e.index, e.data];
  const c = e.change;
  return [
    1,
    e.term,
    e.index,
    CHANGE_CODES[c.type],
    c.nodeId,
    c.context ?? null,
    c.resulting ? [c.resulting.voters, c.resulting.learners] : null,
  ];
}

/** Encodes a message as a msgpack payload (without frame header). */
export function encodeMessage(m: Message, withoutSnapshotData = false): Buffer {
  return packr.pack(messageToTuple(m, withoutSnapshotData));
}

/** Decodes and shape-checks one message payload. Throws ProtocolError naming the first bad field. */
export function decodeMessage(bytes: Uint8Array): Message {
  return tupleToMessage(unpack(bytes));
}

/** Rebuilds a message from a decoded tuple, checking every field. Throws ProtocolError. */
export function tupleToMessage(value: unknown): Message {
  const t = new TupleReader(value, 'message');
  const code = t.int(0, 'type code');
  const from = t.nodeId(1, 'from');
  const to = t.nodeId(2, 'to');
  const term = t.uint(3, 'term');
  switch (code) {
    case 1: {
      t.length(9);
      const m: AppendMessage = {
        type: 'app',
        from,
        to,
        term,
        logIndex: t.uint(4, 'logIndex'),
        logTerm: t.uint(5, 'logTerm'),
        commit: t.uint(6, 'commit'),
        entries: t.array(7, 'entries').map((e, i) => tupleToEntry(e, i)),
      };
      const sentTick = t.optionalUint(8, 'sentTick');
      if (sentTick !== undefined) m.sentTick = sentTick;
      return m;
    }
    case 2: {
      t.length(9);
      const m: AppendResponse = {
        type: 'appResp',
        from,
        to,
        term,
        index: t.uint(4, 'index'),
        reject: t.bool(5, 'reject'),
        rejectHint: t.uint(6, 'rejectHint'),
        logTermHint: t.uint(7, 'logTermHint'),
      };
      const sentTick = t.optionalUint(8, 'sentTick');
      if (sentTick !== undefined) m.sentTick = sentTick;
      return m;
    }
    case 3:
    case 4:
      t.length(7);
      return {
        type: code === 3 ? 'vote' : 'preVote',
        from,
        to,
        term,
        lastIndex: t.uint(4, 'lastIndex'),
        lastTerm: t.uint(5, 'lastTerm'),
        transfer: t.bool(6, 'transfer'),
      };
    case 5:
    case 6:
      t.length(5);
      return { type: code === 5 ? 'voteResp' : 'preVoteResp', from, to, term, reject: t.bool(4, 'reject') };
    case 7: {
      t.length(7);
      const m: HeartbeatMessage = {
        type: 'heartbeat',
        from,
        to,
        term,
        commit: t.uint(4, 'commit'),
        context: t.bytes(5, 'context'),
      };
      const sentTick = t.optionalUint(6, 'sentTick');
      if (sentTick !== undefined) m.sentTick = sentTick;
      return m;
    }
    case 8: {
      t.length(6);
      const m: HeartbeatResponse = { type: 'heartbeatResp', from, to, term, context: t.bytes(4, 'context') };
      const sentTick = t.optionalUint(5, 'sentTick');
      if (sentTick !== undefined) m.sentTick = sentTick;
      return m;
    }
    case 9:
      t.length(9);
      return {
        type: 'snap',
        from,
        to,
        term,
        snapshot: {
          metadata: {
            index: t.uint(4, 'snapshot.metadata.index'),
            term: t.uint(5, 'snapshot.metadata.term'),
            conf: { voters: t.nodeIds(6, 'conf.voters'), learners: t.nodeIds(7, 'conf.learners') },
          },
          data: t.bytes(8, 'snapshot.data'),
        },
      };
    case 10:
      t.length(4);
      return { type: 'timeoutNow', from, to, term };
    case 11:
      t.length(5);
      return { type: 'readIndex', from, to, term, context: t.bytes(4, 'context') };
    case 12:
      t.length(6);
      return {
        type: 'readIndexResp',
        from,
        to,
        term,
        index: t.uint(4, 'index'),
        context: t.bytes(5, 'context'),
      };
    default:
      throw new ProtocolError(`message: unknown type code ${code}; known codes are 1..12`);
  }
}

function tupleToEntry(value: unknown, i: number): Entry {
  const what = `entries[${i}]`;
  const t = new TupleReader(value, what);
  const kind = t.int(0, 'kind');
  const term = t.uint(1, 'term');
  const index = t.uint(2, 'index');
  if (kind === 0) {
    t.length(4);
    return { type: 'normal', term, index, data: t.bytes(3, 'data') };
  }
  if (kind === 1) {
    t.length(7);
    const changeCode = t.int(3, 'change.type');
    const changeType = CHANGE_TYPES[changeCode];
    if (changeType === undefined)
      throw new ProtocolError(`${what}: change.type code ${changeCode}; allowed 0..2`);
    const change: ConfChange = { type: changeType, nodeId: t.nodeId(4, 'change.nodeId') };
    const context = t.optionalBytes(5, 'change.context');
    if (context !== undefined) change.context = context;
    if (t.isNil(6)) return { type: 'conf', term, index, change };
    const r = new TupleReader(t.array(6, 'change.resulting'), `${what}.change.resulting`);
    r.length(2);
    change.resulting = { voters: r.nodeIds(0, 'voters'), learners: r.nodeIds(1, 'learners') };
    return { type: 'conf', term, index, change };
  }
  throw new ProtocolError(`${what}: unknown entry kind ${kind}; allowed 0 (normal) or 1 (conf)`);
}

/** Reads typed fields out of a decoded msgpack array, with errors that name the field. */
export class TupleReader {
  private readonly items: readonly unknown[];

  constructor(
    value: unknown,
    private readonly what: string,
  ) {
    if (!Array.isArray(value)) throw new ProtocolError(`${what}: expected an array, got ${describe(value)}`);
    this.items = value;
  }

  length(n: number): void {
    if (this.items.length !== n) {
      throw new ProtocolError(`${this.what}: expected ${n} fields, got ${this.items.length}`);
    }
  }

  private at(i: number, name: string): unknown {
    if (i >= this.items.length) throw new ProtocolError(`${this.what}: field ${name} is missing`);
    return this.items[i];
  }

  int(i: number, name: string): number {
    const v = this.at(i, name);
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
      throw new ProtocolError(`${this.what}: ${name} must be an integer, got ${describe(v)}`);
    }
    return v;
  }

  /** A non-negative safe integer (terms and indexes). */
  uint(i: number, name: string): number {
    const v = this.int(i, name);
    if (v < 0) throw new ProtocolError(`${this.what}: ${name} must be >= 0, got ${v}`);
    return v;
  }

  nodeId(i: number, name: string): NodeId {
    const v = this.int(i, name);
    if (v < 1) throw new ProtocolError(`${this.what}: ${name} must be a positive node id, got ${v}`);
    return v;
  }

  bool(i: number, name: string): boolean {
    const v = this.at(i, name);
    if (typeof v !== 'boolean')
      throw new ProtocolError(`${this.what}: ${name} must be a boolean, got ${describe(v)}`);
    return v;
  }

  string(i: number, name: string, maxLength: number): string {
    const v = this.at(i, name);
    if (typeof v !== 'string')
      throw new ProtocolError(`${this.what}: ${name} must be a string, got ${describe(v)}`);
    if (v.length > maxLength) {
      throw new ProtocolError(
        `${this.what}: ${name} is ${v.length} characters; at most ${maxLength} allowed`,
      );
    }
    return v;
  }

  bytes(i: number, name: string): Uint8Array {
    const v = this.at(i, name);
    if (!(v instanceof Uint8Array)) {
      throw new ProtocolError(`${this.what}: ${name} must be binary, got ${describe(v)}`);
    }
    return v;
  }

  optionalBytes(i: number, name: string): Uint8Array | undefined {
    return this.isNil(i) ? undefined : this.bytes(i, name);
  }

  optionalUint(i: number, name: string): number | undefined {
    return this.isNil(i) ? undefined : this.uint(i, name);
  }

  /** True when field i is present and nil (an optional field left out). */
  isNil(i: number): boolean {
    return i < this.items.length && this.items[i] === null;
  }

  array(i: number, name: string): unknown[] {
    const v = this.at(i, name);
    if (!Array.isArray(v))
      throw new ProtocolError(`${this.what}: ${name} must be an array, got ${describe(v)}`);
    return v;
  }

  nodeIds(i: number, name: string): NodeId[] {
    return this.array(i, name).map((v, j) => {
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
        throw new ProtocolError(`${this.what}: ${name}[${j}] must be a positive node id, got ${describe(v)}`);
      }
      return v;
    });
  }
}

function describe(v: unknown): string {
  if (v === null) return 'nil';
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (v instanceof Uint8Array) return `${v.length} bytes of binary`;
  if (typeof v === 'number' || typeof v === 'boolean') return `${typeof v} ${v}`;
  if (typeof v === 'string') return `a string of ${v.length} characters`;
  return typeof v;
}
