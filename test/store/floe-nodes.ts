import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterNode, freePorts } from '../cluster/harness.js';

/**
 * Independent `floe serve` processes (from dist/), each its own single-member Raft, sharing one lease
 * store: `--store etcd` (the etcd store's election picks the active node) or the default raft store.
 */
export class FloeNodes {
  readonly nodes: ClusterNode[] = [];
  private constructor(readonly root: string) {}

  static async create(count: number, storeArgs: string[]): Promise<FloeNodes> {
    const f = new FloeNodes(mkdtempSync(join(tmpdir(), 'floe-store-')));
    const ports = await freePorts(count * 3);
    for (let i = 0; i < count; i++) {
      const spec = {
        id: i + 1,
        peerPort: ports[i * 3]!,
        httpPort: ports[i * 3 + 1]!,
        respPort: ports[i * 3 + 2]!,
        advertisedPeerPort: ports[i * 3]!,
      };
      const dataDir = join(f.root, `node-${spec.id}`);
      const args = () => [
        '--node-id',
        String(spec.id),
        '--data-dir',
        dataDir,
        '--peer-addr',
        `127.0.0.1:${spec.peerPort}`,
        '--http-addr',
        `127.0.0.1:${spec.httpPort}`,
        '--resp-addr',
        `127.0.0.1:${spec.respPort}`,
        '--initial-cluster',
        `${spec.id}=127.0.0.1:${spec.peerPort}`,
        ...storeArgs,
      ];
      f.nodes.push(new ClusterNode(spec, dataDir, args, join(f.root, `node-${spec.id}.log`)));
    }
    return f;
  }

  /** The node answering lease calls itself (2xx/4xx, not 307/503) for a probe read, or undefined. */
  async active(): Promise<ClusterNode | undefined> {
    for (const n of this.nodes) {
      if (!n.running) continue;
      try {
        const res = await fetch(`http://${n.http}/v1/apps/probe/workers`, {
          redirect: 'manual',
          signal: AbortSignal.timeout(2000),
        });
        await res.text();
        if (res.status === 200) return n;
      } catch {}
    }
    return undefined;
  }

  async waitActive(timeoutMs = 30_000, except?: ClusterNode): Promise<ClusterNode> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const a = await this.active();
      if (a && a !== except) return a;
      if (Date.now() > until) throw new Error(`no active Floe node within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Resolves once the node's HTTP listener answers (any status). */
  async waitListening(n: ClusterNode, timeoutMs = 30_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      try {
        const res = await fetch(`http://${n.http}/healthz`, { signal: AbortSignal.timeout(2000) });
        await res.text();
        return;
      } catch {
        if (Date.now() > until) throw new Error(`node ${n.spec.id} not listening within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /**
   * Resolves once the node serves lease calls, itself or by redirecting to the active node: a standby that has not
   * yet read who is active answers 503 not_leader (seen in CI right after start).
   */
  async waitServingLeases(n: ClusterNode, timeoutMs = 30_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      try {
        const res = await fetch(`http://${n.http}/v1/apps/readiness-probe/workers`, {
          signal: AbortSignal.timeout(2000),
        });
        await res.text();
        if (res.status !== 503) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > until)
        throw new Error(`node ${n.spec.id} does not serve lease calls within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.nodes.map(async (n) => {
        if (!n.running) return;
        n.signal('SIGCONT');
        await n.kill9();
      }),
    );
  }

  cleanup(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}
