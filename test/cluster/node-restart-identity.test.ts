// Issue 9 item 1 with real processes: a proposal must be answered with its own entry's result,
// never with the result of an entry a previous incarnation of the same node proposed.
import { afterEach, describe, expect, it } from 'vitest';
import { Cluster, type HttpResult, http, until, waitForLeader } from './harness.js';

let cluster: Cluster | undefined;

afterEach(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
  cluster = undefined;
});

/** PUT until the node answers 200 (it is starting: connection refused or no leader yet). */
async function put(addr: string, key: string, value: string): Promise<HttpResult<{ value?: string }>> {
  return until(`PUT ${key}=${value} on ${addr}`, async () => {
    const r = await http<{ value?: string }>(addr, 'PUT', `/v1/kv/${key}`, { value }, 3000);
    return r.status === 200 ? r : undefined;
  });
}

describe('proposal identity across restarts (real processes)', () => {
  it('put after restart is answered with its own value, not a previous incarnation’s', async () => {
    cluster = await Cluster.create({ size: 1 });
    const node = cluster.nodes[0]!;
    node.start();
    await waitForLeader(cluster);
    // Several incarnations, each killed with SIGKILL (odd rounds) or stopped gracefully (even
    // rounds), so the replay of the previous log races the first proposals of the new process.
    for (let round = 1; round <= 4; round++) {
      const old = `OLD-${round}`;
      expect((await put(node.http, 'k', old)).body.value).toBe(old);
      if (round % 2 === 1) await node.kill9();
      else expect(await node.stopGracefully()).toBe(0);
      node.start();
      const fresh = `NEW-${round}`;
      const r = await put(node.http, 'k', fresh);
      expect(r.body.value).toBe(fresh);
      const read = await http<{ value?: string }>(node.http, 'GET', '/v1/kv/k');
      expect(read.body.value).toBe(fresh);
    }
  }, 120_000);
});
