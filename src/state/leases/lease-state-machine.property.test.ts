import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ApplyContext } from '../../node/state-machine.js';
import { encodeLeaseCommand } from './codec.js';
import { LeaseStateMachine } from './lease-state-machine.js';
import type { LeaseCommand, LeaseResult } from './types.js';

const APPS = ['a', 'b'];
const NODES = ['n0', 'n1', 'n2', 'n3', 'n4', 'n5', 'n6'];

/**
 * A command template: the token is chosen when the command is materialized, from the state of
 * the replica that generates the log (live token, a stale one, or nonsense), so that random
 * sequences exercise the success paths, not only refusals.
 */
type Template =
  | { t: 'configure'; app: number; bits: number; dc: number }
  | {
      t: 'acquire';
      app: number;
      node: number;
      req: number;
      ttl: number;
      bound: number | null;
      inc: number | null;
    }
  | { t: 'renew'; app: number; worker: number; tok: number; bound: number }
  | { t: 'release'; app: number; worker: number; tok: number; last: number }
  | { t: 'expire'; picks: [number, number, number][] }
  | { t: 'garbage'; bytes: Uint8Array };

const template: fc.Arbitrary<Template> = fc.oneof(
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('configure' as const),
      app: fc.nat(1),
      bits: fc.integer({ min: 1, max: 3 }),
      dc: fc.nat(2),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      t: fc.constant('acquire' as const),
      app: fc.nat(1),
      node: fc.nat(NODES.length - 1),
      req: fc.nat(2),
      ttl: fc.constantFrom(1000, 5000, 5000, 999),
      bound: fc.option(fc.integer({ min: -5000, max: 5000 })),
      inc: fc.option(fc.nat(1)),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('renew' as const),
      app: fc.nat(1),
      worker: fc.nat(50),
      tok: fc.nat(3),
      bound: fc.integer({ min: -5000, max: 5000 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('release' as const),
      app: fc.nat(1),
      worker: fc.nat(50),
      tok: fc.nat(3),
      last: fc.integer({ min: -5000, max: 5000 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('expire' as const),
      picks: fc.array(fc.tuple(fc.nat(1), fc.nat(50), fc.nat(3)), { minLength: 1, maxLength: 3 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ t: fc.constant('garbage' as const), bytes: fc.uint8Array({ maxLength: 12 }) }),
  },
);

/** Worker selector: mostly a worker that is leased now (if any), sometimes any number 0..8. */
function workerFor(sm: LeaseStateMachine, app: string, worker: number): number {
  const live = sm.leases(app);
  if (live.length === 0 || worker % 3 === 2) return worker % 9;
  return live[worker % live.length]!.workerId;
}

/** tok selector: 0 = the live token, 1 = live - 1 (stale), 2 = live + 1 (never issued), 3 = 1. */
function tokenFor(sm: LeaseStateMachine, app: string, worker: number, tok: number): number {
  const live = sm.liveToken(app, worker) || sm.worker(app, worker)?.token || 1;
  return [live, Math.max(1, live - 1), live + 1, 1][tok]!;
}

function materialize(t: Template, sm: LeaseStateMachine, nowMs: number): Uint8Array {
  let cmd: LeaseCommand;
  switch (t.t) {
    case 'garbage':
      return t.bytes;
    case 'configure':
      cmd = { op: 'configurePool', app: APPS[t.app]!, bits: t.bits, datacenterBits: Math.min(t.dc, t.bits) };
      break;
    case 'acquire':
      cmd = {
        op: 'acquire',
        app: APPS[t.app]!,
        nodeId: NODES[t.node]!,
        ttlMs: t.ttl,
        requestId: `r${t.req}`,
        ...(t.bound === null ? {} : { boundMs: nowMs + t.bound }),
        ...(t.inc === null ? {} : { incarnation: `i${t.inc}` }),
      };
      break;
    case 'renew': {
      const w = workerFor(sm, APPS[t.app]!, t.worker);
      cmd = {
        op: 'renew',
        app: APPS[t.app]!,
        workerId: w,
        token: tokenFor(sm, APPS[t.app]!, w, t.tok),
        boundMs: nowMs + t.bound,
      };
      break;
    }
    case 'release': {
      const w = workerFor(sm, APPS[t.app]!, t.worker);
      cmd = {
        op: 'release',
        app: APPS[t.app]!,
        workerId: w,
        token: tokenFor(sm, APPS[t.app]!, w, t.tok),
        lastTimestampMs: nowMs + t.last,
      };
      break;
    }
    case 'expire':
      cmd = {
        op: 'expire',
        items: t.picks.map(([a, pick, k]) => {
          const w = workerFor(sm, APPS[a]!, pick);
          return [APPS[a]!, w, tokenFor(sm, APPS[a]!, w, k)];
        }),
      };
      break;
  }
  return encodeLeaseCommand(cmd);
}

/** Invariants that must hold after every command. */
function checkInvariants(
  sm: LeaseStateMachine,
  highWater: Map<string, number>,
  lastToken: Map<string, number>,
): void {
  let total = 0;
  for (const pool of sm.poolList()) {
    const leases = sm.leases(pool.app);
    total += leases.length;
    expect(leases.length).toBe(pool.leased);
    // One live lease per nodeId per app; a worker ID has at most one holder by construction.
    expect(new Set(leases.map((l) => l.nodeId)).size).toBe(leases.length);
    // Fewer than 128 commands per run: no worker ID at or above 128 is ever used.
    for (let w = 0; w < Math.min(pool.size, 128); w++) {
      const info = sm.worker(pool.app, w);
      if (!info) continue;
      const key = `${pool.app}/${w}`;
      expect(info.highWaterMs).toBeGreaterThanOrEqual(highWater.get(key) ?? 0);
      highWater.set(key, info.highWaterMs);
      expect(info.token).toBeGreaterThanOrEqual(lastToken.get(key) ?? 0);
      lastToken.set(key, info.token);
    }
    // Every used, free, in-range ID is in the free list exactly once.
    const free = sm.freeOrder(pool.app);
    expect(new Set(free).size).toBe(free.length);
    for (const w of free) expect(sm.worker(pool.app, w)?.live).toBe(false);
  }
  expect(sm.leaseCount).toBe(total);
}

describe('LeaseStateMachine determinism (property)', () => {
  it('gives identical results and state on every replica, also one restored from a snapshot midway', () => {
    // How often each outcome happened over all runs: the sequences must reach the success paths.
    const seen = new Map<string, number>();
    fc.assert(
      // size 'max': lengths spread over the whole range (fast-check keeps arrays short by default).
      fc.property(
        fc.array(template, { minLength: 1, maxLength: 100, size: 'max' }),
        fc.nat(),
        (rest, cut) => {
          // App b starts as a 2-ID pool so that exhaustion and reuse happen often.
          const templates: Template[] = [{ t: 'configure', app: 1, bits: 1, dc: 0 }, ...rest];
          const a = new LeaseStateMachine();
          const b = new LeaseStateMachine();
          let c: LeaseStateMachine | undefined;
          const restoreAt = cut % templates.length;
          const highWater = new Map<string, number>();
          const lastToken = new Map<string, number>();
          let now = 1_700_000_000_000;
          templates.forEach((t, i) => {
            if (i === restoreAt) {
              c = new LeaseStateMachine();
              c.restore(a.snapshot());
            }
            now += 700;
            const ctx: ApplyContext = { index: i + 1, term: 1, leaderTimeMs: now };
            const bytes = materialize(t, a, now);
            const ra: LeaseResult = a.apply(bytes, ctx);
            const rb = b.apply(bytes, ctx);
            const what = ra.ok
              ? `${ra.op}:ok${ra.op === 'expire' && ra.expired > 0 ? ':freed' : ''}`
              : ra.code;
            seen.set(what, (seen.get(what) ?? 0) + 1);
            expect(rb).toEqual(ra);
            if (c) expect(c.apply(bytes, ctx)).toEqual(ra);
            checkInvariants(a, highWater, lastToken);
          });
          const sa = a.snapshot();
          expect(b.snapshot()).toEqual(sa);
          expect(c?.snapshot()).toEqual(sa);
        },
      ),
      { numRuns: 150 },
    );
    for (const what of [
      'acquire:ok',
      'renew:ok',
      'release:ok',
      'expire:ok:freed',
      'configurePool:ok',
      'stale_token',
      'not_held',
      'lease_held',
      'pool_exhausted',
      'pool_busy',
      'invalid_argument',
      'bad_command',
    ]) {
      expect(seen.get(what) ?? 0, what).toBeGreaterThan(20);
    }
  });

  it('never throws, whatever the bytes', () => {
    const sm = new LeaseStateMachine();
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 64 }),
          fc.anything().map((v) => encodeAny(v)),
        ),
        (bytes) => {
          const r = sm.apply(bytes, { index: 1, term: 1, leaderTimeMs: 0 });
          expect(r.ok === false || r.ok === true).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });
});

function encodeAny(v: unknown): Uint8Array {
  try {
    return encodeLeaseCommand({ ...(v as object), op: 'acquire' } as LeaseCommand);
  } catch {
    return new Uint8Array([0xc1]);
  }
}
