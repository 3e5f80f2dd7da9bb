import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { Command } from 'commander';
import { ensureDevCertificates } from '../../tls/dev-ca.js';
import type { CliIO } from '../io.js';
import { CommandFailedError, parseIntOption } from '../io.js';

interface DevFlags {
  nodes: string;
  dataDir: string;
  basePort: string;
  host: string;
  tls?: boolean;
}

/**
 * `floe dev --nodes 3`: a local cluster as child processes in one command. Node i listens on
 * HTTP base+i-1 (7380, 7381, ...), RESP base+10+i-1 and peers base+20+i-1. Ctrl-C stops them all
 * (SIGTERM to each, then waits for every child to exit).
 */
export function devCommand(io: CliIO): Command {
  return new Command('dev')
    .description('start a local multi-node cluster as child processes (Ctrl-C stops them all)')
    .option('--nodes <n>', 'cluster size: 1, 3 or 5', '3')
    .option('--data-dir <dir>', 'parent directory of the nodes’ data', 'floe-data/dev')
    .option(
      '--base-port <port>',
      'first HTTP port; RESP ports start at base+10, peer ports at base+20',
      '7380',
    )
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option(
      '--tls',
      'TLS everywhere: a local CA and node certificates in <data-dir>/tls (made once, with openssl), client TLS on RESP and HTTP, mutual TLS between peers',
    )
    .action(async (flags: DevFlags) => {
      const n = parseIntOption('--nodes', flags.nodes, 1, 7);
      const base = parseIntOption('--base-port', flags.basePort, 1024, 65_000);
      const secret = randomBytes(24).toString('hex');
      const ids = Array.from({ length: n }, (_, i) => i + 1);
      const peer = (id: number) => `${flags.host}:${base + 20 + id - 1}`;
      const initialCluster = ids.map((id) => `${id}=${peer(id)}`).join(',');
      const script = process.argv[1] ?? resolve('dist/cli/main.js');
      const tlsDir = resolve(flags.dataDir, 'tls');
      let tls: ReturnType<typeof ensureDevCertificates> | undefined;
      if (flags.tls) {
        const hosts = [...new Set([flags.host, '127.0.0.1', 'localhost'])];
        try {
          tls = ensureDevCertificates(tlsDir, ids, hosts);
        } catch (err) {
          throw new CommandFailedError(
            `cannot make the dev certificates in ${tlsDir}: ${(err as Error).message}`,
          );
        }
        io.err(
          `floe dev: ${tls.created ? 'made' : 'using'} a local CA and node certificates in ${tlsDir} (for ${hosts.join(', ')})\n`,
        );
      }
      const children: ChildProcess[] = [];
      for (const id of ids) {
        const args = [
          ...process.execArgv,
          script,
          'serve',
          '--node-id',
          String(id),
          '--data-dir',
          resolve(flags.dataDir, `node-${id}`),
          '--peer-addr',
          peer(id),
          '--http-addr',
          `${flags.host}:${base + id - 1}`,
          '--resp-addr',
          `${flags.host}:${base + 10 + id - 1}`,
          '--initial-cluster',
          initialCluster,
        ];
        if (tls) {
          const own = tls.nodes.get(id)!;
          args.push('--tls-cert', own.cert, '--tls-key', own.key, '--tls-ca', tls.ca.cert);
          args.push('--peer-tls-cert', own.cert, '--peer-tls-key', own.key, '--peer-tls-ca', tls.ca.cert);
        }
        const child = spawn(process.execPath, args, {
          stdio: ['ignore', 'inherit', 'inherit'],
          // Own process group: a terminal's Ctrl-C reaches only `floe dev`, which stops each child once.
          detached: true,
          env: { ...process.env, FLOE_CLUSTER_SECRET: secret },
        });
        children.push(child);
        io.err(
          `floe dev: node ${id} pid ${child.pid} http ${flags.host}:${base + id - 1} peer ${peer(id)}\n`,
        );
      }
      if (tls) {
        const ca = tls.ca.cert;
        io.err(
          `floe dev: ${n} nodes over TLS; try:\n` +
            `  FLOE_TLS_CA=${ca} floe cluster status --endpoint https://${flags.host}:${base}\n` +
            `  redis-cli -c --tls --cacert ${ca} -h ${flags.host} -p ${base + 10} PING\n` +
            `  curl --cacert ${ca} https://${flags.host}:${base}/v1/cluster\n`,
        );
      } else io.err(`floe dev: ${n} nodes; try: floe cluster status --endpoint ${flags.host}:${base}\n`);
      const exits = children.map((c) =>
        c.exitCode !== null ? Promise.resolve() : once(c, 'exit').then(() => {}),
      );
      let stopping = false;
      const stop = () => {
        if (stopping) return;
        stopping = true;
        io.err('floe dev: stopping all nodes\n');
        for (const c of children) if (c.exitCode === null && c.pid) process.kill(c.pid, 'SIGTERM');
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
      // If any node dies on its own, stop the rest: a dev cluster is all or nothing.
      await Promise.race(exits);
      stop();
      await Promise.all(exits);
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    });
}
