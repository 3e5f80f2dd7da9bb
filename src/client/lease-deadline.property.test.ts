import fc from 'fast-check';
import { describe, it } from 'vitest';
import { CeilingReachedError, ClockMovedBackwardsError, decode } from '../id/index.js';
import { LeaseLostError, LeaseRenewalLateError } from './errors.js';
import { FloeClient } from './floe-client.js';
import type { FetchLike } from './http-transport.js';
import { FakeCluster, FakeTime } from './test-doubles.js';

const WALL0 = Date.UTC(2026, 5, 1);
const TTL = 2000;
const MARGIN = TTL / 10 + 100;

type Op =
  | { kind: 'advance'; ms: number }
  | { kind: 'generate'; n: number }
  | { kind: 'down' }
  | { kind: 'up' }
  | { kind: 'expire' }
  | { kind: 'jump'; ms: number }
  /** Cut the cluster off, move to `before` ms ahead of the SDK's own deadline, issue one ID: probes the boundary. */
  | { kind: 'nearDeadline'; before: number };

// Weights keep most runs alive long enough to probe deadlines: an expiry ends the lease, and a backwards jump beyond
// the tolerance makes the generator refuse until the clock is back.
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 800 }) }),
  },
  {
    weight: 8,
    arbitrary: fc.record({ kind: fc.constant('generate' as const), n: fc.integer({ min: 1, max: 5000 }) }),
  },
  { weight: 3, arbitrary: fc.constant({ kind: 'down' as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'up' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'expire' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('jump' as const), ms: fc.integer({ min: -50, max: 3000 }) }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('nearDeadline' as const),
      before: fc.integer({ min: 1, max: 400 }),
    }),
  },
);

describe('lease generator: deadline and bounds under random schedules (property)', () => {
  it('issues IDs only before (last acknowledged send + TTL - margin), strictly above the floor, never above the committed bound', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 30 }), async (ops) => {
        const cluster = new FakeCluster(['a:1', 'b:1']);
        const time = new FakeTime(WALL0);
        const acks: number[] = [];
        const fetch: FetchLike = async (url, init) => {
          const sentAt = time.t;
          const r = await cluster.fetch(url, init);
          if (r.status === 200 && !url.endsWith('/release')) acks.push(sentAt);
          return r;
        };
        const client = new FloeClient({
          endpoints: cluster.hosts,
          fetch,
          clock: time.wall,
          monotonic: time.mono,
          setTimer: time.setTimer,
          sleep: time.sleep,
          random: () => 0.5,
          bootId: 'b',
        });
        cluster.setHighWater('p', 0, WALL0 + 500);
        const p = client.leaseWorker({ app: 'p', nodeId: 'n', ttlMs: TTL, boundWindowMs: 5000 });
        await time.advance(1);
        const lease = await p;
        const gen = lease.snowflake('floe');
        let last = -1n;
        const generate = (n: number) => {
          // Acks cannot change during synchronous generation: one bound per batch of calls.
          const allowedUntil = Math.max(...acks) + TTL - MARGIN;
          const ceiling = cluster.highWaterOf('p', lease.workerId);
          for (let i = 0; i < n; i++) {
            let id: bigint;
            try {
              id = gen.next();
            } catch (e) {
              if (e instanceof CeilingReachedError || e instanceof ClockMovedBackwardsError) return;
              if (e instanceof LeaseRenewalLateError) return;
              if (!(e instanceof LeaseLostError)) throw e;
              return;
            }
            const ts = decode(id, 'floe').timestamp;
            if (!(time.t < allowedUntil)) throw new Error(`id at ${time.t} >= ${allowedUntil}`);
            if (!(ts > WALL0 + 500)) throw new Error(`ts ${ts} <= floor`);
            if (!(ts <= ceiling)) throw new Error(`ts ${ts} > committed bound ${ceiling}`);
            if (!(id > last)) throw new Error('not increasing');
            last = id;
          }
        };
        for (const o of ops) {
          if (o.kind === 'advance') await time.advance(o.ms);
          else if (o.kind === 'down') cluster.leader = undefined;
          else if (o.kind === 'up') cluster.leader = 'a:1';
          else if (o.kind === 'expire') cluster.expire('p', lease.workerId);
          else if (o.kind === 'jump') time.wall.offset += o.ms;
          else if (o.kind === 'nearDeadline') {
            // An outage, then an ID just before the deadline the SDK believes in: the boundary must hold.
            cluster.leader = undefined;
            const to = lease.deadlineMono - o.before;
            if (Number.isFinite(to) && to > time.t) await time.advance(to - time.t);
            generate(1);
          } else generate(o.n);
        }
      }),
      { numRuns: 300 },
    );
  });
});
