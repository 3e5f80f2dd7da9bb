// Starts real Floe node processes on 127.0.0.1 for integration tests, and stops them by PID.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const repoRoot = resolve(import.meta.dirname, '../..');
export const floeBin = join(repoRoot, 'dist/cli/main.js');

/** Ports chosen by the OS (listen on 0, read, close). */
export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: n }, async () => {
      const s = createServer();
      s.listen(0, '127.0.0.1');
      await once(s, 'listening');
      return s;
    }),
  );
  const ports = servers.map((s) => {
    const a = s.address();
    if (!a || typeof a === 'string') throw new Error('no port');
    return a.port;
  });
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

export interface NodeSpec {
  id: number;
  peerPort: number;
  httpPort: number;
  respPort: number;
  /** Where other nodes dial this node (a fault proxy's port, or peerPort). */
  advertisedPeerPort: number;
}

export class ClusterNode {
  proc: ChildProcess | undefined;
  exitCode: number | null = null;
  constructor(
    readonly spec: NodeSpec,
    readonly dataDir: string,
    private readonly args: () => string[],
    private readonly logPath: string,
  ) {}

  get http(): string {
    return `127.0.0.1:${this.spec.httpPort}`;
  }

  get pid(): number {
    if (!this.proc?.pid) throw new Error(`node ${this.spec.id} is not running`);
    return this.proc.pid;
  }

  start(): void {
    const log = createWriteStream(this.logPath, { flags: 'a' });
    // FLOE_TEST_NODE_ARGS: extra Node.js flags for node processes (e.g. --cpu-prof when profiling).
    const nodeArgs = (process.env.FLOE_TEST_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const proc = spawn(process.execPath, [...nodeArgs, floeBin, 'serve', ...this.args()], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, FLOE_LOG_LEVEL: process.env.FLOE_LOG_LEVEL ?? 'info' },
    });
    proc.stdout?.pipe(log);
    proc.stderr?.pipe(log);
    this.exitCode = null;
    proc.on('exit', (code, signal) => {
      this.exitCode = code ?? (signal ? 128 : 0);
    });
    this.proc = proc;
  }

  get running(): boolean {
    return this.proc !== undefined && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** True between SIGSTOP and SIGCONT sent through signal(). */
  paused = false;

  signal(sig: NodeJS.Signals): void {
    if (!this.proc?.pid) return;
    process.kill(this.proc.pid, sig);
    if (sig === 'SIGSTOP') this.paused = true;
    if (sig === 'SIGCONT') this.paused = false;
  }

  async kill9(): Promise<void> {
    if (!this.running || !this.proc) return;
    const exited = once(this.proc, 'exit');
    this.signal('SIGKILL');
    await exited;
  }

  async stopGracefully(): Promise<number | null> {
    if (!this.running || !this.proc) return this.exitCode;
    const exited = once(this.proc, 'exit');
    this.signal('SIGTERM');
    const [code] = (await exited) as [number | null];
    return code;
  }
}

export interface ClusterOptions {
  size: number;
  /** Members of the bootstrap cluster (the first N); the rest join later with --initial-cluster-state existing. */
  initialSize?: number;
  secret?: string;
  extraArgs?: string[];
  /** Per-node peer port others dial (to put a proxy in between); default: the node's own peer port. */
  advertise?: (spec: NodeSpec) => number;
}

export class Cluster {
  readonly nodes: ClusterNode[] = [];
  readonly root: string;
  private constructor(root: string) {
    this.root = root;
  }

  static async create(opts: ClusterOptions): Promise<Cluster> {
    const root = mkdtempSync(join(tmpdir(), 'floe-cluster-'));
    const c = new Cluster(root);
    const ports = await freePorts(opts.size * 3);
    const specs: NodeSpec[] = [];
    for (let i = 0; i < opts.size; i++) {
      const spec = {
        id: i + 1,
        peerPort: ports[i * 3]!,
        httpPort: ports[i * 3 + 1]!,
        respPort: ports[i * 3 + 2]!,
        advertisedPeerPort: 0,
      };
      spec.advertisedPeerPort = opts.advertise ? opts.advertise(spec) : spec.peerPort;
      specs.push(spec);
    }
    const initialSize = opts.initialSize ?? opts.size;
    const initialCluster = (upTo: number) =>
      specs
        .slice(0, upTo)
        .map((s) => `${s.id}=127.0.0.1:${s.advertisedPeerPort}`)
        .join(',');
    for (const spec of specs) {
      const joining = spec.id > initialSize;
      const dataDir = join(root, `node-${spec.id}`);
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
        initialCluster(joining ? spec.id : initialSize),
        '--initial-cluster-state',
        joining ? 'existing' : 'new',
        '--cluster-secret',
        opts.secret ?? 'floe-test-cluster-secret-0123456789',
        ...(opts.extraArgs ?? []),
      ];
      c.nodes.push(new ClusterNode(spec, dataDir, args, join(root, `node-${spec.id}.log`)));
    }
    return c;
  }

  node(id: number): ClusterNode {
    const n = this.nodes.find((x) => x.spec.id === id);
    if (!n) throw new Error(`no node ${id}`);
    return n;
  }

  /** Starts every node (or the first `count`). */
  startAll(count = this.nodes.length): void {
    for (const n of this.nodes.slice(0, count)) n.start();
  }

  async stopAll(): Promise<void> {
    await Promise.all(
      this.nodes.map(async (n) => {
        if (n.running) {
          n.signal('SIGCONT');
          await n.kill9();
        }
      }),
    );
  }

  cleanup(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}

export interface HttpResult<T = unknown> {
  status: number;
  body: T;
}

/** One HTTP call with a deadline; network errors become status 0. Follows 307 to the leader. */
export async function http<T = unknown>(
  addr: string,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = 3000,
): Promise<HttpResult<T>> {
  try {
    const res = await fetch(`http://${addr}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
      redirect: 'follow',
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // metrics and other text bodies stay as text
    }
    return { status: res.status, body: parsed as T };
  } catch (err) {
    // ECONNREFUSED (in err.cause) proves the request never reached the node; a timeout does not.
    const code = ((err as { cause?: { code?: unknown } }).cause?.code as string | undefined) ?? undefined;
    return { status: 0, body: { error: String(err), code } as T };
  }
}

export interface ClusterView {
  id: number;
  role: string;
  leader: number;
  term: number;
  commit: number;
  applied: number;
  members: { id: number; role: string; httpAddr: string | null }[];
}

/** Polls until `pred` holds or the deadline passes (status polling is the event here: another process). */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 20_000,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Waits until a majority of running nodes agree on one leader; returns its id. */
export async function waitForLeader(c: Cluster, timeoutMs = 20_000): Promise<number> {
  return until(
    'a leader',
    async () => {
      const views = await Promise.all(
        c.nodes
          .filter((n) => n.running)
          .map((n) => http<ClusterView>(n.http, 'GET', '/v1/cluster', undefined, 1000)),
      );
      const leaders = views.filter((v) => v.status === 200 && v.body.role === 'leader').map((v) => v.body);
      if (leaders.length === 0) return undefined;
      const top = leaders.sort((a, b) => b.term - a.term)[0]!;
      const agree = views.filter((v) => v.status === 200 && v.body.leader === top.id).length;
      return agree > c.nodes.length / 2 ? top.id : undefined;
    },
    timeoutMs,
  );
}
