// A real ClickHouse 18.16 with the audit table, for cluster tests of the audit trail: started before the tests of the
// file, stopped by PID after them (and the Floe cluster the test started, first). Skipped, saying so, without it.
import { afterAll, beforeAll } from 'vitest';
import {
  type ClickHouseProcess,
  clickhouseServerAvailable,
  startClickHouse,
} from '../../src/audit/clickhouse-process.js';
import { ClickHouseAuditSink } from '../../src/audit/clickhouse-sink.js';
import type { Cluster } from './harness.js';

export const haveClickHouse = clickhouseServerAvailable();

export interface AuditClickHouse {
  ch: ClickHouseProcess;
  sink: ClickHouseAuditSink;
  /** The Floe cluster the test started: stopped and removed before ClickHouse. */
  cluster: Cluster | undefined;
}

/** Call inside a `describe.skipIf(!haveClickHouse)` block; the returned object is filled in by beforeAll. */
export function auditClickHouse(name: string): AuditClickHouse {
  if (!haveClickHouse) console.warn(`${name}: /usr/sbin/clickhouse-server is not installed; skipped`);
  const t = { cluster: undefined } as AuditClickHouse;
  beforeAll(async () => {
    t.ch = await startClickHouse();
    t.sink = new ClickHouseAuditSink({ url: t.ch.url });
    await t.sink.init();
  }, 60_000);
  afterAll(async () => {
    await t.cluster?.stopAll();
    t.cluster?.cleanup();
    await t.sink?.close();
    await t.ch?.stop();
  }, 60_000);
  return t;
}
