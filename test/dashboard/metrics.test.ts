// /metrics of real `floe serve` processes: names, labels and values after real traffic (RESP through
// ioredis, HTTP leases and sequences), and no doubled prefix. Needs `npm run build` first.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, http, until } from '../cluster/harness.js';
import { startCluster } from '../cluster/lease-cluster.js';

let cluster: Cluster;
let leader: number;

/** Parsed exposition: one entry per sample line, `name{labels}` → value. */
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

async function scrape(id: number): Promise<{ text: string; samples: Map<string, number> }> {
  const r = await http<string>(cluster.node(id).http, 'GET', '/metrics');
  expect(r.status).toBe(200);
  return { text: r.body, samples: parse(r.body) };
}

beforeAll(async () => {
  ({ cluster, leader } = await startCluster(3));
});

afterAll(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
});

describe('/metrics on a real node', () => {
  it('exports process metrics once prefixed, Raft, transport, leases, sequences, RESP and HTTP per route', async () => {
    const l = cluster.node(leader);
    // Leases: acquire, renew with a bound (logged), release: one of each event for app "metrics-app".
    const a = await http<{ workerId: number; token: number }>(
      l.http,
      'POST',
      '/v1/apps/metrics-app/workers/acquire',
      { nodeId: 'n1', ttlMs: 5000 },
    );
    expect(a.status).toBe(200);
    const { workerId, token } = a.body;
    const renew = await http(l.http, 'POST', `/v1/apps/metrics-app/workers/${workerId}/renew`, {
      token,
      boundMs: Date.now() + 60_000,
    });
    expect(renew.status).toBe(200);
    const b = await http<{ workerId: number }>(l.http, 'POST', '/v1/apps/metrics-app/workers/acquire', {
      nodeId: 'n2',
      ttlMs: 5000,
    });
    expect(b.status).toBe(200);
    const rel = await http(l.http, 'POST', `/v1/apps/metrics-app/workers/${workerId}/release`, { token });
    expect(rel.status).toBe(200);
    // Sequences over HTTP, then over RESP.
    expect((await http(l.http, 'POST', '/v1/sequences', { key: 'm-seq', step: 10 })).status).toBe(201);
    const redis = new Redis({ port: l.spec.respPort, host: '127.0.0.1', lazyConnect: true });
    await redis.connect();
    try {
      for (let i = 0; i < 25; i++) await redis.incr('m-seq');
      await redis.ping();
      await expect(redis.call('SEQ.INFO')).rejects.toThrow(); // wrong arity: an error reply, no handler run
    } finally {
      redis.disconnect();
    }
    // An unknown URL must not become a label of its own.
    expect((await http(l.http, 'GET', '/no/such/path/123')).status).toBe(404);

    const { text, samples } = await scrape(leader);
    const get = (k: string) => samples.get(k);

    // Process and runtime metrics: one prefix (the bug was floe_process_process_cpu_seconds_total).
    expect(text).not.toContain('floe_process_process_');
    expect(get('floe_process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(get('floe_process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(text).toMatch(/^floe_nodejs_eventloop_lag_seconds /m);

    // Raft.
    expect(get('floe_raft_is_leader')).toBe(1);
    expect(get('floe_raft_leader_id')).toBe(leader);
    expect(get('floe_raft_members')).toBe(3);
    expect(get('floe_raft_proposals_total')).toBeGreaterThan(0);
    expect(get('floe_raft_commit_duration_seconds_count')).toBeGreaterThan(0);
    expect(get('floe_raft_commit_duration_seconds_bucket{le="+Inf"}')).toBe(
      get('floe_raft_commit_duration_seconds_count'),
    );
    expect(get('floe_storage_fsync_duration_seconds_count')).toBeGreaterThan(0);
    expect(samples.has('floe_raft_snapshots_total')).toBe(true);
    expect(get('floe_raft_leader_changes_total')).toBeGreaterThanOrEqual(1);

    // Transport: one series per peer.
    const peers = [1, 2, 3].filter((x) => x !== leader);
    for (const p of peers) {
      expect(get(`floe_transport_queue_messages{peer="${p}"}`)).toBeGreaterThanOrEqual(0);
      expect(get(`floe_transport_dropped_messages_total{peer="${p}"}`)).toBeGreaterThanOrEqual(0);
      expect(get(`floe_transport_peer_connected{peer="${p}"}`)).toBe(1);
      expect(get(`floe_transport_sent_messages_total{peer="${p}"}`)).toBeGreaterThan(0);
    }

    // Leases per app.
    expect(get('floe_leases_held{app="metrics-app"}')).toBe(1);
    expect(get('floe_lease_pool_size{app="metrics-app"}')).toBeGreaterThan(1);
    expect(get('floe_lease_events_total{app="metrics-app",event="acquired"}')).toBe(2);
    expect(get('floe_lease_events_total{app="metrics-app",event="renewed"}')).toBe(1);
    expect(get('floe_lease_events_total{app="metrics-app",event="released"}')).toBe(1);
    expect(samples.has('floe_lease_renewals_total{kind="local"}')).toBe(true);

    // Sequences and IDs.
    expect(get('floe_sequences')).toBe(1);
    expect(get('floe_sequence_segments_allocated_total')).toBeGreaterThanOrEqual(3);
    expect(get('floe_sequence_values_allocated_total')).toBeGreaterThanOrEqual(25);
    expect(get('floe_ids_issued_total{kind="sequence"}')).toBe(25);
    expect(get('floe_ids_issued_total{kind="snowflake"}')).toBe(0);

    // RESP per command.
    expect(get('floe_resp_commands_total{command="incr",result="ok"}')).toBe(25);
    expect(get('floe_resp_command_duration_seconds_count{command="incr"}')).toBe(25);
    expect(get('floe_resp_commands_total{command="ping",result="ok"}')).toBe(1);
    expect(get('floe_resp_error_replies_total')).toBeGreaterThanOrEqual(1);
    expect(get('floe_resp_connected_clients')).toBeGreaterThanOrEqual(0);

    // HTTP per route pattern, never the raw URL.
    expect(
      get('floe_http_requests_total{method="POST",route="/v1/apps/:app/workers/acquire",status="200"}'),
    ).toBe(2);
    expect(
      get(
        'floe_http_request_duration_seconds_count{method="POST",route="/v1/apps/:app/workers/:workerId/renew"}',
      ),
    ).toBe(1);
    expect(get('floe_http_requests_total{method="GET",route="unmatched",status="404"}')).toBe(1);
    expect(text).not.toContain('metrics-app/workers');
    expect(text).not.toContain('/no/such/path');

    // Audit (embedded files by default).
    expect(samples.has('floe_audit_queue_events')).toBe(true);
    expect(samples.has('floe_audit_spill_bytes')).toBe(true);
  });

  it('followers count the applied lease events too, and report no leadership', async () => {
    const f = [1, 2, 3].find((x) => x !== leader)!;
    const samples = await until('the follower to apply the lease events', async () => {
      const { samples } = await scrape(f);
      return samples.get('floe_lease_events_total{app="metrics-app",event="released"}') === 1
        ? samples
        : undefined;
    });
    expect(samples.get('floe_raft_is_leader')).toBe(0);
    expect(samples.get('floe_raft_leader_id')).toBe(leader);
    expect(samples.get('floe_lease_events_total{app="metrics-app",event="acquired"}')).toBe(2);
  });
});
