import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { SequenceBackend } from './backend.js';
import { FakeCluster } from './fake-backend.js';
import { DEFAULT_LIMITS } from './limits.js';
import { ProtocolError, RequestParser } from './parser.js';
import { startRespServer } from './server.js';
import { encodeCommand, RawClient, RespErr } from './test-support.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

describe('RequestParser.repeatsOfLast / skipRepeats', () => {
  const incr = encodeCommand('INCR', 'k');
  const parser = () => new RequestParser(DEFAULT_LIMITS);

  it('counts byte-identical copies behind the command just parsed, up to max, without consuming them', () => {
    const p = parser();
    p.push(Buffer.concat([incr, incr, incr, incr, encodeCommand('INCR', 'j'), incr]));
    const first = p.next();
    expect(first).not.toBeInstanceOf(ProtocolError);
    expect(p.repeatsOfLast(100)).toBe(3);
    expect(p.repeatsOfLast(2)).toBe(2);
    p.skipRepeats(3);
    // The next command is the different one, then the last copy.
    expect((p.next() as { args: Buffer[] }).args.map(String)).toEqual(['INCR', 'j']);
    expect(p.repeatsOfLast(100)).toBe(0);
    expect((p.next() as { args: Buffer[] }).args.map(String)).toEqual(['INCR', 'k']);
    expect(p.next()).toBeUndefined();
  });

  it('counts nothing after a push, an inline command, a skip, or for an incomplete copy', () => {
    const p = parser();
    p.push(Buffer.concat([incr, incr, incr.subarray(0, 5)]));
    p.next();
    expect(p.repeatsOfLast(100)).toBe(1); // the partial third copy is not one
    p.push(incr.subarray(5));
    expect(p.repeatsOfLast(100)).toBe(0); // offsets are not kept across a push
    expect((p.next() as { args: Buffer[] }).args.map(String)).toEqual(['INCR', 'k']);
    expect(p.repeatsOfLast(100)).toBe(1);
    p.skipRepeats(1);
    expect(p.repeatsOfLast(100)).toBe(0);
    expect(p.next()).toBeUndefined();
    p.push(Buffer.from('INCR k\r\nINCR k\r\n'));
    p.next();
    expect(p.repeatsOfLast(100)).toBe(0); // inline
  });

  it('counts what a copy-by-copy comparison counts (property)', () => {
    const cmds = [
      encodeCommand('INCR', 'k'),
      encodeCommand('INCR', 'j'),
      encodeCommand('GET', 'k'),
      Buffer.from('PING\r\n'),
    ];
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 0, max: 30 }),
        fc.integer({ min: 1, max: 50 }),
        (seq, cut, max) => {
          const all = Buffer.concat(seq.map((i) => cmds[i]!));
          const p = parser();
          p.push(all.subarray(0, all.length - Math.min(cut, all.length - 1)));
          let at = 0;
          for (;;) {
            const r = p.next();
            if (r === undefined || r instanceof ProtocolError) break;
            const i = seq[at]!;
            // Naive: whole copies of command i right behind it, in the bytes pushed.
            let want = 0;
            if (i !== 3) {
              let off = seq.slice(0, at + 1).reduce((a, j) => a + cmds[j]!.length, 0);
              const pushed = all.length - Math.min(cut, all.length - 1);
              for (let j = at + 1; j < seq.length && seq[j] === i && want < max; j++) {
                if (off + cmds[i]!.length > pushed) break;
                want++;
                off += cmds[i]!.length;
              }
            }
            expect(p.repeatsOfLast(max)).toBe(want);
            at++;
          }
        },
      ),
    );
  });

  it('a command split across reads is not a base for copies (its start may have moved)', () => {
    const p = parser();
    p.push(incr.subarray(0, 6));
    expect(p.next()).toBeUndefined();
    p.push(Buffer.concat([incr.subarray(6), incr]));
    expect((p.next() as { args: Buffer[] }).args.map(String)).toEqual(['INCR', 'k']);
    expect(p.repeatsOfLast(100)).toBe(0);
  });
});

/**
 * A sequence backend that counts per key; `now` decides how many requests it answers synchronously (`incrByNow`,
 * `incrRepeatedNow`), the rest go through `incrBy` (a later turn). Every answer is counted so replies can be checked.
 */
function countingBackend(now: { single: boolean; repeated: (times: number) => number }) {
  const next = new Map<string, bigint>();
  const take = (key: string, n: bigint) => {
    const v = (next.get(key) ?? 0n) + n;
    next.set(key, v);
    return v;
  };
  const calls = { async: 0, single: 0, repeated: 0 };
  const b: SequenceBackend = {
    servesLocally: () => false,
    create: () => Promise.reject(new Error('no')),
    info: () => Promise.reject(new Error('no')),
    list: () => Promise.reject(new Error('no')),
    delete: () => Promise.reject(new Error('no')),
    get: () => Promise.reject(new Error('no')),
    alloc: () => Promise.reject(new Error('no')),
    incrBy: (key, n) => {
      calls.async++;
      return new Promise((resolve) => setImmediate(() => resolve(take(key, n))));
    },
    incrByNow: (key, n) => {
      if (!now.single) return undefined;
      calls.single++;
      return take(key, n);
    },
    incrRepeatedNow: (key, n, times) => {
      calls.repeated++;
      const k = Math.min(times, now.repeated(times));
      return Array.from({ length: k }, () => take(key, n));
    },
  };
  return { b, calls };
}

async function serverWith(sequences: SequenceBackend, cluster = new FakeCluster()) {
  const backend = cluster.backend(1);
  Object.assign(backend, { sequences });
  const server = await startRespServer({ backend });
  cluster.setMember(1, `127.0.0.1:${server.address.port}`);
  cluster.setLeader(1);
  cleanups.push(() => server.close());
  const c = await RawClient.connect(server.address.port);
  cleanups.push(() => c.close());
  return { server, cluster, c };
}

describe('copies of a command in a pipeline (INCR key x n) answered together', () => {
  it('replies stay in request order and match their requests, whatever part is answered together', async () => {
    for (const repeated of [(t: number) => t, () => 0, () => 1, (t: number) => Math.floor(t / 2)]) {
      for (const single of [true, false]) {
        const { b, calls } = countingBackend({ single, repeated });
        const { c } = await serverWith(b);
        const wire: Buffer[] = [];
        const expected: unknown[] = [];
        const counts = new Map<string, number>();
        const incr = (key: string, by = 1) => {
          const v = (counts.get(key) ?? 0) + by;
          counts.set(key, v);
          expected.push(v);
        };
        for (let i = 0; i < 40; i++) {
          const run = 1 + (i % 7);
          for (let j = 0; j < run; j++) {
            wire.push(encodeCommand('INCR', i % 3 === 0 ? 'a' : 'b'));
            incr(i % 3 === 0 ? 'a' : 'b');
          }
          if (i % 4 === 0) {
            wire.push(encodeCommand('INCRBY', 'a', '5'), encodeCommand('INCRBY', 'a', '5'));
            incr('a', 5);
            incr('a', 5);
          }
          if (i % 5 === 0) {
            wire.push(encodeCommand('ECHO', `e${i}`));
            expected.push(`e${i}`);
          }
        }
        c.write(Buffer.concat(wire));
        expect(await c.readN(expected.length)).toEqual(expected);
        if (single && repeated(10) === 10) expect(calls.repeated).toBeGreaterThan(0);
      }
    }
  });

  it('a copy refused (no permission) is answered by its own error, never by a value', async () => {
    const cluster = new FakeCluster();
    cluster.addUser('u', 'pw', { a: ['issue'] });
    const { b } = countingBackend({ single: true, repeated: (t) => t });
    const { c } = await serverWith(b, cluster);
    expect(await c.call('AUTH', 'u', 'pw')).toBe('OK');
    c.write(
      Buffer.concat([
        encodeCommand('INCR', 'a'),
        encodeCommand('INCR', 'a'),
        encodeCommand('INCR', 'b'),
        encodeCommand('INCR', 'b'),
        encodeCommand('INCR', 'a'),
      ]),
    );
    const r = await c.readN(5);
    expect(r[0]).toBe(1);
    expect(r[1]).toBe(2);
    expect(r[2]).toBeInstanceOf(RespErr);
    expect(r[3]).toBeInstanceOf(RespErr);
    expect(r[4]).toBe(3);
  });
});
