import { describe, expect, it } from 'vitest';
import { DEFAULT_TTL_MS } from '../../lease/lease-service.js';
import { DEFAULTS } from '../../node/config.js';
import { drawConfig, FLOE_LAYOUT, PROFILE_NAMES } from './config.js';
import { sdkDefaultRequestTimeoutMs } from './production-defaults.js';

describe('production-defaults seeds (config-late7-defaults)', () => {
  it('are drawn in about 1 seed in 6, and a seed that does not draw them keeps its configuration', () => {
    let on = 0;
    for (let seed = 1; seed <= 600; seed++) {
      const c = drawConfig(seed, 'swarm');
      if (c.productionDefaults) on++;
      else expect(drawConfig(seed, 'swarm', { defaults: 'off' })).toEqual(c);
    }
    expect(on).toBeGreaterThan(600 / 10);
    expect(on).toBeLessThan(600 / 4);
  });

  it('run floe serve DEFAULTS and the SDK defaults in every profile with --defaults on', () => {
    for (const profile of PROFILE_NAMES) {
      const c = drawConfig(3, profile, { defaults: 'on' });
      expect(c.node).toMatchObject({
        production: true,
        tickMs: DEFAULTS.tickMs,
        electionTicks: DEFAULTS.electionTicks,
        snapshotEvery: DEFAULTS.snapshotEvery,
        trailingEntries: DEFAULTS.snapshotTrailing,
        leaseTtlMs: DEFAULT_TTL_MS,
      });
      expect(c.lease).toMatchObject({ ttlMs: DEFAULT_TTL_MS, layout: FLOE_LAYOUT, sdkDefaults: true });
      expect(c.lease.requestTimeoutMs).toBe(sdkDefaultRequestTimeoutMs());
      expect(c.lease.safetyMarginMs).toBeUndefined();
      expect(c.lease.acquireTimeoutMs).toBeUndefined();
      expect(c.transport.production).toBe(true);
      expect(c.seconds).toBeGreaterThanOrEqual(20);
    }
    expect(drawConfig(3, 'swarm', { defaults: 'on', peerTransport: 'sim' }).transport.production).toBe(false);
    expect(drawConfig(10, 'swarm', { defaults: 'on', seconds: 7 }).seconds).toBe(7);
  });

  it('reads the SDK default request timeout from the SDK', () => {
    const ms = sdkDefaultRequestTimeoutMs();
    expect(ms).toBeGreaterThanOrEqual(50);
    expect(ms).toBeLessThanOrEqual(60_000);
  });
});
