// Who issued an ID, from the audit trail, against a real ClickHouse 18.16 (started by the test, stopped by PID).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClickHouseProcess, clickhouseServerAvailable, startClickHouse } from './clickhouse-process.js';
import { ClickHouseAuditSink } from './clickhouse-sink.js';
import { type AuditEvent, auditEventToRow } from './events.js';
import { earlierHolderFromAudit } from './whois-history.js';

const have = clickhouseServerAvailable();
if (!have) console.warn('whois-history: /usr/sbin/clickhouse-server is not installed; skipped');

describe.skipIf(!have)('earlierHolderFromAudit (real ClickHouse)', () => {
  let ch: ClickHouseProcess;
  let sink: ClickHouseAuditSink;
  beforeAll(async () => {
    ch = await startClickHouse();
    sink = new ClickHouseAuditSink({ url: ch.url });
    await sink.init();
    let index = 0;
    const ev = (e: AuditEvent): AuditEvent => ({ ...e, raftIndex: ++index, cluster: 'c' });
    const events: AuditEvent[] = [
      // Worker 3 of app orders: a (token 5) released at mark 5,000; b (token 9) expired at mark 9,000; c (12) live.
      ev({ type: 'lease_acquired', app: 'orders', workerId: 3, holder: 'a', token: 5, tsMs: 1_000 }),
      ev({
        type: 'lease_released',
        app: 'orders',
        workerId: 3,
        holder: 'a',
        token: 5,
        tsMs: 5_500,
        detail: { highWaterMs: 5_000 },
      }),
      ev({ type: 'lease_acquired', app: 'orders', workerId: 3, holder: 'b', token: 9, tsMs: 6_000 }),
      ev({
        type: 'lease_expired',
        app: 'orders',
        workerId: 3,
        holder: 'b',
        token: 9,
        tsMs: 9_900,
        detail: { highWaterMs: 9_000 },
      }),
      ev({ type: 'lease_acquired', app: 'orders', workerId: 3, holder: 'c', token: 12, tsMs: 10_000 }),
      // Another worker and another app do not interfere.
      ev({
        type: 'lease_released',
        app: 'orders',
        workerId: 4,
        holder: 'x',
        token: 6,
        tsMs: 5_000,
        detail: { highWaterMs: 4_000 },
      }),
      ev({
        type: 'lease_released',
        app: 'other',
        workerId: 3,
        holder: 'y',
        token: 7,
        tsMs: 5_000,
        detail: { highWaterMs: 4_000 },
      }),
    ];
    const rows = events.map((e) => JSON.stringify(auditEventToRow(e))).join('\n');
    await sink.insertPayload(`${rows}\n`, events.length);
    await sink.insertPayload(`${rows}\n`, events.length); // replayed: counted once
  }, 60_000);
  afterAll(async () => {
    await sink?.close();
    await ch?.stop();
  }, 60_000);

  it('names the lease whose final mark is the first at or above the timestamp', async () => {
    expect(await earlierHolderFromAudit(sink, 'orders', 3, 4_000)).toMatchObject({
      nodeId: 'a',
      token: '5',
      grantedAtMs: 1_000,
      ended: 'released',
      highWaterMs: 5_000,
    });
    expect((await earlierHolderFromAudit(sink, 'orders', 3, 5_000))?.nodeId).toBe('a');
    expect(await earlierHolderFromAudit(sink, 'orders', 3, 5_001)).toMatchObject({
      nodeId: 'b',
      token: '9',
      ended: 'expired',
      endedAtMs: 9_900,
    });
    // Above every ended lease's mark: the live (or last) holder, which the replicated state names.
    expect(await earlierHolderFromAudit(sink, 'orders', 3, 9_001)).toBeUndefined();
    expect(await earlierHolderFromAudit(sink, 'nope', 3, 4_000)).toBeUndefined();
  });
});
