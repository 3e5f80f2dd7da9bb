// "Who issued this ID?" on a real cluster: an SDK client leases and generates; `floe whois` and
// GET /v1/ids/{id} name its lease; an ID Floe could never have issued is called so plainly.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FloeClient } from '../../src/client/index.js';
import { compose, PRESETS } from '../../src/id/index.js';
import { type Cluster, floeBin, http } from './harness.js';
import { startCluster } from './lease-cluster.js';

let cluster: Cluster;

beforeAll(async () => {
  ({ cluster } = await startCluster(3));
});

afterAll(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
});

const floe = (...args: string[]) =>
  new Promise<{ code: number; out: string; err: string }>((resolve) => {
    execFile(process.execPath, [floeBin, ...args], { timeout: 15_000 }, (e, out, err) =>
      resolve({
        code: e ? (typeof e.code === 'number' ? e.code : 1) : 0,
        out: String(out),
        err: String(err),
      }),
    );
  });

describe('whois', () => {
  it('names the lease that issued an ID, and says plainly when Floe could not have issued one', async () => {
    const endpoints = cluster.nodes.map((n) => n.http);
    const client = new FloeClient({ endpoints });
    const lease = await client.leaseWorker({ app: 'who', nodeId: 'billing-7', ttlMs: 10_000 });
    const id = lease.snowflake('floe').next();
    const ep = cluster.nodes[1]!.http;

    const r = await floe('whois', String(id), '--app', 'who', '--endpoint', ep);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`worker ${lease.workerId}: holder`);
    expect(r.out).toMatch(new RegExp(`holder billing-7, token ${lease.token}, granted .*, live`));

    const json = await http<{ candidates: { verdict: string; holder?: { nodeId: string } }[] }>(
      ep,
      'GET',
      `/v1/ids/${id}?layout=floe`,
    );
    expect(json.status).toBe(200);
    expect(json.body.candidates.find((c) => c.verdict === 'holder')?.holder?.nodeId).toBe('billing-7');

    // Worker 9 of this app was never leased; and a timestamp an hour ahead is above every bound.
    const never = compose({ timestamp: Date.now(), worker: 9, sequence: 0 }, PRESETS.floe);
    const n = await floe('whois', String(never), '--app', 'who', '--endpoint', ep);
    expect(n.out).toMatch(/worker ID 9 of app who was never leased/);
    expect(n.out).toMatch(/^Floe could not have issued/m);
    const ahead = compose(
      { timestamp: Date.now() + 3_600_000, worker: lease.workerId, sequence: 0 },
      PRESETS.floe,
    );
    expect((await floe('whois', String(ahead), '--app', 'who', '--endpoint', ep)).out).toMatch(
      /above every bound the cluster granted .* in the future/,
    );
    expect(await http(ep, 'GET', '/v1/ids/12abc')).toMatchObject({ status: 400 });
    expect((await floe('whois', 'nope')).code).toBe(2);
    await lease.release();
  });
});
