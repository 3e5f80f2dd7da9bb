// FS-22 end to end, real processes on 127.0.0.1: `floe cluster remove <leader-id>` (the CLI follows the old leader's
// 307 to the voter it handed leadership to, which removes the old leader as a follower), then kill -9 of the removed
// machine the moment the CLI exits. The voters left must lead without it and serve writes.
import { execFile } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { Cluster, type ClusterView, floeBin, http, until, waitForLeader } from './harness.js';

const clusters: Cluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) {
    await c.stopAll();
    c.cleanup();
  }
});

function floe(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [floeBin, ...args], { timeout: 30_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('floe cluster remove <leader> (FS-22, real processes)', () => {
  for (const [size, via] of [
    [2, 'leader'],
    [3, 'leader'],
    [3, 'follower'],
  ] as const) {
    it(`${size} voters, asked via the ${via}: the CLI ends with the leader removed; kill -9 of it at once leaves a leader that serves writes`, async () => {
      const c = await Cluster.create({ size });
      clusters.push(c);
      c.startAll();
      const old = await waitForLeader(c);
      // Every member has published its HTTP address (the 307 needs the new leader's).
      await until('addresses published', async () => {
        const r = await http<ClusterView>(c.node(old).http, 'GET', '/v1/cluster', undefined, 1000);
        return r.status === 200 && r.body.members.every((m) => m.httpAddr) ? true : undefined;
      });
      expect((await http(c.node(old).http, 'PUT', '/v1/kv/before', { value: 'x' })).status).toBe(200);
      const endpoint = via === 'leader' ? c.node(old).http : c.nodes.find((n) => n.spec.id !== old)!.http;
      const r = await floe('cluster', 'remove', String(old), '--endpoint', endpoint);
      // Switched off as soon as the command returns: whatever it had not sent is lost.
      await c.node(old).kill9();
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      // It printed the new leader's view: the old leader is no longer a member.
      expect(r.stdout).toMatch(/^leader \d+ /);
      expect(r.stdout).not.toMatch(new RegExp(`^leader ${old} `));
      expect(r.stdout).not.toMatch(new RegExp(`\\n${old} +`));
      const rest = c.nodes.filter((n) => n.spec.id !== old);
      const leader = await until(
        'a leader of the voters left',
        async () => {
          for (const n of rest) {
            const v = await http<ClusterView>(n.http, 'GET', '/v1/cluster', undefined, 1000);
            if (v.status === 200 && v.body.role === 'leader' && !v.body.members.some((m) => m.id === old))
              return n;
          }
          return undefined;
        },
        15_000,
      );
      const w = await http(leader.http, 'PUT', '/v1/kv/after', { value: 'y' }, 5_000);
      expect(w.status).toBe(200);
    }, 60_000);
  }
});
