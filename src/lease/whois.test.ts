import { describe, expect, it } from 'vitest';
import { compose, PRESETS } from '../id/index.js';
import { FakeLog } from '../state/leases/test-helpers.js';
import { whois } from './whois.js';

const floe = PRESETS.floe;

describe('whois: who issued this ID (from the lease state)', () => {
  it('names the current holder for an ID in (floor, bound], an earlier holder below the floor, and refuses the impossible', () => {
    const log = new FakeLog();
    log.timeMs = Date.UTC(2026, 10, 1); // inside the floe layout's epoch
    log.run({ op: 'configurePool', app: 'orders', bits: 4, datacenterBits: 0 });
    const t0 = log.timeMs + 10_000; // the fake leader clock; bounds may be at most 1 h ahead of it
    // First holder of worker 0 promises up to t0 + 1000, then releases having used up to t0 + 900.
    const a = log.grant('orders', 'host-a', { boundMs: t0 + 1000 });
    log.run({
      op: 'release',
      app: 'orders',
      workerId: a.workerId,
      token: a.token,
      lastTimestampMs: t0 + 900,
    });
    // host-b takes worker 0 next (host-a moved on): its IDs are above t0 + 1000.
    log.run({ op: 'configurePool', app: 'orders', bits: 4, datacenterBits: 0 });
    const b = log.grant('orders', 'host-a', { boundMs: t0 + 5000 }); // host-a gets its worker ID back
    expect(b.workerId).toBe(a.workerId);
    const id = (ts: number, worker = a.workerId) => compose({ timestamp: ts, worker, sequence: 7 }, floe);

    const now = whois(log.sm, id(t0 + 2000), floe, undefined, t0 + 3000);
    expect(now.candidates).toEqual([
      expect.objectContaining({
        app: 'orders',
        workerId: 0,
        verdict: 'holder',
        holder: expect.objectContaining({ token: b.token, nodeId: 'host-a', live: true }),
      }),
    ]);
    expect(now.summary).toMatch(/issued by the current holder of worker ID 0 \(token \d+\): host-a/);

    const earlier = whois(log.sm, id(t0 + 500), floe, 'orders', t0 + 3000);
    expect(earlier.candidates[0]).toMatchObject({
      verdict: 'earlier',
      reason: expect.stringMatching(/before token \d+ .*audit trail/),
    });

    const future = whois(log.sm, id(t0 + 9000), floe, 'orders', t0 + 3000);
    expect(future.candidates[0]).toMatchObject({
      verdict: 'never',
      reason: expect.stringMatching(/above every bound .* in the future/),
    });
    expect(future.summary).toMatch(/^Floe could not have issued/);

    const unused = whois(log.sm, id(t0 + 2000, 9), floe, 'orders', t0 + 3000);
    expect(unused.candidates[0]).toMatchObject({
      verdict: 'never',
      reason: 'worker ID 9 of app orders was never leased',
    });

    expect(whois(log.sm, id(t0, 20), floe, 'orders').candidates[0]).toMatchObject({
      verdict: 'never',
      reason: /outside app orders's pool of 16/,
    });
    expect(whois(log.sm, id(t0), floe, 'nope').candidates[0]).toMatchObject({
      verdict: 'never',
      reason: 'app nope has no worker-ID pool',
    });
    expect(whois(log.sm, id(t0, 20), floe).summary).toMatch(/no app's pool has worker ID 20/);
  });
});
