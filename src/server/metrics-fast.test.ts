import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { FastRequestMetrics } from './metrics-fast.js';

/** A counter `x_total` and a histogram `x_seconds` (buckets 1 ms, 10 ms) by `command`, in a registry of their own. */
function fastMetrics() {
  const registry = new Registry();
  const m = new FastRequestMetrics(registry, {
    counterName: 'x_total',
    counterHelp: 'calls',
    histogramName: 'x_seconds',
    histogramHelp: 'time',
    label: 'command',
    buckets: [0.001, 0.01],
  });
  return { registry, m };
}

describe('FastRequestMetrics', () => {
  it('exposes a counter by result and a cumulative histogram in the Prometheus text format', async () => {
    const { registry, m } = fastMetrics();
    m.observe('get', 0.0005, true);
    m.observe('get', 0.001, true); // on the bound: in the 0.001 bucket (le = less or equal)
    m.observe('get', 0.005, false);
    m.observe('get', 5, true);
    m.observe('set', 0.002, true);
    const text = await registry.metrics();
    expect(text).toContain('# TYPE x_total counter');
    expect(text).toContain('x_total{command="get",result="ok"} 3');
    expect(text).toContain('x_total{command="get",result="error"} 1');
    expect(text).toContain('# TYPE x_seconds histogram');
    expect(text).toContain('x_seconds_bucket{le="0.001",command="get"} 2');
    expect(text).toContain('x_seconds_bucket{le="0.01",command="get"} 3');
    expect(text).toContain('x_seconds_bucket{le="+Inf",command="get"} 4');
    expect(text).toContain('x_seconds_sum{command="get"} 5.0065');
    expect(text).toContain('x_seconds_count{command="get"} 4');
    expect(text).toContain('x_seconds_count{command="set"} 1');
    const json = await registry.getMetricsAsJSON();
    expect(json.map((j) => j.name)).toEqual(['x_total', 'x_seconds']);
  });

  it('observe with a count is that many observations of the same time (copies answered together)', async () => {
    const { registry, m } = fastMetrics();
    m.observe('incr', 0.002, true, 15);
    m.observe('incr', 0.002, false, 2);
    const text = await registry.metrics();
    expect(text).toContain('x_total{command="incr",result="ok"} 15');
    expect(text).toContain('x_total{command="incr",result="error"} 2');
    expect(text).toContain('x_seconds_bucket{le="0.01",command="incr"} 17');
    expect(text).toContain('x_seconds_sum{command="incr"} 0.034');
  });
});
