/**
 * The hostile-client fuzzer (scripts/fuzz-http.ts) in CI size against a real `floe serve` process
 * (needs `npm run build`): no 5xx and no acceptance for a mistake, every error in the documented
 * shape, nothing committed by invalid requests, the node alive, memory bounded, slow clients cut.
 * The full run is `npm run fuzz` (5,000 HTTP requests and 1,000 RESP cases).
 */
import { describe, expect, it } from 'vitest';
import { runFuzz } from '../../scripts/fuzz-http.js';

describe('hostile-client fuzz (CI size)', () => {
  it('survives 600 HTTP mistakes and 200 RESP cases with slow clients alongside', async () => {
    // Wall-clock bounds on the slow clients are the script's (strictTiming); here only that they are cut.
    const report = await runFuzz({
      requests: 600,
      respCases: 200,
      seed: 11,
      slowClients: 1,
      strictTiming: false,
    });
    expect(report.failures).toEqual([]);
    expect(report.httpRequests).toBe(600);
    expect(report.respCases).toBe(200);
    expect(report.commitAfter).toBe(report.commitBefore);
    expect(Object.keys(report.statusCounts).filter((s) => s.startsWith('5'))).toEqual([]);
    expect(
      report.slowClients.filter((s) => s.kind !== 'idle keep-alive').every((s) => s.status === '408'),
    ).toBe(true);
    // Every state-dependent mistake is refused with a 4xx.
    for (const m of report.stateMistakes) expect(m.status, m.desc).toBeGreaterThanOrEqual(400);
  });
});
