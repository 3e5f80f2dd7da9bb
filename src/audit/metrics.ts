/**
 * Prometheus metrics of an audit pipeline (prom-client). Values are read from the pipeline's stats at
 * scrape time, so the ID path pays nothing for them.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { AuditStats } from './pipeline.js';

type Reader = () => AuditStats;

function counter(registry: Registry, name: string, help: string, read: () => number) {
  if (registry.getSingleMetric(name)) registry.removeSingleMetric(name);
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

function gauge(registry: Registry, name: string, help: string, read: () => number) {
  if (registry.getSingleMetric(name)) registry.removeSingleMetric(name);
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

/** Register the audit metrics on `registry` (replacing an earlier pipeline's). */
export function registerAuditMetrics(registry: Registry, stats: Reader): void {
  counter(registry, 'floe_audit_events_emitted_total', 'Audit events emitted', () => stats().emitted);
  counter(registry, 'floe_audit_events_inserted_total', 'Audit events inserted into ClickHouse', () => {
    const s = stats();
    return s.inserted + s.replayed;
  });
  counter(
    registry,
    'floe_audit_events_spilled_total',
    'Audit events written to spill files',
    () => stats().spilled,
  );
  counter(
    registry,
    'floe_audit_events_replayed_total',
    'Spilled audit events replayed into ClickHouse',
    () => {
      return stats().replayed;
    },
  );
  counter(
    registry,
    'floe_audit_events_dropped_total',
    'Audit events dropped because the spill was full (or unwritable): alarm',
    () => stats().dropped,
  );
  counter(
    registry,
    'floe_audit_events_invalid_total',
    'Malformed audit events refused',
    () => stats().invalid,
  );
  counter(registry, 'floe_audit_alarms_total', 'Audit alarms raised', () => stats().alarms);
  gauge(registry, 'floe_audit_queue_events', 'Audit events waiting in memory', () => stats().queued);
  gauge(registry, 'floe_audit_spill_bytes', 'Bytes in audit spill files', () => stats().spillBytes);
  gauge(
    registry,
    'floe_audit_spill_max_bytes',
    'Bound on the audit spill files',
    () => stats().spillMaxBytes,
  );
  gauge(registry, 'floe_audit_spill_full', '1 while the audit spill is at its bound (events dropped)', () =>
    stats().spillFull ? 1 : 0,
  );
  gauge(registry, 'floe_audit_clickhouse_up', '1 while audit inserts into ClickHouse succeed', () =>
    stats().mode === 'direct' ? 1 : 0,
  );
}
