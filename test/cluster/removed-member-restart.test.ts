// FS-23 end to end, real processes on 127.0.0.1: a member is removed while its process is down (kill -9), then
// started again from its data dir, which holds no removal. It used to come back as a voter of the old configuration
// and linger for ever as a pre-candidate; now the members that applied the removal tell it so in the peer handshake
// (the removal verdict, decision 0008) and it exits by itself.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Cluster, type ClusterView, http, waitForLeader } from './harness.js';

const clusters: Cluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) {
    await c.stopAll();
    c.cleanup();
  }
});

describe('a member removed while down (FS-23, real processes)', () => {
  it('FS-23: restarted from its data dir, the removed member is told by a member and exits by itself', async () => {
    const c = await Cluster.create({ size: 3 });
    clusters.push(c);
    c.startAll();
    const leader = await waitForLeader(c);
    expect((await http(c.node(leader).http, 'PUT', '/v1/kv/before', { value: 'x' })).status).toBe(200);
    const gone = c.nodes.find((n) => n.spec.id !== leader)!;
    await gone.kill9();
    // Both voters left answer the leader: the strict check lets the removal of the dead one through.
    const r = await http(c.node(leader).http, 'DELETE', `/v1/members/${gone.spec.id}`, undefined, 10_000);
    expect(r.status).toBe(200);
    const view = await http<ClusterView & { removed: { id: number; removedAt: number }[] }>(
      c.node(leader).http,
      'GET',
      '/v1/cluster',
    );
    const removedAt = view.body.removed.find((x) => x.id === gone.spec.id)?.removedAt;
    expect(removedAt).toBeGreaterThan(0);

    gone.start();
    const exited = once(gone.proc!, 'exit') as Promise<[number | null]>;
    // A bound, not a wait: the process exits on its own as soon as a member tells it (redials back off to 2 s).
    let bound: NodeJS.Timeout | undefined;
    const logOf = () => readFileSync(join(c.root, `node-${gone.spec.id}.log`), 'utf8');
    const [code] = await Promise.race([
      exited,
      new Promise<never>((_, reject) => {
        bound = setTimeout(() => {
          const tail = logOf()
            .split('\n')
            .filter((l) => /"level":[45]0/.test(l))
            .slice(-10)
            .join('\n');
          reject(new Error(`the removed member still runs after 20 s; its last warnings:\n${tail}`));
        }, 20_000);
      }),
    ]).finally(() => clearTimeout(bound));
    expect(code).toBe(0);
    const log = logOf();
    expect(log).toMatch(
      new RegExp(`removed from the cluster \\(told by node \\d: removal at index ${removedAt}\\)`),
    );
    expect(log).toContain('a peer proved that this node was removed from the cluster');
    // The rest serve writes without it.
    expect((await http(c.node(leader).http, 'PUT', '/v1/kv/after', { value: 'y' }, 5_000)).status).toBe(200);
  }, 60_000);
});
