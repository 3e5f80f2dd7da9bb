// IDs filled in on insert (seed 003): Drizzle's $defaultFn with Floe's defaults, against a real
// PostgreSQL and a real Floe node: a leased Snowflake generator for the key, a sequence for a number.
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { bigint, pgTable, text } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FloeClient } from '../../src/client/index.js';
import { ready, SequenceNotReadyError, sequenceDefault, snowflakeDefault } from '../../src/orm/index.js';
import type { Cluster } from './harness.js';
import { redisCli, startCluster } from './lease-cluster.js';
import { type RunningPostgres, startPostgres } from './postgres.js';

let cluster: Cluster;
let leader: number;
let postgres: RunningPostgres;

beforeAll(async () => {
  postgres = await startPostgres();
  ({ cluster, leader } = await startCluster(1));
}, 120_000);

afterAll(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
  postgres?.stop();
});

describe('Drizzle $defaultFn fills IDs on insert (PostgreSQL 15)', () => {
  it('a leased Snowflake ID as the primary key and a sequence number, for every row inserted', async () => {
    await redisCli([
      '-p',
      String(cluster.node(leader).spec.respPort),
      'SEQ.CREATE',
      'invoice-no',
      'STEP',
      '500',
    ]);
    const client = new FloeClient({ endpoints: [cluster.node(leader).http] });
    const lease = await client.leaseWorker({ app: 'orm', nodeId: 'orm-test', ttlMs: 10_000 });
    const seq = client.sequence('invoice-no', { step: 500 });
    await ready(seq);

    const orders = pgTable('orders', {
      id: bigint('id', { mode: 'bigint' })
        .primaryKey()
        .$defaultFn(snowflakeDefault(lease.snowflake('floe'))),
      invoiceNo: bigint('invoice_no', { mode: 'bigint' }).notNull().unique().$defaultFn(sequenceDefault(seq)),
      item: text('item').notNull(),
    });
    const pool = new pg.Pool({ connectionString: postgres.url, max: 4 });
    try {
      const db = drizzle(pool);
      await db.execute(
        sql`create table orders (id bigint primary key, invoice_no bigint not null unique, item text not null)`,
      );
      for (let batch = 0; batch < 10; batch++) {
        const rows = Array.from({ length: 100 }, (_, i) => ({ item: `item-${batch}-${i}` }));
        for (;;) {
          try {
            await db.insert(orders).values(rows);
            break;
          } catch (err) {
            // A synchronous default cannot wait for a segment: the insert is retried once it arrived.
            if (!(err instanceof SequenceNotReadyError)) throw err;
            await ready(seq);
          }
        }
      }
      const all = await db.select().from(orders).orderBy(orders.id);
      expect(all).toHaveLength(1000);
      expect(new Set(all.map((r) => r.id)).size).toBe(1000);
      expect(new Set(all.map((r) => r.invoiceNo)).size).toBe(1000);
      // Inserted in order: ids and invoice numbers both increase with the insertion order.
      const byItem = (r: { item: string }) => r.item.split('-').slice(1).map(Number) as [number, number];
      for (let i = 1; i < all.length; i++) {
        const [b0, i0] = byItem(all[i - 1]!);
        const [b1, i1] = byItem(all[i]!);
        expect(b1 * 100 + i1).toBeGreaterThan(b0 * 100 + i0);
        expect(all[i]!.invoiceNo).toBeGreaterThan(all[i - 1]!.invoiceNo);
      }
    } finally {
      await pool.end();
      await lease.release();
    }
  }, 120_000);
});
