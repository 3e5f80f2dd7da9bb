import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from '../cluster/harness.js';

/** Installs Debian's etcd-server when `etcd` is missing (CI images have it). */
export function ensureEtcd(): void {
  try {
    execFileSync('etcd', ['--version'], { stdio: 'ignore' });
  } catch {
    execFileSync('apt-get', ['install', '-y', 'etcd-server', 'etcd-client'], {
      stdio: 'ignore',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
  }
}

/** Client TLS for every member: its server certificate, and the CA whose client certificates it accepts. */
export interface EtcdTls {
  caFile: string;
  certFile: string;
  keyFile: string;
  /** Certificate etcdctl presents (with --client-cert-auth and auth enabled, its CN is the etcd user). */
  adminCertFile: string;
  adminKeyFile: string;
}

interface Member {
  name: string;
  clientPort: number;
  peerPort: number;
  proc: ChildProcess | undefined;
}

/**
 * A real etcd 3.4 cluster (Debian's `etcd`) on 127.0.0.1 free ports, started by the test and stopped
 * by PID. Members can be killed (SIGKILL) and started again on the same data directory.
 */
export class EtcdCluster {
  readonly dir: string;
  readonly members: Member[];
  private readonly initialCluster: string;

  private tls: EtcdTls | undefined;

  private constructor(members: Member[]) {
    this.dir = mkdtempSync(join(tmpdir(), 'floe-etcd-'));
    this.members = members;
    this.initialCluster = members.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(',');
  }

  /** `tls`: clients must use https:// and a certificate signed by its CA (`--client-cert-auth`). */
  static async start(size = 3, opts: { tls?: EtcdTls } = {}): Promise<EtcdCluster> {
    ensureEtcd();
    const ports = await freePorts(size * 2);
    const c = new EtcdCluster(
      Array.from({ length: size }, (_, i) => ({
        name: `e${i + 1}`,
        clientPort: ports[i * 2]!,
        peerPort: ports[i * 2 + 1]!,
        proc: undefined,
      })),
    );
    c.tls = opts.tls;
    for (let i = 0; i < size; i++) c.startMember(i);
    await c.waitHealthy();
    return c;
  }

  get endpoints(): string[] {
    const scheme = this.tls ? 'https' : 'http';
    return this.members.map((m) => `${scheme}://127.0.0.1:${m.clientPort}`);
  }

  /** etcdctl's TLS flags (none without TLS). */
  ctlTlsArgs(): string[] {
    const t = this.tls;
    return t ? ['--cacert', t.caFile, '--cert', t.adminCertFile, '--key', t.adminKeyFile] : [];
  }

  /** Runs etcdctl (API 3) against every running member; returns its stdout. */
  ctl(...args: string[]): string {
    const live = this.endpoints.filter((_, i) => this.members[i]!.proc);
    return execFileSync(
      'etcdctl',
      ['--endpoints', live.join(','), ...this.ctlTlsArgs(), '--command-timeout=5s', ...args],
      { env: { ...process.env, ETCDCTL_API: '3' }, encoding: 'utf8' },
    );
  }

  startMember(i: number): void {
    const m = this.members[i]!;
    const proc = spawn(
      'etcd',
      [
        '--name',
        m.name,
        '--data-dir',
        join(this.dir, m.name),
        '--listen-client-urls',
        this.endpoints[i]!,
        '--advertise-client-urls',
        this.endpoints[i]!,
        ...(this.tls
          ? [
              '--cert-file',
              this.tls.certFile,
              '--key-file',
              this.tls.keyFile,
              '--trusted-ca-file',
              this.tls.caFile,
              '--client-cert-auth',
            ]
          : []),
        '--listen-peer-urls',
        `http://127.0.0.1:${m.peerPort}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${m.peerPort}`,
        '--initial-cluster',
        this.initialCluster,
        '--initial-cluster-state',
        'new',
        '--initial-cluster-token',
        'floe-test',
        '--heartbeat-interval',
        '100',
        '--election-timeout',
        '1000',
        '--logger',
        'zap',
        '--log-outputs',
        'stderr',
        '--log-level',
        'error',
      ],
      { stdio: ['ignore', 'ignore', 'ignore'] },
    );
    m.proc = proc;
  }

  kill(i: number): void {
    const p = this.members[i]!.proc;
    if (p?.pid && p.exitCode === null) process.kill(p.pid, 'SIGKILL');
    this.members[i]!.proc = undefined;
  }

  /** Index of the member that is the Raft leader (from `etcdctl endpoint status`). */
  leaderIndex(): number {
    for (let i = 0; i < this.members.length; i++) {
      if (!this.members[i]!.proc) continue;
      try {
        const out = execFileSync(
          'etcdctl',
          [
            '--endpoints',
            this.endpoints[i]!,
            ...this.ctlTlsArgs(),
            'endpoint',
            'status',
            '-w',
            'json',
            '--command-timeout=2s',
          ],
          { env: { ...process.env, ETCDCTL_API: '3' }, encoding: 'utf8' },
        );
        const st = JSON.parse(out) as { Status: { header: { member_id: number }; leader: number } }[];
        const s = st[0]!.Status;
        if (String(s.header.member_id) === String(s.leader)) return i;
      } catch {}
    }
    return -1;
  }

  /**
   * leaderIndex() without blocking the event loop (a chaos driver keeps recording client exits meanwhile): -1 when
   * no running member says it leads.
   */
  async leaderIndexAsync(): Promise<number> {
    const statusOf = (i: number) =>
      new Promise<number>((resolve) => {
        execFile(
          'etcdctl',
          [
            '--endpoints',
            this.endpoints[i]!,
            ...this.ctlTlsArgs(),
            'endpoint',
            'status',
            '-w',
            'json',
            '--command-timeout=2s',
          ],
          { env: { ...process.env, ETCDCTL_API: '3' }, encoding: 'utf8', timeout: 5000 },
          (err, out) => {
            if (err) return resolve(-1);
            try {
              const s = (
                JSON.parse(out) as { Status: { header: { member_id: number }; leader: number } }[]
              )[0]!.Status;
              resolve(String(s.header.member_id) === String(s.leader) ? i : -1);
            } catch {
              resolve(-1);
            }
          },
        );
      });
    const running = this.members.flatMap((m, i) => (m.proc ? [i] : []));
    const found = await Promise.all(running.map(statusOf));
    return found.find((i) => i >= 0) ?? -1;
  }

  /** True while member i's process was started by us and has not been killed. */
  running(i: number): boolean {
    const p = this.members[i]!.proc;
    return p !== undefined && p.exitCode === null && p.signalCode === null;
  }

  async waitHealthy(timeoutMs = 30_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    const live = this.endpoints.filter((_, i) => this.members[i]!.proc);
    for (;;) {
      try {
        execFileSync(
          'etcdctl',
          ['--endpoints', live.join(','), ...this.ctlTlsArgs(), 'endpoint', 'health', '--command-timeout=2s'],
          {
            env: { ...process.env, ETCDCTL_API: '3' },
            stdio: 'ignore',
          },
        );
        return;
      } catch {
        if (Date.now() > until) throw new Error(`etcd cluster not healthy within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  stop(): void {
    for (let i = 0; i < this.members.length; i++) this.kill(i);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
