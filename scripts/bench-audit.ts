/**
 * `npm run bench:audit`: audit rows/s into ClickHouse with 10,000-row batches (issue 12), one run.
 * Starts Debian's clickhouse-server (18.16) on a free 127.0.0.1 port with its own temp config, stops
 * it by PID at the end. Prints:
 *  1. the sink alone: INSERTs of 10,000 pre-serialised JSONEachRow rows, one at a time;
 *  2. the whole pipeline: `emit` of N events (timed per call) → channel → 10,000-row batches →
 *     ClickHouse, until `flush()` resolves.
 * Options: --rows N (default 500,000), --batch N (default 10,000).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startClickHouse } from '../src/audit/clickhouse-process.js';
import { ClickHouseAuditSink } from '../src/audit/clickhouse-sink.js';
import { type AuditEvent, auditEventToRow } from '../src/audit/events.js';
import { createAuditPipeline } from '../src/audit/pipeline.js';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(name);
  const v = i >= 0 ? Number(process.argv[i + 1]) : dflt;
  if (!Number.isSafeInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
};
const ROWS = arg('--rows', 500_000);
const BATCH = arg('--batch', 10_000);

const ev = (i: number): AuditEvent => ({
  type: 'sdk_issued',
  app: 'bench',
  bizType: 'order',
  holder: 'node-1',
  worker: i % 1024,
  token: 42,
  first: 1_000_000_000_000 + i * 1000,
  last: 1_000_000_000_000 + i * 1000 + 999,
  count: 1000,
  fromMs: Date.now() - 1000,
  toMs: Date.now(),
});

async function main(): Promise<void> {
  const ch = await startClickHouse();
  const spillDir = mkdtempSync(join(tmpdir(), 'floe-bench-audit-'));
  try {
    const version = (await new ClickHouseAuditSink({ url: ch.url }).serverVersion()).text;
    console.log(
      `ClickHouse ${version} at ${ch.url}; ${ROWS.toLocaleString('en')} rows, ${BATCH.toLocaleString('en')}-row batches`,
    );

    // 1. The sink alone.
    const sink = new ClickHouseAuditSink({ url: ch.url, table: 'bench_sink' });
    await sink.init();
    const batches: Buffer[] = [];
    for (let b = 0; b * BATCH < ROWS; b++) {
      const lines: string[] = [];
      for (let i = b * BATCH; i < Math.min(ROWS, (b + 1) * BATCH); i++)
        lines.push(JSON.stringify(auditEventToRow(ev(i))));
      batches.push(Buffer.from(`${lines.join('\n')}\n`));
    }
    const bytes = batches.reduce((n, b) => n + b.length, 0);
    const t0 = performance.now();
    for (const [b, buf] of batches.entries())
      await sink.insertPayload(buf, Math.min(BATCH, ROWS - b * BATCH));
    const s = (performance.now() - t0) / 1000;
    const n1 = await sink.countDistinct();
    console.log(
      `sink INSERTs:   ${(ROWS / s).toFixed(0).padStart(8)} rows/s  (${s.toFixed(2)} s, ${(bytes / ROWS).toFixed(0)} bytes/row, ${(bytes / s / 1e6).toFixed(1)} MB/s; ${n1} distinct rows in the table)`,
    );
    await sink.close();

    // 2. The pipeline, from emit to rows in ClickHouse; the channel holds everything (no overflow).
    const events = Array.from({ length: ROWS }, (_, i) => ev(i));
    const run = async (label: string, table: string, maxQueued: number, n: number) => {
      const check = new ClickHouseAuditSink({ url: ch.url, table });
      await check.init();
      const p = await createAuditPipeline({
        clickhouse: { url: ch.url, table },
        spillDir: mkdtempSync(join(spillDir, 'run-')),
        batchSize: BATCH,
        maxQueued,
        flushIntervalMs: 200,
        logger: { info() {}, warn() {}, error: (o, m) => console.error(m, o) },
      });
      let emitNs = 0n;
      const t0 = performance.now();
      // Emit in slices of one batch, yielding between slices as a busy ID path would.
      for (let i = 0; i < n; i += BATCH) {
        const e0 = process.hrtime.bigint();
        for (let k = i; k < Math.min(n, i + BATCH); k++) p.emit(events[k]!);
        emitNs += process.hrtime.bigint() - e0;
        await new Promise((r) => setImmediate(r));
      }
      await p.settled();
      const s = (performance.now() - t0) / 1000;
      const st = p.stats();
      const rows = await check.countDistinct();
      console.log(
        `${label.padEnd(15)} ${(n / s).toFixed(0).padStart(8)} rows/s  (${s.toFixed(2)} s from the first emit to all rows in ClickHouse; emit ${(Number(emitNs) / n).toFixed(0)} ns/event on the caller; inserted ${st.inserted}, spilled ${st.spilled}, replayed ${st.replayed}, dropped ${st.dropped}; ${rows} distinct rows in the table)`,
      );
      await p.close();
      await check.close();
    };
    await run('pipeline:', 'bench_pipeline', ROWS, ROWS);
    // 3. The same with a 10,000-event channel: most events overflow to the spill synchronously
    //    (the emit cost of that path), then are replayed.
    await run('with overflow:', 'bench_overflow', 10_000, Math.min(ROWS, 200_000));
  } finally {
    await ch.stop();
    rmSync(spillDir, { recursive: true, force: true });
  }
}

await main();
