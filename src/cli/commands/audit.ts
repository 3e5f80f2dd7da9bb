import { existsSync, statSync } from 'node:fs';
import { Command } from 'commander';
import { ClickHouseAuditSink } from '../../audit/clickhouse-sink.js';
import { corruptionMessage, insertSpillContent } from '../../audit/replay.js';
import { SpillStore } from '../../audit/spill.js';
import type { CliIO } from '../io.js';
import { CommandFailedError, parseIntOption, UsageError } from '../io.js';

interface ChOptions {
  user?: string;
  password?: string;
  database?: string;
  table?: string;
}

function sinkFor(io: CliIO, url: string, o: ChOptions): ClickHouseAuditSink {
  try {
    return new ClickHouseAuditSink({
      url,
      user: o.user ?? io.env.FLOE_AUDIT_CLICKHOUSE_USER,
      password: o.password ?? io.env.FLOE_AUDIT_CLICKHOUSE_PASSWORD,
      database: o.database,
      table: o.table,
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

const chOptions = (c: Command) =>
  c
    .option('--user <name>', 'ClickHouse user (default $FLOE_AUDIT_CLICKHOUSE_USER, else "default")')
    .option('--password <pw>', 'ClickHouse password (default $FLOE_AUDIT_CLICKHOUSE_PASSWORD, else empty)')
    .option('--database <db>', 'database', 'default')
    .option('--table <name>', 'table', 'floe_audit_events');

const reach = (url: string, err: unknown) =>
  new CommandFailedError(`ClickHouse at ${url}: ${err instanceof Error ? err.message : String(err)}`);

/** `floe audit init|replay`: the audit trail's ClickHouse schema and shipping of spill files (docs/audit.md). */
export function auditCommand(io: CliIO): Command {
  const audit = new Command('audit').description(
    'audit trail: ClickHouse schema, ship spilled/embedded audit files',
  );

  chOptions(
    audit
      .command('init')
      .description('create the audit database and table (ClickHouse 18.16 and later)')
      .requiredOption('--clickhouse <url>', 'ClickHouse HTTP URL, e.g. http://127.0.0.1:8123'),
  ).action(async (o: ChOptions & { clickhouse: string }) => {
    const sink = sinkFor(io, o.clickhouse, o);
    try {
      const v = await sink.serverVersion().catch((err) => {
        throw reach(o.clickhouse, err);
      });
      const stmts = await sink.init().catch((err) => {
        throw reach(o.clickhouse, err);
      });
      io.out(`ClickHouse ${v.text}: ${sink.qualifiedTable} ready\n`);
      for (const s of stmts) io.out(`${s};\n`);
    } finally {
      await sink.close();
    }
  });

  chOptions(
    audit
      .command('replay')
      .description(
        'insert spill-format audit files (oldest first) into ClickHouse, deleting each once shipped',
      )
      .requiredOption(
        '--dir <dir>',
        'directory of audit-*.spill files (a spill dir or the embedded audit dir)',
      )
      .requiredOption('--to <url>', 'ClickHouse HTTP URL, e.g. http://127.0.0.1:8123')
      .option('--batch-size <n>', 'rows per INSERT', '10000')
      .option(
        '--storage-lock <mode>',
        'kernel (default: refuse where --dir cannot be kernel-locked) or pid-file (opt in to the PID rule there), as for floe serve',
      )
      .option(
        '--take-legacy-lock',
        'take a LOCK left by an older Floe version (or --storage-lock pid-file): only after stopping every such process',
      ),
  ).action(
    async (
      o: ChOptions & {
        dir: string;
        to: string;
        batchSize: string;
        storageLock?: string;
        takeLegacyLock?: boolean;
      },
    ) => {
      const batchSize = parseIntOption('--batch-size', o.batchSize, 1, 1_000_000);
      if (o.storageLock !== undefined && o.storageLock !== 'kernel' && o.storageLock !== 'pid-file')
        throw new UsageError(`--storage-lock must be kernel or pid-file (got "${o.storageLock}")`);
      if (!existsSync(o.dir) || !statSync(o.dir).isDirectory())
        throw new UsageError(`--dir ${o.dir} is not a directory`);
      const sink = sinkFor(io, o.to, o);
      const store = new SpillStore({
        dir: o.dir,
        ...(o.storageLock === 'pid-file' ? { unsupportedLock: 'pid-file' as const } : {}),
        ...(o.takeLegacyLock ? { takeLegacyLock: true } : {}),
        onWarning: (m) => io.err(`floe: warning: ${m}\n`),
      });
      try {
        await sink.serverVersion().catch((err) => {
          throw reach(o.to, err);
        });
        // Takes the directory's lock: refused while a live pipeline writes there.
        await store.open().catch((err) => {
          throw new CommandFailedError(`${o.dir}: ${(err as Error).message}`);
        });
        let rows = 0;
        const refused: string[] = [];
        for (const file of store.pendingFiles()) {
          const content = await store.read(file);
          const r = await insertSpillContent(sink, content, batchSize).catch((err) => {
            throw reach(o.to, err);
          });
          rows += r.rows;
          if (r.corruption) {
            const to = await store.quarantine(file);
            const msg = corruptionMessage(r.corruption, to);
            refused.push(msg);
            io.err(`floe: error: ${msg}\n`);
          } else {
            await store.remove(file);
            io.out(`${file}: ${r.rows} rows shipped, file deleted\n`);
          }
        }
        io.out(`${rows} rows shipped to ${sink.qualifiedTable} at ${o.to}\n`);
        if (refused.length > 0)
          throw new CommandFailedError(
            `${refused.length} corrupt file(s) refused (see above); the rest was shipped`,
          );
      } finally {
        await store.close();
        await sink.close();
      }
    },
  );

  return audit;
}
