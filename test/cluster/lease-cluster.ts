// Helpers for lease tests against real node processes: a started 3-node cluster whose leader's
// RESP/HTTP addresses every node knows, redis-cli runs, a raw RESP socket, lease-record parsing.
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { Cluster, type ClusterNode, type ClusterView, http, until } from './harness.js';

/** The members' view with the addresses the leader publishes through the log. */
export interface MemberView {
  id: number;
  role: string;
  httpAddr: string | null;
  respAddr: string | null;
}

export type RunningCluster = { cluster: Cluster; leader: number };

/** Starts `size` nodes and waits until every running node knows the current leader's RESP address. */
export async function startCluster(size = 3, extraArgs: string[] = []): Promise<RunningCluster> {
  const cluster = await Cluster.create({ size, extraArgs });
  cluster.startAll();
  const leader = await leaderKnownEverywhere(cluster);
  return { cluster, leader };
}

/**
 * Waits until a leader is elected and every running node has applied the entry that publishes its
 * addresses (a follower can only answer MOVED with an address after that).
 */
export async function leaderKnownEverywhere(
  cluster: Cluster,
  timeoutMs = 20_000,
  /** Nodes to leave out (e.g. one stopped with SIGSTOP). */
  exclude: ReadonlySet<number> = new Set(),
): Promise<number> {
  const live = () => cluster.nodes.filter((x) => x.running && !exclude.has(x.spec.id));
  return until(
    'every running node to know the leader and its RESP address',
    async () => {
      const views = await Promise.all(
        live().map((n) => http<ClusterView>(n.http, 'GET', '/v1/cluster', undefined, 1000)),
      );
      // A node resumed after SIGSTOP may still call itself leader for a moment: take the highest term.
      const leaderView = views
        .filter((v) => v.status === 200 && v.body.role === 'leader')
        .sort((a, b) => b.body.term - a.body.term)[0];
      if (!leaderView) return undefined;
      const leader = leaderView.body.id;
      const want = `127.0.0.1:${cluster.node(leader).spec.respPort}`;
      for (const n of live()) {
        const v = await http<Omit<ClusterView, 'members'> & { members: MemberView[] }>(
          n.http,
          'GET',
          '/v1/cluster',
          undefined,
          1000,
        );
        if (v.status !== 200 || v.body.leader !== leader) return undefined;
        const m = v.body.members.find((x) => x.id === leader);
        if (m?.respAddr !== want) return undefined;
      }
      return leader;
    },
    timeoutMs,
  );
}

export function respPortOf(n: ClusterNode): number {
  return n.spec.respPort;
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs /usr/bin/redis-cli (no shell) with a deadline. */
export function redisCli(args: string[], timeoutMs = 10_000): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile('redis-cli', args, { timeout: timeoutMs }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** A flat RESP2 field/value list (as ioredis returns a lease record) → object. */
export function record(flat: unknown): Record<string, string> {
  if (!Array.isArray(flat)) throw new Error(`expected a field/value list, got ${JSON.stringify(flat)}`);
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = String(flat[i + 1]);
  return out;
}

/** redis-cli's one-value-per-line RESP2 output of a lease record → object. */
export function cliRecord(stdout: string): Record<string, string> {
  return record(stdout.trimEnd().split('\n'));
}

/**
 * A raw TCP connection for sending arbitrary bytes: collects everything the server sends and
 * notices when the server closes.
 */
export class RawResp {
  private data = '';
  closed = false;
  private constructor(private readonly socket: Socket) {
    socket.on('data', (d) => {
      this.data += d.toString('latin1');
    });
    socket.on('close', () => {
      this.closed = true;
    });
    socket.on('error', () => {
      this.closed = true;
    });
  }

  static async open(port: number): Promise<RawResp> {
    const s = connect(port, '127.0.0.1');
    await once(s, 'connect');
    return new RawResp(s);
  }

  send(bytes: string | Buffer): void {
    this.socket.write(bytes);
  }

  /** Waits until the received bytes match `re` (bounded). */
  async waitFor(re: RegExp, timeoutMs = 5000): Promise<string> {
    return until(
      `raw reply matching ${re}`,
      async () => (re.test(this.data) ? this.data : undefined),
      timeoutMs,
      10,
    );
  }

  async waitClosed(timeoutMs = 5000): Promise<void> {
    await until(
      'the server to close the connection',
      async () => (this.closed ? true : undefined),
      timeoutMs,
      10,
    );
  }

  get received(): string {
    return this.data;
  }

  close(): void {
    this.socket.destroy();
  }
}

/** RESP multibulk encoding of one command. */
export function resp(...args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}
