// A 3-member etcd 3.4 cluster on loopback for side-by-side benchmarks (Debian `etcd-server`).
// Started by the benchmark, stopped by PID, data in a temporary directory.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { freePorts } from '../test/cluster/harness.js';

export interface EtcdCluster {
  procs: ChildProcess[];
  /** Client URLs of the three members. */
  urls: string[];
  dir: string;
}

export async function startEtcd(token = 'floe-bench'): Promise<EtcdCluster> {
  if (spawnSync('etcd', ['--version']).status !== 0) {
    throw new Error('etcd not found: apt-get install -y etcd-server etcd-client (see .ci/run)');
  }
  const dir = mkdtempSync(join(tmpdir(), 'floe-bench-etcd-'));
  const ports = await freePorts(6);
  const url = (p: number) => `http://127.0.0.1:${p}`;
  const members = [0, 1, 2].map((i) => ({
    name: `m${i}`,
    client: url(ports[2 * i]!),
    peer: url(ports[2 * i + 1]!),
  }));
  const initial = members.map((m) => `${m.name}=${m.peer}`).join(',');
  const procs = members.map((m) =>
    spawn(
      'etcd',
      [
        ...['--name', m.name, '--data-dir', join(dir, m.name)],
        ...['--listen-client-urls', m.client, '--advertise-client-urls', m.client],
        ...['--listen-peer-urls', m.peer, '--initial-advertise-peer-urls', m.peer],
        ...['--initial-cluster', initial, '--initial-cluster-state', 'new', '--initial-cluster-token', token],
        ...['--logger', 'zap', '--log-outputs', join(dir, `${m.name}.log`)],
      ],
      { stdio: 'ignore' },
    ),
  );
  const urls = members.map((m) => m.client);
  const probe = new Etcd3({
    hosts: urls,
    defaultCallOptions: () => ({ deadline: new Date(Date.now() + 2000) }),
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await probe.put('probe').value('1');
      break;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`etcd did not become ready: ${err}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  probe.close();
  return { procs, urls, dir };
}

export async function stopEtcd(e: EtcdCluster): Promise<void> {
  await Promise.all(
    e.procs.map(
      (p) =>
        new Promise<void>((resolve) => {
          if (p.exitCode !== null || p.signalCode !== null || !p.pid) return resolve();
          p.once('exit', () => resolve());
          process.kill(p.pid, 'SIGTERM');
        }),
    ),
  );
  rmSync(e.dir, { recursive: true, force: true });
}
