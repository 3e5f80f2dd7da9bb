/**
 * The servers of `npm run chaos -- --store etcd` (scripts/chaos.ts): a real 3-member etcd 3.4 (Debian's `etcd`, started
 * on free 127.0.0.1 ports and stopped by PID) and three `floe serve --store etcd` nodes (from dist/) over it, one of
 * them active (docs/etcd-store.md). The clients, their faults and the history checker are chaos.ts's, unchanged.
 *
 * Server faults (ETCD_SERVER_FAULTS), injected in turn with the client faults:
 *  - kill -9 of the active Floe node, restarted 0.5-1.5 s later (as a standby);
 *  - SIGSTOP of the active Floe node: every other one past its etcd session (7-8.5 s > its 6 s TTL: a standby takes
 *    over and the paused node must not serve when it resumes), the others 1.5-2.5 s (it keeps its session);
 *  - kill -9 of an etcd follower, and of the etcd leader, each restarted on its data directory 0.5-2 s later (one
 *    member down at a time: quorum stays).
 */
import { http } from '../test/cluster/harness.js';
import { EtcdCluster } from '../test/store/etcd-cluster.js';
import { FloeNodes } from '../test/store/floe-nodes.js';

export const ETCD_FAULT_CYCLE = [
  'pause-client',
  'kill9-active',
  'kill9-cached-client',
  'replace-client',
  'kill9-etcd-member',
  'pause-client',
  'twin-client',
  'kill9-client',
  'pause-active',
  'kill9-cached-client-two-successors',
  'kill9-etcd-leader',
] as const;

export const ETCD_SERVER_FAULTS: ReadonlySet<string> = new Set([
  'kill9-active',
  'pause-active',
  'kill9-etcd-member',
  'kill9-etcd-leader',
]);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class EtcdChaosServers {
  private longPause = true;
  private constructor(
    readonly etcd: EtcdCluster,
    readonly floe: FloeNodes,
    private readonly log: (s: string) => void,
  ) {}

  /** Starts etcd and the Floe nodes; resolves once one node is active and every node serves lease calls. */
  static async start(log: (s: string) => void): Promise<EtcdChaosServers> {
    const etcd = await EtcdCluster.start(3);
    let floe: FloeNodes | undefined;
    try {
      floe = await FloeNodes.create(3, ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(',')]);
      for (const n of floe.nodes) n.start();
      const active = await floe.waitActive(60_000);
      for (const n of floe.nodes) await floe.waitServingLeases(n, 60_000);
      log(`etcd ${etcd.endpoints.join(',')}; Floe node ${active.spec.id} active`);
      return new EtcdChaosServers(etcd, floe, log);
    } catch (e) {
      await floe?.stop();
      floe?.cleanup();
      etcd.stop();
      throw e;
    }
  }

  /** Every Floe node's HTTP address (a standby answers 307 to the active node; the SDK follows it). */
  get endpoints(): string[] {
    return this.floe.nodes.map((n) => n.http);
  }

  /** PUT the app's pool on the active node, retrying through a failover (30 s). */
  async setupPool(app: string, bits: number): Promise<void> {
    const deadline = performance.now() + 30_000;
    let last = '';
    while (performance.now() < deadline) {
      const active = await this.floe.active();
      if (active) {
        const r = await http(active.http, 'PUT', `/v1/apps/${app}/pool`, { bits }, 10_000);
        if (r.status === 200) return;
        last = `${r.status} ${JSON.stringify(r.body)}`;
      }
      await sleep(100);
    }
    throw new Error(`pool setup of ${app} failed: ${last || 'no active Floe node'}`);
  }

  /**
   * Injects one server fault; the repair goes into `pending`. Returns the name to count, or undefined when the fault
   * could not be injected now (no active node found, an etcd member already down).
   */
  async inject(kind: string, rand: () => number, pending: Promise<unknown>[]): Promise<string | undefined> {
    if (kind === 'kill9-active' || kind === 'pause-active') {
      // Right after a failover (or an etcd election) no node may serve yet: wait for one rather than skip the kind.
      const node = await this.floe.waitActive(15_000).catch(() => undefined);
      if (!node) return undefined;
      if (kind === 'kill9-active') {
        await node.kill9();
        pending.push(sleep(500 + rand() * 1000).then(() => node.start()));
        this.log(`kill -9 of active Floe node ${node.spec.id}`);
        return kind;
      }
      const long = this.longPause;
      this.longPause = !long;
      const ms = long ? 7000 + rand() * 1500 : 1500 + rand() * 1000;
      node.signal('SIGSTOP');
      pending.push(sleep(ms).then(() => node.signal('SIGCONT')));
      this.log(`SIGSTOP of active Floe node ${node.spec.id} for ${ms.toFixed(0)} ms`);
      return long ? 'pause-active-past-session' : kind;
    }
    if (kind === 'kill9-etcd-member' || kind === 'kill9-etcd-leader') {
      // One member down at a time: a majority stays, so etcd keeps serving after an election.
      if (!this.etcd.members.every((_, i) => this.etcd.running(i))) return undefined;
      const leader = await this.etcd.leaderIndexAsync();
      if (leader < 0) return undefined;
      const followers = [0, 1, 2].filter((i) => i !== leader);
      const victim = kind === 'kill9-etcd-leader' ? leader : (followers[Math.floor(rand() * 2)] as number);
      this.etcd.kill(victim);
      pending.push(sleep(500 + rand() * 1500).then(() => this.etcd.startMember(victim)));
      this.log(`kill -9 of etcd member e${victim + 1}${victim === leader ? ' (leader)' : ''}`);
      return kind;
    }
    throw new Error(`not an etcd-mode server fault: ${kind}`);
  }

  /** After the faults: every process running again and etcd healthy. */
  async heal(): Promise<void> {
    for (let i = 0; i < this.etcd.members.length; i++) if (!this.etcd.running(i)) this.etcd.startMember(i);
    for (const n of this.floe.nodes) if (n.paused) n.signal('SIGCONT');
    for (const n of this.floe.nodes) if (!n.running) n.start();
    await this.etcd.waitHealthy();
  }

  async stop(): Promise<void> {
    try {
      await this.floe.stop();
    } finally {
      this.etcd.stop();
    }
  }

  cleanup(): void {
    this.floe.cleanup();
  }
}
