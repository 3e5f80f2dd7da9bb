// Strict sequences served from the Raft leader lease (`floe serve --leader-lease`, decision 0009) on a real 3-node
// cluster: INCR under load across kill -9 and SIGSTOP of the leader, with a pipeline sent to the stopped leader that
// it reads when it resumes — before its tick timer has caught up, the case the lease must not be trusted in. The
// history is checked by src/check (strictly increasing in real time, unique), as for ReadIndex rounds.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkHistory, checkUniqueIds, increasingIdModel } from '../../src/check/index.js';
import type { Cluster } from './harness.js';
import { incrAcrossFailovers } from './incr-failover.js';
import { redisCli, startCluster } from './lease-cluster.js';

let cluster: Cluster;
let leader: number;

beforeAll(async () => {
  ({ cluster, leader } = await startCluster(3, ['--leader-lease']));
});

afterAll(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
});

describe('--leader-lease: INCR under load across kill -9 and SIGSTOP of the leader (ioredis)', () => {
  it('values strictly increase in real time and never repeat, with no ReadIndex round per batch', async () => {
    const r = await incrAcrossFailovers(cluster, leader);
    leader = r.leader;
    expect(checkUniqueIds(r.history, { mode: 'increasing' }).result).toBe('ok');
    expect(checkHistory(increasingIdModel(), r.history, { timeoutMs: 60_000 }).result).toBe('ok');
    expect(r.served).toBeGreaterThanOrEqual(1600);
    expect(r.servedBy.size).toBeGreaterThanOrEqual(2);
    // The leader served from its lease: its sequence metrics count values with (almost) no rounds.
    const metrics = await fetch(`http://${cluster.node(leader).http}/metrics`).then((x) => x.text());
    expect(metrics).toMatch(/floe_sequence_lease_answers_total [1-9]/);
  }, 120_000);

  it('a single INCR on the leader is answered (the lease holds on an idle cluster)', async () => {
    const port = cluster.node(leader).spec.respPort;
    const v = (await redisCli(['-p', String(port), 'INCR', 'load'])).stdout.trim();
    expect(v).toMatch(/^\d+$/);
  });
});
