// "Who issued this ID?" for an ID of an earlier holder (issue 12): the lease state keeps a worker ID's last holder
// only; with the audit trail (a real ClickHouse 18.16, written by a real node) `floe whois --audit-clickhouse` names
// the earlier one.
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { FloeClient } from '../../src/client/index.js';
import { auditClickHouse, haveClickHouse } from './clickhouse-audit.js';
import { floeBin, until } from './harness.js';
import { startCluster } from './lease-cluster.js';

const floe = (...args: string[]) =>
  new Promise<{ code: number; out: string; err: string }>((resolve) => {
    execFile(process.execPath, [floeBin, ...args], { timeout: 20_000 }, (e, out, err) =>
      resolve({
        code: e ? (typeof e.code === 'number' ? e.code : 1) : 0,
        out: String(out),
        err: String(err),
      }),
    );
  });

describe.skipIf(!haveClickHouse)('whois from the audit trail', () => {
  const t = auditClickHouse('whois-audit');

  it('names an earlier holder of the worker ID that the lease state no longer keeps', {
    timeout: 90_000,
  }, async () => {
    const { sink, ch } = t;
    const { cluster } = await startCluster(1, ['--audit-clickhouse', ch.url]);
    t.cluster = cluster;
    const ep = cluster.nodes[0]!.http;
    const client = new FloeClient({ endpoints: [ep] });
    const first = await client.leaseWorker({ app: 'who', nodeId: 'billing-1', ttlMs: 10_000 });
    const old = first.snowflake().next();
    await first.release();
    // The same instance comes back: its worker ID again, under a new token (a new lease).
    const second = await client.leaseWorker({ app: 'who', nodeId: 'billing-1', ttlMs: 10_000 });
    expect(second.workerId).toBe(first.workerId);
    expect(second.token).not.toBe(first.token);
    second.snowflake().next();
    // The release is in the trail once the node's batch went out (every second).
    await until(
      'the release in ClickHouse',
      async () =>
        (await sink.countDistinct(`app = 'who' AND type = 'lease_released'`)) > 0n ? true : undefined,
      20_000,
      200,
    );
    const plain = await floe('whois', String(old), '--app', 'who', '--endpoint', ep);
    expect(plain.out).toMatch(/earlier/);
    expect(plain.out).not.toMatch(new RegExp(`token ${first.token}\\b`));
    const r = await floe(
      'whois',
      String(old),
      '--app',
      'who',
      '--endpoint',
      ep,
      '--audit-clickhouse',
      ch.url,
    );
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(
      new RegExp(`from the audit trail: holder billing-1, token ${first.token}, granted .*, released`),
    );
    await second.release();
  });
});
