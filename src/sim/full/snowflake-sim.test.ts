// Server-side Snowflake inside the full simulator: every node runs the production SnowflakeService behind the
// production HTTP routes and RESP commands, clients call them under the run's faults, and the ID oracle checks every
// ID a node issues (unique per key, one holder per worker ID at a time, above the worker's high-water mark at grant).
import { describe, expect, it } from 'vitest';
import { drawConfig } from './config.js';
import { runFullSim } from './run.js';

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

  it('finds snowflake-unbounded-generator (a generator without the lease floor) on swarm seed 1020', async () => {
    const r = await runFullSim({ seed: 1020, snowflakeClients: 3, bugs: ['snowflake-unbounded-generator'] });
    expect(r.failure?.kind).toBe('below-floor');
    expect(r.failure?.detail).toMatch(
      /^n\d#\d+ issued ID \d+ with timestamp \d+, not above the high-water mark/,
    );
    const clean = await runFullSim({ seed: 1020, snowflakeClients: 3 });
    expect(clean.failure?.detail ?? 'ok').toBe('ok');
  }, 60_000);
});
