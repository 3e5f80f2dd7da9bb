// Issue 12, "Leader kill -9 while leases churn": with a real ClickHouse 18.16 and a real 3-node cluster writing its
// audit trail there (--audit-clickhouse), every acknowledged lease grant and release appears exactly once (one
// distinct event id, one row after FINAL), across a leader killed with SIGKILL in the middle of the churn.
import { describe, expect, it } from 'vitest';
import { auditClickHouse, haveClickHouse } from './clickhouse-audit.js';
import { http, until } from './harness.js';
import { leaderKnownEverywhere, startCluster } from './lease-cluster.js';

interface Grant {
  workerId: number;
  token: number;
  nodeId: string;
}

describe.skipIf(!haveClickHouse)(
  'audit trail across a leader kill -9 (real ClickHouse, real cluster)',
  () => {
    const t = auditClickHouse('audit-leader-kill');

    it('every acknowledged grant and release is written exactly once', { timeout: 180_000 }, async () => {
      const { sink } = t;
      const started = await startCluster(3, ['--audit-clickhouse', t.ch.url]);
      t.cluster = started.cluster;
      const c = started.cluster;
      const app = 'audited';
      const grants: Grant[] = [];
      const releases: Grant[] = [];
      let seq = 0;
      // One churn step against whoever leads now: acquire, then release what was acquired. Only acknowledged
      // operations are recorded (an unknown outcome may or may not have produced an event).
      const churn = async (rounds: number) => {
        for (let i = 0; i < rounds; i++) {
          const leader = await leaderKnownEverywhere(c, 20_000);
          const addr = c.node(leader).http;
          const nodeId = `holder-${seq++}`;
          const a = await http<Grant & { ok?: boolean }>(addr, 'POST', `/v1/apps/${app}/workers/acquire`, {
            nodeId,
            ttlMs: 60_000,
            requestId: `rq-${nodeId}`,
            incarnation: 'audit-test',
          });
          if (a.status !== 200) continue;
          grants.push({ workerId: a.body.workerId, token: a.body.token, nodeId });
          const r = await http(addr, 'POST', `/v1/apps/${app}/workers/${a.body.workerId}/release`, {
            token: a.body.token,
          });
          if (r.status === 200) releases.push({ workerId: a.body.workerId, token: a.body.token, nodeId });
        }
      };
      await churn(40);
      // Kill the leader without warning while its audit channel may still hold events, then go on.
      const first = await leaderKnownEverywhere(c);
      await c.node(first).kill9();
      await churn(40);
      c.node(first).start();
      await leaderKnownEverywhere(c, 30_000);
      await churn(20);
      expect(grants.length).toBeGreaterThanOrEqual(80);

      const key = (type: string, g: Grant) => `${type} ${g.workerId} ${g.token}`;
      const want = new Set([
        ...grants.map((g) => key('lease_acquired', g)),
        ...releases.map((g) => key('lease_released', g)),
      ]);
      // Batches go out every second; a new leader re-emits what it applied. Wait until every expected event is there.
      const rows = await until(
        'every acknowledged grant and release in ClickHouse',
        async () => {
          const r = await sink.query<{ type: string; worker_id: number; token: string; n: string }>(
            `SELECT type, worker_id, toString(token) AS token, toString(count(DISTINCT event_id)) AS n
           FROM floe_audit_events WHERE app = 'audited' GROUP BY type, worker_id, token`,
          );
          const seen = new Set(r.map((x) => `${x.type} ${x.worker_id} ${x.token}`));
          return [...want].every((k) => seen.has(k)) ? r : undefined;
        },
        60_000,
        250,
      );
      // Exactly once: one distinct event per (type, worker, token) that was acknowledged ...
      for (const r of rows) {
        if (want.has(`${r.type} ${r.worker_id} ${r.token}`))
          expect(r, JSON.stringify(r)).toMatchObject({ n: '1' });
      }
      // ... and no event id counted twice after the table's deduplication (FINAL), whatever was re-emitted.
      const distinct = await sink.countDistinct(`app = 'audited'`);
      const final = await sink.countFinal(`app = 'audited'`);
      expect(final).toBe(distinct);
      // A re-emitted event has the same content as the first copy: one distinct row per event id.
      const conflicting = await sink.query<{ event_id: string }>(
        `SELECT event_id FROM floe_audit_events WHERE app = 'audited'
       GROUP BY event_id HAVING uniqExact(type, worker_id, token, node_id, ts_ms) > 1`,
      );
      expect(conflicting).toEqual([]);
    });
  },
);
