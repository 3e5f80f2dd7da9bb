import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Backoff } from './backoff.js';
import { TransportOptionError } from './errors.js';
import { type PeerTransportOptions, parsePeerAddress, resolveOptions } from './options.js';
import { SendQueue } from './send-queue.js';

describe('Backoff', () => {
  it('stays within [c/2, c] where c doubles from base up to the cap', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), {
          minLength: 1,
          maxLength: 40,
        }),
        (base, extra, randoms) => {
          const max = base + extra;
          let i = 0;
          const b = new Backoff(base, max, () => randoms[i % randoms.length]!);
          for (i = 0; i < randoms.length; i++) {
            const c = Math.min(max, base * 2 ** i);
            const d = b.next();
            expect(d).toBeGreaterThanOrEqual(c / 2);
            expect(d).toBeLessThanOrEqual(c);
          }
        },
      ),
    );
  });

  it('goes 50 → 2000 ms with the defaults and starts over after reset', () => {
    const low = new Backoff(50, 2000, () => 0);
    const ceilings = Array.from({ length: 8 }, () => low.next() * 2);
    expect(ceilings).toEqual([50, 100, 200, 400, 800, 1600, 2000, 2000]);
    low.reset();
    expect(low.next()).toBe(25);
    const high = new Backoff(50, 2000, () => 0.999999);
    for (let i = 0; i < 50; i++) expect(high.next()).toBeLessThanOrEqual(2000);
  });

  it('survives a broken random source', () => {
    expect(new Backoff(100, 100, () => Number.NaN).next()).toBe(75);
    expect(new Backoff(100, 100, () => 7).next()).toBe(100);
  });
});

describe('SendQueue', () => {
  it('never exceeds its count or byte bound and stays FIFO', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 500 }),
        fc.array(fc.oneof(fc.integer({ min: 0, max: 100 }), fc.constant(-1)), { maxLength: 200 }),
        (maxMessages, maxBytes, ops) => {
          const q = new SendQueue(maxMessages, maxBytes);
          const model: Uint8Array[] = [];
          let serial = 0;
          for (const op of ops) {
            if (op < 0) {
              expect(q.shift()).toBe(model.shift());
            } else {
              const frame = new Uint8Array(op).fill(serial++ % 256);
              const fits =
                model.length < maxMessages &&
                model.reduce((s, f) => s + f.length, 0) + frame.length <= maxBytes;
              expect(q.push(frame)).toBe(fits);
              if (fits) model.push(frame);
            }
            expect(q.length).toBe(model.length);
            expect(q.length).toBeLessThanOrEqual(maxMessages);
            expect(q.byteLength).toBeLessThanOrEqual(maxBytes);
          }
          expect(q.clear()).toBe(model.length);
          expect(q.byteLength).toBe(0);
        },
      ),
    );
  });

  it('compacts after many shifts without losing order', () => {
    const q = new SendQueue(10_000, 1_000_000);
    for (let i = 0; i < 5000; i++) q.push(new Uint8Array([i % 256, i >> 8]));
    for (let i = 0; i < 5000; i++) {
      const f = q.shift()!;
      expect(f[0]! + f[1]! * 256).toBe(i);
    }
    expect(q.shift()).toBeUndefined();
  });
});

describe('options', () => {
  const good: PeerTransportOptions = {
    nodeId: 1,
    clusterId: 'c',
    secret: 'sixteen-bytes-ok',
    listen: { host: '127.0.0.1', port: 0 },
    peers: new Map([[2, '127.0.0.1:7002']]),
    onMessage: () => {},
  };

  it('applies the documented defaults', () => {
    const r = resolveOptions(good);
    expect(r.maxQueueMessages).toBe(4096);
    expect(r.maxFrameBytes).toBe(4 * 1024 * 1024);
    expect(r.snapshotChunkBytes).toBe(1024 * 1024);
    expect(r.backoffBaseMs).toBe(50);
    expect(r.backoffMaxMs).toBe(2000);
  });

  it('names the bad option and the allowed range', () => {
    const bad: [Partial<PeerTransportOptions>, RegExp][] = [
      [{ nodeId: 0 }, /nodeId = 0; allowed: a positive integer/],
      [{ secret: 'short' }, /secret = "short"; allowed: .*at least 16 bytes/],
      [{ clusterId: '' }, /clusterId/],
      [
        { listen: { host: '127.0.0.1', port: 70000 } },
        /listen.port = 70000; allowed: an integer in 0..65535/,
      ],
      [{ maxFrameBytes: 100 }, /maxFrameBytes = 100; allowed: an integer in 65536\.\./],
      [
        { snapshotChunkBytes: 4 * 1024 * 1024 },
        /snapshotChunkBytes = 4194304; allowed: an integer in 1024\.\.4194240/,
      ],
      [{ maxQueueBytes: 1000 }, /maxQueueBytes = 1000; allowed: an integer in 4194304\.\./],
      [
        { keepaliveIntervalMs: 1000, idleTimeoutMs: 1000 },
        /idleTimeoutMs = 1000; allowed: an integer in 1001\.\./,
      ],
      [{ backoffBaseMs: 100, backoffMaxMs: 50 }, /backoffMaxMs = 50/],
      [{ peers: new Map([[-1, 'x:1']]) }, /peers key = -1/],
    ];
    for (const [patch, re] of bad) {
      expect(() => resolveOptions({ ...good, ...patch })).toThrow(TransportOptionError);
      expect(() => resolveOptions({ ...good, ...patch })).toThrow(re);
    }
  });

  it('parses peer addresses', () => {
    expect(parsePeerAddress('10.0.0.1:7001')).toEqual({ host: '10.0.0.1', port: 7001 });
    expect(parsePeerAddress('node-2.floe:80')).toEqual({ host: 'node-2.floe', port: 80 });
    expect(parsePeerAddress('[::1]:7001')).toEqual({ host: '::1', port: 7001 });
    for (const bad of ['', 'host', 'host:', 'host:0', 'host:65536', ':80', '::1:80', 'a b:1:2']) {
      expect(() => parsePeerAddress(bad), bad).toThrow(/allowed: "host:port"/);
    }
  });
});
