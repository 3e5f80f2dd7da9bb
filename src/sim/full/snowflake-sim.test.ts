// Server-side Snowflake inside the full simulator: every node runs the production SnowflakeService behind the
// production HTTP routes and RESP commands, clients call them under the run's faults, and the ID oracle checks every
// ID a node issues (unique per key, one holder per worker ID at a time, above the worker's high-water mark at grant).
import { describe, expect, it } from 'vitest';
import { compose } from '../../id/index.js';
import { drawConfig, FLOE_LAYOUT } from './config.js';
import { IdOracle } from './id-oracle.js';
import { runFullSim } from './run.js';
import { SnowflakeDeliveries } from './snowflake-workload.js';
import { testWorld } from './test-world.js';

const world = testWorld;

describe('the ID oracle with snowflake keys and node holders', () => {
  const L = FLOE_LAYOUT;
  const T0 = Date.UTC(2026, 5, 1);
  const id = (ts: number, worker: number, seq: number) =>
    compose({ timestamp: ts, worker, sequence: seq }, L);
  const grant = (o: IdOracle, app: string, workerId: number, token: number) =>
    o.leaseEvent({
      type: 'granted',
      app,
      workerId,
      token,
      nodeId: 'floe-node-1',
      ttlMs: 1000,
      index: token,
      leaderTimeMs: T0,
    });

  it('keeps one ID namespace per app: equal IDs of two keys are no duplicate, within one key they are', () => {
    const w = world();
    const o = new IdOracle(w);
    grant(o, 'sf-a', 0, 1);
    grant(o, 'sf-b', 0, 2);
    o.issued('n1#1', 'sf-a', 0, 1, L, id(T0 + 5, 0, 0), 100);
    o.issued('n1#1', 'sf-b', 0, 2, L, id(T0 + 5, 0, 0), 100);
    expect(w.failures).toEqual([]);
    expect(o.wasIssued('sf-a', id(T0 + 5, 0, 0))).toBe(true);
    expect(o.wasIssued('sf-c', id(T0 + 5, 0, 0))).toBe(false);
    o.issued('n2#1', 'sf-a', 0, 1, L, id(T0 + 5, 0, 0), 200);
    expect(w.failures[0]?.kind).toBe('duplicate-id');
  });

  it('takes node processes as holders: two node processes on one worker ID at once overlap', () => {
    const w = world();
    const o = new IdOracle(w);
    grant(o, 'sf-a', 3, 7);
    grant(o, 'sf-a', 3, 8);
    o.issued('n1#1', 'sf-a', 3, 7, L, id(T0 + 5, 3, 0), 100);
    o.issued('n2#1', 'sf-a', 3, 8, L, id(T0 + 50, 3, 0), 150);
    o.issued('n1#1', 'sf-a', 3, 7, L, id(T0 + 6, 3, 0), 200);
    expect(w.failures[0]?.kind).toBe('lease-overlap');
  });

  it('checks deliveries: the asked node issued each ID, exactly count, increasing, once', () => {
    const w = world();
    const o = new IdOracle(w);
    const d = new SnowflakeDeliveries(w, o);
    grant(o, 'sf-a', 1, 1);
    const ids = [id(T0 + 5, 1, 0), id(T0 + 5, 1, 1)];
    for (const x of ids) o.issued('n1#1', 'sf-a', 1, 1, L, x, 100);
    d.issued('sf-a', ids, 1);
    const s = ids.map(String);
    expect(d.check('sf-a', 3, s, 'f1', 'q', 1)).toBe(false); // count
    expect(w.failures.pop()?.kind).toBe('reply-mismatch');
    expect(d.check('sf-a', 2, [s[1] as string, s[0] as string], 'f1', 'q', 1)).toBe(false); // order
    expect(w.failures.pop()?.kind).toBe('reply-mismatch');
    expect(d.check('sf-a', 2, s, 'f1', 'q', 2)).toBe(false); // another node's IDs
    expect(w.failures.pop()?.detail).toMatch(/which n1 issued, not n2/);
    expect(d.check('sf-b', 2, s, 'f1', 'q', 1)).toBe(false); // another key's IDs
    expect(w.failures.pop()?.detail).toMatch(/no node issued for sf-b/);
    expect(d.check('sf-a', 2, s, 'f1', 'q', 1)).toBe(true);
    expect(w.failures).toEqual([]);
    expect(d.check('sf-a', 1, [s[0] as string], 'f2', 'q', 1)).toBe(false); // delivered twice
    expect(w.failures.pop()?.kind).toBe('duplicate-id');
  });
});

describe('server-side Snowflake in the full simulator', () => {
  it('is drawn from a stream of its own: seeds without it keep their configuration', () => {
    let withIt = 0;
    for (let seed = 1000; seed < 1060; seed++) {
      const c = drawConfig(seed, 'swarm');
      const { snowflake, ...rest } = c;
      const forced = drawConfig(seed, 'swarm', { snowflakeClients: 3 });
      const { snowflake: sf3, ...rest3 } = forced;
      expect(rest3).toEqual(rest);
      expect(sf3.clients).toBe(3);
      expect([...new Set(sf3.kinds)].sort()).toEqual(['http', 'resp']);
      if (snowflake.clients > 0) withIt++;
      else expect(snowflake.kinds).toEqual([]);
    }
    expect(withIt).toBeGreaterThan(10);
    expect(withIt).toBeLessThan(35);
  });

  it('runs a handful of swarm seeds with 3 snowflake clients, 0 failures, IDs checked', async () => {
    let delivered = 0;
    let respOk = 0;
    for (let seed = 1000; seed < 1005; seed++) {
      const r = await runFullSim({ seed, snowflakeClients: 3 });
      expect(r.failure?.detail ?? 'ok', `seed ${seed}`).toBe('ok');
      expect(r.stats.snowflake.issued).toBeGreaterThanOrEqual(r.stats.snowflake.ids);
      delivered += r.stats.snowflake.ids;
      respOk += r.stats.snowflake.respOk;
    }
    expect(delivered).toBeGreaterThan(1000);
    expect(respOk).toBeGreaterThan(10);
  }, 120_000);

  it('is deterministic: the same seed gives the same trace', async () => {
    const a = await runFullSim({ seed: 1002, snowflakeClients: 2 });
    const b = await runFullSim({ seed: 1002, snowflakeClients: 2 });
    expect(b.traceHash).toBe(a.traceHash);
    expect(b.stats.snowflake).toEqual(a.stats.snowflake);
  }, 60_000);

  // The first seed from 1000 that finds it (1020 when written; 1008 since the harness changes of 2026-11-26 moved the
  // runs of seeds with snowflake clients): 6 of 1000-1039 find it today.
  it('finds snowflake-unbounded-generator (a generator without the lease floor) within 40 swarm seeds', async () => {
    let found: Awaited<ReturnType<typeof runFullSim>> | undefined;
    for (let seed = 1000; seed < 1040 && !found; seed++) {
      const r = await runFullSim({ seed, snowflakeClients: 3, bugs: ['snowflake-unbounded-generator'] });
      if (r.failure) found = r;
    }
    expect(found?.failure?.kind).toBe('below-floor');
    expect(found?.failure?.detail).toMatch(
      /^n\d#\d+ issued ID \d+ with timestamp \d+, not above the high-water mark/,
    );
    const clean = await runFullSim({ seed: found!.seed, snowflakeClients: 3 });
    expect(clean.failure?.detail ?? 'ok').toBe('ok');
  }, 240_000);
});
