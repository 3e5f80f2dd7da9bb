import { Command } from 'commander';
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
    .action(async (id: string, o: Conn & { layout: string; app?: string; json?: boolean }) => {
      if (!/^(?:\d{1,20}|0x[0-9a-fA-F]{1,16})$/.test(id))
        throw new UsageError(`<id> must be a decimal or 0x-hex integer (got "${id}")`);
      const q = new URLSearchParams({ layout: o.layout, ...(o.app ? { app: o.app } : {}) });
      const a = (await call(io, o, 'GET', `/v1/ids/${encodeURIComponent(id)}?${q}`)) as WhoisAnswer;
      if (o.json) {
        io.out(`${JSON.stringify(a, null, 2)}\n`);
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
      }
      io.out(`${a.summary}\n`);
    });
}
