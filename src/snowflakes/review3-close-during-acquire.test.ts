// Adversarial review 3 (review3-seq-snow) of stop 35's snowflake fixes (149067e, b83fe92). These tests failed on the
// code under review. Review 2's fix checks close() only after an acquire's wait for a dropped lease's release; an
// acquire whose request is in flight when close() runs (a first NEXT of a key, or the re-acquire after a lost lease)
// is not checked after its answer: it leases the key after close() resolved, answers the NEXT, and the lease renews on
// (a graceful stop leaves a live lease behind). Same world as review2-close-during-release.test.ts.
// Also: close() does not wait for the release of a lease the service dropped (`releasing`), so the graceful stop
// (start.ts: "hand the worker IDs back while the cluster can still take the release") goes on to stop the node with
// that release unanswered; the worker ID then stays taken until its TTL.
import { describe, expect, it } from 'vitest';
import { FloeClient } from '../client/floe-client.js';
import type { FetchLike } from '../client/http-transport.js';
import { encodeLeaseCommand } from '../state/leases/codec.js';
import { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import type { LeaseCommand, LeaseResult } from '../state/leases/types.js';
import { SnowflakeKeysStateMachine } from '../state/snowflakes/snowflake-keys.js';
import { SnowflakeService } from './snowflake-service.js';

function world() {
  let now = 0; // virtual ms, both clocks
  const wall0 = Date.UTC(2026, 5, 1);
  const timers: { at: number; fn: () => void; seq: number }[] = [];
  let seq = 0;
  const setTimer = (fn: () => void, ms: number) => {
    const t = { at: now + Math.max(0, ms), fn, seq: seq++ };
    timers.push(t);
    return {
      cancel() {
        const i = timers.indexOf(t);
        if (i >= 0) timers.splice(i, 1);
      },
    };
  };
  const settle = () => new Promise((r) => setImmediate(r));
  /** Runs due timers in order up to `until` (virtual), letting promises settle between them. */
  async function runUntil(until: number): Promise<void> {
    for (;;) {
      await settle();
      timers.sort((x, y) => x.at - y.at || x.seq - y.seq);
      const t = timers[0];
      if (!t || t.at > until) break;
      timers.shift();
      now = Math.max(now, t.at);
      t.fn();
    }
    now = Math.max(now, until);
    await settle();
  }

  const leases = new LeaseStateMachine();
  const keys = new SnowflakeKeysStateMachine();
  let index = 0;
  const ctx = () => ({ index: ++index, term: 1, leaderTimeMs: wall0 + now });
  const run = (cmd: LeaseCommand) => leases.apply(encodeLeaseCommand(cmd), ctx()) as LeaseResult;
  /** While set, the next release's reply waits here. */
  let holdReleases = false;
  /** While set, the next acquire's reply waits here. */
  let holdAcquires = false;
  const held: (() => void)[] = [];
  /** The leader's expiry (LeaseService): a lease not renewed for its TTL is expired through the log. */
  const lastAck = new Map<string, { item: [string, number, number]; at: number; ttlMs: number }>();
  const expireDue = () => {
    for (const [k, v] of lastAck)
      if (v.at + v.ttlMs <= now) {
        run({ op: 'expire', items: [v.item] });
        lastAck.delete(k);
      }
  };
  const fetch: FetchLike = async (url, init) => {
    expireDue();
    const body = JSON.parse(String(init.body)) as Record<string, unknown>;
    const m = /\/v1\/apps\/([^/]+)\/workers\/(?:(\d+)\/)?(\w+)$/.exec(new URL(url).pathname);
    if (!m) throw new Error(`unexpected ${url}`);
    const app = decodeURIComponent(m[1] as string);
    const r =
      m[3] === 'acquire'
        ? run({ op: 'acquire', app, ...body } as LeaseCommand)
        : run({
            op: m[3],
            app,
            workerId: Number(m[2]),
            lastTimestampMs: 0,
            boundMs: 0,
            ...body,
          } as unknown as LeaseCommand);
    if (r.ok && (r.op === 'acquire' || r.op === 'renew')) {
      const g = r as unknown as { app: string; workerId: number; token: number; ttlMs?: number };
      const ttlMs = g.ttlMs ?? (body.ttlMs as number | undefined) ?? 10_000;
      lastAck.set(`${g.app}/${g.workerId}/${g.token}`, {
        item: [g.app, g.workerId, g.token],
        at: now,
        ttlMs,
      });
    }
    const text = JSON.stringify(r.ok ? r : { error: r.code, message: r.message });
    const reply = { status: r.ok ? 200 : 409, headers: { get: () => null }, text: async () => text };
    // While set, a release's answer is held (sent, applied by the cluster, answer in flight).
    if (m[3] === 'release' && holdReleases) {
      holdReleases = false;
      return new Promise((res) => held.push(() => res(reply)));
    }
    // While set, an acquire's answer is held (applied by the cluster: the lease exists; answer in flight).
    if (m[3] === 'acquire' && holdAcquires) {
      holdAcquires = false;
      return new Promise((res) => held.push(() => res(reply)));
    }
    return reply;
  };
  const client = new FloeClient({
    endpoints: ['127.0.0.1:1'],
    fetch,
    clock: { now: () => wall0 + now },
    monotonic: () => now,
    setTimer,
    sleep: (ms) => new Promise<void>((r) => setTimer(r, ms)),
    random: () => 0.5,
    bootId: 'boot-1',
  });
  const svc = new SnowflakeService({
    state: keys,
    propose: async (c) => keys.apply(c, ctx()),
    configurePool: async (app, bits, datacenterBits) => {
      const r = run({ op: 'configurePool', app, bits, datacenterBits });
      return r.ok ? { ok: true } : { ok: false, message: r.message };
    },
    pinnedLayout: (app) => leases.pool(app)?.layout || undefined,
    client,
    holder: 'floe-node-1',
  });
  return {
    svc,
    leases,
    runUntil,
    advanceWithoutTimers: (ms: number) => {
      now += ms; // the event loop was busy: time passed, no timer ran yet
    },
    get now() {
      return now;
    },
    holdRelease: () => {
      holdReleases = true;
    },
    holdAcquire: () => {
      holdAcquires = true;
    },
    releaseHeld: () => {
      for (const f of held.splice(0)) f();
    },
    heldCount: () => held.length,
  };
}

describe('review 3: close() ordering', () => {
  it('close() while the acquire of a key is answered: the acquire leases nothing after close() resolved', async () => {
    const w = world();
    await w.svc.create('k', 'floe', 10_000);
    // The first NEXT of the key acquires a lease; the cluster applied it, its answer is in flight.
    w.holdAcquire();
    const next = w.svc.next('k', 1).then(
      (ids) => ({ ok: true as const, ids }),
      (err: unknown) => ({ ok: false as const, err }),
    );
    await w.runUntil(w.now + 1);
    expect(w.heldCount()).toBe(1);
    // Graceful stop meanwhile: it hands back every lease it holds (none yet) and, since review 4, waits for the acquire.
    const closing = w.svc.close();
    w.releaseHeld();
    await closing;
    await w.runUntil(w.now + 30_000);
    const r = await next;
    expect(
      { nextOk: r.ok, liveLeases: w.leases.leases('k').length },
      r.ok ? `NEXT answered after close(): ${r.ids}` : String(r.err),
    ).toEqual({ nextOk: false, liveLeases: 0 }); // before the fix: { nextOk: true, liveLeases: 1 }
  });

  it('close() while the release of a dropped lease is in flight: close() resolves only once that release is answered', async () => {
    const w = world();
    await w.svc.create('k', 'floe', 10_000);
    expect(await w.svc.next('k', 1)).toHaveLength(1); // lease at t=0: deadline 8,900
    // A stall past the deadline: the next NEXT drops the lease and releases it; the release's answer is in flight.
    w.advanceWithoutTimers(9_100);
    w.holdRelease();
    const next = w.svc.next('k', 1).catch((e: unknown) => e);
    await w.runUntil(w.now + 1);
    expect(w.heldCount()).toBe(1);
    let closed = false;
    const closing = w.svc.close().then(() => {
      closed = true;
    });
    await w.runUntil(w.now + 1);
    // The graceful stop must not go on (stopping the node) while a release it started is unanswered.
    expect({ closed, releasesInFlight: w.heldCount() }).not.toEqual({ closed: true, releasesInFlight: 1 }); // before the fix it did
    w.releaseHeld();
    await closing;
    await next;
  });
});
