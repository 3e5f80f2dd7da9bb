import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Entry, Message } from '../raft/types.js';
import { decodeMessage, encodeMessage, messageToTuple, pack, tupleToMessage } from './codec.js';
import { ProtocolError } from './errors.js';
import { plain, sampleMessages } from './test-support.js';

const nodeId = fc.integer({ min: 1, max: 2 ** 31 });
const uint = fc.oneof(
  fc.integer({ min: 0, max: 1000 }),
  fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
);
const bytes = fc.uint8Array({ maxLength: 64 });

const entry: fc.Arbitrary<Entry> = fc.oneof(
  fc.record({ type: fc.constant('normal' as const), term: uint, index: uint, data: bytes }),
  fc.record({
    type: fc.constant('conf' as const),
    term: uint,
    index: uint,
    change: fc.record(
      {
        type: fc.constantFrom('addLearner' as const, 'addVoter' as const, 'remove' as const),
        nodeId,
        context: bytes,
        resulting: fc.record({
          voters: fc.array(nodeId, { maxLength: 5 }),
          learners: fc.array(nodeId, { maxLength: 3 }),
        }),
      },
      { requiredKeys: ['type', 'nodeId'] },
    ),
  }),
);

const base = { from: nodeId, to: nodeId, term: uint };
const message: fc.Arbitrary<Message> = fc.oneof(
  fc.record(
    {
      ...base,
      type: fc.constant('app' as const),
      logIndex: uint,
      logTerm: uint,
      commit: uint,
      entries: fc.array(entry, { maxLength: 5 }),
      sentTick: uint,
    },
    { requiredKeys: ['from', 'to', 'term', 'type', 'logIndex', 'logTerm', 'commit', 'entries'] },
  ),
  fc.record(
    {
      ...base,
      type: fc.constant('appResp' as const),
      index: uint,
      reject: fc.boolean(),
      rejectHint: uint,
      logTermHint: uint,
      sentTick: uint,
    },
    { requiredKeys: ['from', 'to', 'term', 'type', 'index', 'reject', 'rejectHint', 'logTermHint'] },
  ),
  fc.record({
    ...base,
    type: fc.constantFrom('vote' as const, 'preVote' as const),
    lastIndex: uint,
    lastTerm: uint,
    transfer: fc.boolean(),
  }),
  fc.record({
    ...base,
    type: fc.constantFrom('voteResp' as const, 'preVoteResp' as const),
    reject: fc.boolean(),
  }),
  fc.record(
    { ...base, type: fc.constant('heartbeat' as const), commit: uint, context: bytes, sentTick: uint },
    { requiredKeys: ['from', 'to', 'term', 'type', 'commit', 'context'] },
  ),
  fc.record(
    { ...base, type: fc.constant('heartbeatResp' as const), context: bytes, sentTick: uint },
    { requiredKeys: ['from', 'to', 'term', 'type', 'context'] },
  ),
  fc.record({
    ...base,
    type: fc.constant('snap' as const),
    snapshot: fc.record({
      metadata: fc.record({
        index: uint,
        term: uint,
        conf: fc.record({
          voters: fc.array(nodeId, { maxLength: 5 }),
          learners: fc.array(nodeId, { maxLength: 3 }),
        }),
      }),
      data: bytes,
    }),
  }),
  fc.record({ ...base, type: fc.constant('timeoutNow' as const) }),
  fc.record({ ...base, type: fc.constant('readIndex' as const), context: bytes }),
  fc.record({ ...base, type: fc.constant('readIndexResp' as const), index: uint, context: bytes }),
);

const OPTIONAL_LAST = new Set(['app', 'appResp', 'heartbeat', 'heartbeatResp']);

describe('message codec', () => {
  it('round-trips one message of every type, binary fields as Uint8Array', () => {
    const samples = sampleMessages(1, 2);
    expect(new Set(samples.map((m) => m.type)).size).toBe(12);
    for (const m of samples) {
      const back = decodeMessage(encodeMessage(m));
      expect(plain(back)).toEqual(plain(m));
      if (back.type === 'heartbeat') expect(back.context).toBeInstanceOf(Uint8Array);
      if (back.type === 'app')
        expect(back.entries[0]!.type === 'normal' && back.entries[0]!.data).toBeInstanceOf(Uint8Array);
    }
    // Optional fields left out stay out (no `sentTick: undefined` keys appear).
    const bare = {
      type: 'heartbeat' as const,
      from: 1,
      to: 2,
      term: 1,
      commit: 0,
      context: new Uint8Array(0),
    };
    expect(Object.keys(decodeMessage(encodeMessage(bare))).sort()).toEqual(Object.keys(bare).sort());
  });

  it('round-trips arbitrary messages exactly', () => {
    fc.assert(
      fc.property(message, (m) => {
        expect(plain(decodeMessage(encodeMessage(m)))).toEqual(plain(m));
      }),
    );
  });

  it('leaves the snapshot data out when asked (it travels in chunks)', () => {
    const snap = sampleMessages(1, 2).find((m) => m.type === 'snap')!;
    const back = decodeMessage(encodeMessage(snap, true));
    expect(back.type === 'snap' && back.snapshot.data.length).toBe(0);
  });

  it('decoded binary fields own their bytes (no view into the frame)', () => {
    const hb = sampleMessages(1, 2).find((m) => m.type === 'heartbeat')!;
    const frame = encodeMessage(hb);
    const back = decodeMessage(frame);
    frame.fill(0);
    expect(back.type === 'heartbeat' && Array.from(back.context)).toEqual([0xca, 0xfe]);
  });

  it('never throws anything but ProtocolError on random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (b) => {
        try {
          decodeMessage(b);
        } catch (err) {
          expect(err).toBeInstanceOf(ProtocolError);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('rejects every single-field corruption of a valid message with a ProtocolError naming the problem', () => {
    const wrongValues: unknown[] = [null, -1, 1.5, 'x', true, new Uint8Array(1), [], 2 ** 60, { a: 1 }];
    for (const m of sampleMessages(1, 2)) {
      const tuple = messageToTuple(m);
      for (let i = 0; i < tuple.length; i++) {
        for (const wrong of wrongValues) {
          const corrupted = [...tuple];
          corrupted[i] = wrong;
          const sameKind =
            (Array.isArray(tuple[i]) && Array.isArray(wrong)) ||
            (tuple[i] instanceof Uint8Array && wrong instanceof Uint8Array) ||
            (typeof tuple[i] === 'boolean' && typeof wrong === 'boolean') ||
            // Optional trailing fields (sentTick) may be nil: "absent".
            (wrong === null && i === tuple.length - 1 && OPTIONAL_LAST.has(m.type));
          if (sameKind) {
            // An empty list, other bytes or the other boolean is still a well-formed message of the same type.
            expect(tupleToMessage(corrupted).type).toBe(m.type);
          } else {
            expect(() => tupleToMessage(corrupted), `${m.type} field ${i} = ${String(wrong)}`).toThrow(
              ProtocolError,
            );
          }
        }
      }
      // Missing a field, or one too many.
      expect(() => tupleToMessage(tuple.slice(0, -1))).toThrow(ProtocolError);
      expect(() => tupleToMessage([...tuple, 0])).toThrow(ProtocolError);
    }
  });

  it('names the bad field and the allowed range', () => {
    const hb = messageToTuple(sampleMessages(1, 2).find((m) => m.type === 'heartbeat')!);
    expect(() => tupleToMessage([99, ...hb.slice(1)])).toThrow(
      /unknown type code 99; known codes are 1\.\.12/,
    );
    expect(() => tupleToMessage([7, 0, ...hb.slice(2)])).toThrow(/from must be a positive node id, got 0/);
    expect(() => tupleToMessage([7, 1, 2, 3, 4, 'ctx', null])).toThrow(/context must be binary/);
    expect(() => tupleToMessage([7, 1, 2, 3, 4, new Uint8Array(0), -5])).toThrow(
      /sentTick must be >= 0, got -5/,
    );
    expect(() => decodeMessage(Buffer.from([0xc1]))).toThrow(ProtocolError);
  });

  it('rejects deeply nested input without blowing up', () => {
    const deep = Buffer.alloc(200_000, 0x91); // [[[[...]]]] far deeper than the stack
    expect(() => decodeMessage(deep)).toThrow(ProtocolError);
  });

  it('rejects integers beyond 2^53 (decoded as bigint) instead of rounding them', () => {
    // heartbeat [7, from 1, to 2, term 3, commit = uint64 2^63, context, sentTick nil]
    const head = pack([7, 1, 2, 3]);
    const tuple = Buffer.concat([
      Buffer.from([0x97]), // fixarray of 7
      head.subarray(1), // the four small ints after the fixarray(4) byte
      Buffer.from([0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0]),
      Buffer.from([0xc4, 0x00]), // bin8 of length 0
      Buffer.from([0xc0]), // nil
    ]);
    expect(() => decodeMessage(tuple)).toThrow(/commit must be an integer/);
  });
});
