/**
 * `floe audit init` and `floe audit replay` (in-process CLI) against a real ClickHouse 18.16 started
 * here; skipped, saying so, only when /usr/sbin/clickhouse-server is not installed.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCaptured } from '../cli/run-captured.js';
import { type ClickHouseProcess, clickhouseServerAvailable, startClickHouse } from './clickhouse-process.js';
import { ClickHouseAuditSink } from './clickhouse-sink.js';
import { createAuditPipeline } from './pipeline.js';
import { listSpillFiles, SpillStore } from './spill.js';

const run = (...argv: string[]) => runCaptured(argv);

describe('floe audit (usage errors, no server needed)', () => {
  it('refuses a bad URL, database name or batch size with exit code 2', async () => {
    const a = await run('audit', 'init', '--clickhouse', 'not a url');
    expect(a.code).toBe(2);
    expect(a.stderr).toMatch(/ClickHouse URL must look like http:\/\/host:8123/);
    const b = await run('audit', 'init', '--clickhouse', 'http://127.0.0.1:1', '--database', 'x;drop');
    expect(b.code).toBe(2);
    expect(b.stderr).toMatch(/database must match/);
    const c = await run(
      'audit',
      'replay',
      '--dir',
      '/tmp',
      '--to',
      'http://127.0.0.1:1',
      '--batch-size',
      '0',
    );
    expect(c.code).toBe(2);
    expect(c.stderr).toMatch(/--batch-size must be an integer in \[1, 1000000\]/);
    const d = await run('audit', 'replay', '--dir', '/nonexistent-floe-audit', '--to', 'http://127.0.0.1:1');
    expect(d.code).toBe(2);
    expect(d.stderr).toMatch(/--dir \/nonexistent-floe-audit is not a directory/);
  });

  it('replay takes --storage-lock kernel|pid-file like floe serve (lock review: the flag was missing)', async () => {
    const e = await run(
      'audit',
      'replay',
      '--dir',
      '/tmp',
      '--to',
      'http://127.0.0.1:1',
      '--storage-lock',
      'none',
    );
    expect(e.code).toBe(2);
    expect(e.stderr).toMatch(/--storage-lock must be kernel or pid-file \(got "none"\)/);
  });
});

const have = clickhouseServerAvailable();
if (!have)
  console.warn('SKIPPED: /usr/sbin/clickhouse-server is not installed (apt-get install clickhouse-server)');

describe.skipIf(!have)('floe audit with a real ClickHouse 18.16', () => {
  let ch: ClickHouseProcess;
  const dirs: string[] = [];
  beforeAll(async () => {
    ch = await startClickHouse();
  }, 60_000);
  afterAll(async () => {
    await ch?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it('init creates the schema; replay ships embedded files, refusing a corrupt one by file and offset', async () => {
    const init = await run('audit', 'init', '--clickhouse', ch.url, '--database', 'audit_db');
    expect(init.stderr).toBe('');
    expect(init.code).toBe(0);
    expect(init.stdout).toMatch(/ClickHouse 18\.16\.\d+: `audit_db`\.`floe_audit_events` ready/);
    expect((await run('audit', 'init', '--clickhouse', ch.url, '--database', 'audit_db')).code).toBe(0); // idempotent

    // The embedded default: no ClickHouse configured, events land in files.
    const dir = mkdtempSync(join(tmpdir(), 'floe-audit-cli-'));
    dirs.push(dir);
    const p = await createAuditPipeline({
      spillDir: dir,
      batchSize: 100,
      spillFileBytes: 80_000,
      logger: { info() {}, warn() {}, error() {} },
    });
    for (let i = 0; i < 1000; i++)
      p.emit({
        type: 'ids_range',
        key: 'orders',
        node: 'n1',
        segment: 0,
        first: i * 10,
        last: i * 10 + 9,
        count: 10,
      });
    // A running pipeline holds the directory: replay is refused, naming the PID.
    const locked = await run('audit', 'replay', '--dir', dir, '--to', ch.url, '--database', 'audit_db');
    expect(locked.code).toBe(1);
    expect(locked.stderr).toMatch(new RegExp(`locked by live process ${process.pid}`));
    await p.close();

    const files = listSpillFiles(dir);
    expect(files.length).toBeGreaterThanOrEqual(3);
    const bad = files[1]!;
    const frames = (await new SpillStore({ dir }).read(bad)).frames;
    const buf = readFileSync(bad);
    buf.write('XXXX', frames[1]!.offset, 'latin1'); // the second frame's magic
    writeFileSync(bad, buf);
    const expected = 1000 - frames.slice(1).reduce((n, f) => n + f.rows, 0);

    const r = await run(
      'audit',
      'replay',
      '--dir',
      dir,
      '--to',
      ch.url,
      '--database',
      'audit_db',
      '--batch-size',
      '250',
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${bad} refused at byte offset ${frames[1]!.offset}: bad frame magic`);
    expect(r.stdout).toContain(`${expected} rows shipped to \`audit_db\`.\`floe_audit_events\``);
    expect(existsSync(`${bad}.corrupt`)).toBe(true);
    expect(listSpillFiles(dir)).toEqual([]);
    const sink = new ClickHouseAuditSink({ url: ch.url, database: 'audit_db' });
    expect(await sink.countDistinct()).toBe(BigInt(expected));
    expect(await sink.countFinal()).toBe(BigInt(expected));
    await sink.close();
  }, 60_000);
});
