// Adversarial review (review-seq-snow): SnowflakeService drops a lease it finds past its deadline (`lease.valid` false)
// without ending it. The FS-16 fix ends a lease in the generator's guard before anyone leases again; the service's own
// check bypasses it. A renewal in flight at that moment revives the dropped lease, which renews on for ever, orphaned,
// while the service's new acquire under the same holder meets it as `lease_held`. It failed before the fix (stop 35: the
// service releases a lease it drops, and the next acquire waits for that release). Real SDK and lease state machine;
// virtual clocks, timers and sleeps (the SDK's seams).
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
  /** While set, the next renewal's reply waits here (sent, applied by the cluster, answer in flight). */
  let holdRenewals = false;
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
    // One renewal is held (the one in flight at the stall); later ones, the next lease's included, are answered.
    if (m[3] === 'renew' && holdRenewals) {
      holdRenewals = false;
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
    hold: (on: boolean) => {
      holdRenewals = on;
    },
    releaseHeld: () => {
      for (const f of held.splice(0)) f();
    },
    heldCount: () => held.length,
  };
}

async function scenario(renewalAnswerArrives: boolean) {
  const w = world();
  await w.svc.create('k', 'floe', 10_000);
  expect(await w.svc.next('k', 1)).toHaveLength(1); // lease at t=0: deadline 8,900 (TTL 10 s − 1,100 margin)
  // The renewal due at ~3.3 s is sent and applied; its answer is in flight.
  w.hold(true);
  await w.runUntil(3_400);
  expect(w.heldCount()).toBe(1);
  // The event loop stalls past the deadline (a GC pause, a starved core); when it runs again, a NEXT is read before
  // the deadline timer and the renewal's answer.
  w.advanceWithoutTimers(5_700); // t = 9,100 > 8,900
  const next = w.svc.next('k', 1).then(
    (ids) => ({ ok: true as const, ids }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  await new Promise((r) => setImmediate(r));
  // The renewal's answer (sent at 3.3 s, acknowledged): the old lease's deadline moves to ~12.2 s. It is valid again.
  w.hold(false);
  if (renewalAnswerArrives) w.releaseHeld();
  // Let the world run for a minute: the service's new acquire meets the old lease (same holder) as lease_held until
  // it gives up; the old lease, which nobody uses, keeps renewing.
  await w.runUntil(60_000);
  const first = await next;
  const laterP = w.svc.next('k', 1).then(
    (ids) => ({ ok: true as const, ids }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  await w.runUntil(w.now + 20_000);
  const later = await laterP;
  return { w, first, later };
}

describe('review: SNOWFLAKE.NEXT after a stall past the lease deadline, with a renewal in flight', () => {
  it('control: the renewal answer is lost; the old lease ends, the cluster expires it, the member leases the key again', async () => {
    const { first, later } = await scenario(false);
    expect({ first: first.ok, later: later.ok }).toEqual({ first: true, later: true });
  });

  it('the renewal answer arrives late: the dropped lease was released, cannot be revived, and the member leases the key again', async () => {
    const { w, first, later } = await scenario(true);
    // The member serves the key again (from a lease it uses), at most one acquire timeout later. Before the fix both
    // calls were lease_held, and the cluster still counted the orphaned lease (renewed at t ≈ 60 s) as live.
    expect(
      { first: first.ok, later: later.ok, liveLeases: w.leases.leases('k').length },
      `first: ${first.ok ? 'ok' : String(first.err)}; later: ${later.ok ? 'ok' : String(later.err)}`,
    ).toEqual({ first: true, later: true, liveLeases: 1 });
  });
});
