import { Command } from 'commander';
import { ClickHouseAuditSink } from '../../audit/clickhouse-sink.js';
import { type AuditedHolder, earlierHolderFromAudit } from '../../audit/whois-history.js';
import type { WhoisAnswer } from '../../lease/whois.js';
import { type Conn, call } from '../admin-http.js';
import type { CliIO } from '../io.js';
import { UsageError } from '../io.js';

/** `floe whois <id>`: decode an ID and ask the cluster which lease issued it (docs/whois.md). */
export function whoisCommand(io: CliIO): Command {
  return new Command('whois')
    .description('who issued this ID: app, holder, token and time window (from the lease state)')
    .argument('<id>', 'the ID, decimal or 0x hex')
    .option('--layout <name>', 'its layout: floe, twitter, sonyflake, baidu', 'floe')
    .option('--app <app>', 'the app whose pool it came from (default: every app)')
    .option('--json', 'print the whole answer as JSON')
    .option('--endpoint <host:port>', 'any member’s HTTP address', '127.0.0.1:7380')
    .option('--user <name>', 'authenticate as (default $FLOE_USER)')
    .option('--password <pw>', 'password (default $FLOE_PASSWORD)')
    .option(
      '--audit-clickhouse <url>',
      'the audit trail: name earlier holders the lease state no longer keeps',
    )
    .option('--audit-user <user>', 'ClickHouse user')
    .option('--audit-password <pw>', 'ClickHouse password (default $FLOE_AUDIT_PASSWORD)')
    .option('--audit-database <db>', 'ClickHouse database (default default)')
    .action(async (id: string, o: Conn & WhoisFlags) => {
      if (!/^(?:\d{1,20}|0x[0-9a-fA-F]{1,16})$/.test(id))
        throw new UsageError(`<id> must be a decimal or 0x-hex integer (got "${id}")`);
      const q = new URLSearchParams({ layout: o.layout, ...(o.app ? { app: o.app } : {}) });
      const a = (await call(io, o, 'GET', `/v1/ids/${encodeURIComponent(id)}?${q}`)) as WhoisAnswer;
      const audited = o.auditClickhouse ? await fromAudit(io, o, a) : new Map<string, AuditedHolder>();
      if (o.json) {
        io.out(`${JSON.stringify({ ...a, audited: Object.fromEntries(audited) }, null, 2)}\n`);
        return;
      }
      io.out(
        `${a.id} (${a.layout}): ${a.time}, datacenter ${a.datacenter}, worker ${a.worker}, sequence ${a.sequence}\n`,
      );
      for (const c of a.candidates) {
        io.out(`  ${c.app} worker ${c.workerId}: ${c.verdict} — ${c.reason}\n`);
        if (c.holder)
          io.out(
            `    holder ${c.holder.nodeId || '(moved on)'}, token ${c.holder.token}, granted ${new Date(c.holder.grantedAtMs).toISOString()}, timestamps (${new Date(c.holder.floorMs).toISOString()}, ${new Date(c.holder.boundMs).toISOString()}]${c.holder.live ? ', live' : ''}\n`,
          );
        const h = audited.get(c.app);
        if (h)
          io.out(
            `    from the audit trail: holder ${h.nodeId}, token ${h.token}${h.grantedAtMs === undefined ? '' : `, granted ${new Date(h.grantedAtMs).toISOString()}`}, ${h.ended} ${new Date(h.endedAtMs).toISOString()} at mark ${new Date(h.highWaterMs).toISOString()}\n`,
          );
        else if (c.verdict === 'earlier' && o.auditClickhouse)
          io.out('    the audit trail has no ended lease of this worker ID at or above that timestamp\n');
      }
      io.out(`${a.summary}\n`);
    });
}

interface WhoisFlags {
  layout: string;
  app?: string;
  json?: boolean;
  auditClickhouse?: string;
  auditUser?: string;
  auditPassword?: string;
  auditDatabase?: string;
}

/** For every candidate the lease state can only call "an earlier holder": the one the audit trail names. */
async function fromAudit(io: CliIO, o: WhoisFlags, a: WhoisAnswer): Promise<Map<string, AuditedHolder>> {
  const sink = new ClickHouseAuditSink({
    url: o.auditClickhouse as string,
    ...(o.auditUser === undefined ? {} : { user: o.auditUser }),
    password: o.auditPassword ?? io.env.FLOE_AUDIT_PASSWORD ?? '',
    ...(o.auditDatabase === undefined ? {} : { database: o.auditDatabase }),
  });
  const out = new Map<string, AuditedHolder>();
  try {
    for (const c of a.candidates) {
      if (c.verdict !== 'earlier') continue;
      const h = await earlierHolderFromAudit(sink, c.app, c.workerId, a.timestampMs);
      if (h) out.set(c.app, h);
    }
  } finally {
    await sink.close();
  }
  return out;
}
