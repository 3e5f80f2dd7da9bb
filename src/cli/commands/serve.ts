import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { ConfigError, DEFAULTS, resolveServeConfig } from '../../node/config.js';
import { startNode } from '../../node/start.js';
import { limitsFromFlags, SERVE_LIMIT_FLAGS, setServeLimits } from '../../server/serve-limits.js';
import type { CliIO } from '../io.js';
import { CommandFailedError, UsageError } from '../io.js';

interface ServeFlags {
  nodeId?: string;
  dataDir?: string;
  peerAddr?: string;
  httpAddr?: string;
  respAddr?: string;
  initialCluster?: string;
  initialClusterState?: string;
  clusterSecret?: string;
  clusterId?: string;
  tickMs?: string;
  electionTicks?: string;
  snapshotEvery?: string;
  snapshotTrailing?: string;
  seqAutoCreate?: boolean;
  leaderLease?: boolean;
  storageLock?: string;
  takeLegacyLock?: boolean;
  auditClickhouse?: string;
  auditUser?: string;
  auditPassword?: string;
  auditDatabase?: string;
  logLevel?: string;
  config?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsCa?: string;
  tlsClientAuth?: string;
  peerTlsCert?: string;
  peerTlsKey?: string;
  peerTlsCa?: string;
  store?: string;
  etcdEndpoints?: string;
  etcdPrefix?: string;
  etcdCa?: string;
  etcdCert?: string;
  etcdKey?: string;
  etcdUser?: string;
  etcdPassword?: string;
}

/**
 * `floe serve`: runs one node until SIGTERM/SIGINT. With no flags: a single-node Floe with its data
 * in ./floe-data/node-1. Flags beat the `--config` JSON file, which beats built-in defaults.
 */
export function serveCommand(io: CliIO): Command {
  const cmd = new Command('serve')
    .description('run a Floe node (defaults: a single-node cluster with data in ./floe-data/node-1)')
    .option('--node-id <id>', `this member's id (default ${DEFAULTS.nodeId})`)
    .option('--data-dir <dir>', 'where the log and snapshots live (default ./floe-data/node-<id>)')
    .option('--peer-addr <host:port>', `Raft peer listener (default ${DEFAULTS.peerAddr})`)
    .option('--http-addr <host:port>', `HTTP admin/API listener (default ${DEFAULTS.httpAddr})`)
    .option('--resp-addr <host:port>', `Redis-protocol listener (default ${DEFAULTS.respAddr})`)
    .option(
      '--initial-cluster <list>',
      'members of a new cluster: id=host:port,... (default: just this node)',
    )
    .option(
      '--initial-cluster-state <state>',
      'new (bootstrap) or existing (join after `floe cluster add`)',
      'new',
    )
    .option('--cluster-secret <secret>', 'shared peer secret, >= 16 chars (default $FLOE_CLUSTER_SECRET)')
    .option('--cluster-id <name>', `cluster name peers must agree on (default ${DEFAULTS.clusterId})`)
    .option('--tick-ms <ms>', `Raft tick (default ${DEFAULTS.tickMs})`)
    .option('--election-ticks <n>', `election timeout in ticks (default ${DEFAULTS.electionTicks})`)
    .option(
      '--snapshot-every <n>',
      `snapshot after this many applied entries (default ${DEFAULTS.snapshotEvery})`,
    )
    .option(
      '--snapshot-trailing <n>',
      `log entries kept behind a snapshot for lagging followers (default ${DEFAULTS.snapshotTrailing})`,
    )
    .option(
      '--seq-auto-create',
      'INCR on a missing sequence creates it (start 1, step 1000, strict); off by default',
    )
    .option(
      '--leader-lease',
      'serve strict INCR from the Raft leader lease, with no ReadIndex round trip (assumes clock rates within ±10%; set on every member; docs/decisions/0009)',
    )
    .option(
      '--storage-lock <mode>',
      'kernel (default: refuse to start where the data dir cannot be kernel-locked) or pid-file (opt in to the PID rule there)',
    )
    .option(
      '--take-legacy-lock',
      'take a LOCK left by an older Floe version (or --storage-lock pid-file) for this one start: only after stopping every such process',
    )
    .option(
      '--audit-clickhouse <url>',
      'write the audit trail to this ClickHouse (http://host:8123); default: files under <data-dir>/audit',
    )
    .option('--audit-user <user>', 'ClickHouse user for the audit trail')
    .option(
      '--audit-password <password>',
      'ClickHouse password for the audit trail (default $FLOE_AUDIT_PASSWORD)',
    )
    .option('--audit-database <db>', 'ClickHouse database for the audit trail (default default)')
    .option('--tls-cert <file>', 'PEM certificate (chain) for TLS on the RESP and HTTP ports (docs/tls.md)')
    .option('--tls-key <file>', 'PEM private key of --tls-cert')
    .option('--tls-ca <file>', 'PEM CA bundle that signs client certificates (and that members trust)')
    .option('--tls-client-auth <mode>', 'client certificates: none, request or require (default none)')
    .option(
      '--peer-tls-cert <file>',
      'PEM certificate for mutual TLS between members (with --peer-tls-key/-ca)',
    )
    .option('--peer-tls-key <file>', 'PEM private key of --peer-tls-cert')
    .option('--peer-tls-ca <file>', 'PEM CA that signs every member’s peer certificate')
    .option(
      '--store <kind>',
      'where worker-ID leases live: raft (built-in, default) or etcd (docs/etcd-store.md)',
    )
    .option('--etcd-endpoints <urls>', 'etcd client URLs for --store etcd: http://host:2379,...')
    .option('--etcd-prefix <prefix>', 'key prefix of this installation in etcd (default /floe)')
    .option(
      '--etcd-ca <file>',
      'PEM CA of etcd’s server certificates (https:// endpoints; default system roots)',
    )
    .option('--etcd-cert <file>', 'PEM client certificate for etcd (with --etcd-key)')
    .option('--etcd-key <file>', 'PEM private key of --etcd-cert')
    .option('--etcd-user <name>', 'etcd user (with --etcd-password or $FLOE_ETCD_PASSWORD)')
    .option('--etcd-password <password>', 'password of --etcd-user (prefer $FLOE_ETCD_PASSWORD)')
    .option('--log-level <level>', 'trace, debug, info, warn, error (default info or $FLOE_LOG_LEVEL)')
    .option('--config <file>', 'JSON file with the same settings in camelCase (nodeId, dataDir, ...)')
    .action(async (allFlags: ServeFlags & Record<string, unknown>) => {
      // Timeouts and limits of the HTTP and RESP listeners (docs/security.md).
      const limitKeys = new Set(SERVE_LIMIT_FLAGS.map((f) => f.key));
      const flags = Object.fromEntries(
        Object.entries(allFlags).filter(([k]) => !limitKeys.has(k)),
      ) as ServeFlags;
      try {
        // The same keys (camelCase, e.g. respMaxClientsPerIp) may come from the --config file; flags win.
        setServeLimits(limitsFromFlags({ ...limitsInConfigFile(allFlags.config), ...definedOnly(allFlags) }));
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
      let config: ReturnType<typeof resolveServeConfig>;
      try {
        config = resolveServeConfig({ ...flags }, io.env as NodeJS.ProcessEnv);
      } catch (err) {
        if (err instanceof ConfigError) throw new UsageError(err.message);
        throw err;
      }
      let running: Awaited<ReturnType<typeof startNode>>;
      try {
        running = await startNode(config);
      } catch (err) {
        // Corrupt or locked data, a port in use: say what and where, never a stack trace.
        throw new CommandFailedError(`node ${config.nodeId} cannot start: ${(err as Error).message}`);
      }
      io.err(
        `floe: node ${config.nodeId} serving (http ${config.httpAddr}, peers ${config.peerAddr}, data ${config.dataDir}${config.tls ? ', client tls' : ''}${config.peerTls ? ', peer mtls' : ''})\n`,
      );
      let fatal: string | undefined;
      await new Promise<void>((resolve) => {
        let signals = 0;
        const onSignal = (sig: NodeJS.Signals) => {
          signals++;
          if (signals > 1) process.exit(130); // a second Ctrl-C means now
          running.logger.info({ signal: sig }, 'shutting down');
          void running.close(`signal ${sig}`).then(resolve, resolve);
        };
        process.once('SIGTERM', onSignal);
        process.on('SIGINT', onSignal);
        // SIGHUP: read the TLS certificate files again; a bad file keeps the old ones (logged by name).
        process.on('SIGHUP', () => {
          const r = running.reloadTls();
          for (const m of r.messages) io.err(`floe: SIGHUP: ${m}\n`);
        });
        const onStopped = (reason: string) => {
          if (reason.startsWith('fatal')) fatal = reason;
          if (reason.startsWith('fatal') || reason.startsWith('removed'))
            void running.close(reason).then(resolve, resolve);
        };
        // The node may have stopped while the rest started (a removed node is told so within milliseconds of
        // dialling a member, FS-23): the event is gone then, and the process would serve on for ever.
        if (running.node.stopped !== undefined) onStopped(running.node.stopped);
        else running.node.once('stopped', onStopped);
      });
      // Fail-stop: the node halted itself (its reason is logged); the supervisor must see a failure.
      if (fatal) throw new CommandFailedError(`node ${config.nodeId} stopped: ${fatal}`);
    });
  for (const f of SERVE_LIMIT_FLAGS) cmd.option(f.flag, f.help);
  return cmd;
}

/** The listener limits a `--config` JSON file sets (keys as the flags' camelCase names). */
function limitsInConfigFile(path: unknown): Record<string, unknown> {
  if (typeof path !== 'string') return {};
  let file: Record<string, unknown>;
  try {
    file = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  const keys = new Set(SERVE_LIMIT_FLAGS.map((f) => f.key));
  return Object.fromEntries(Object.entries(file).filter(([k]) => keys.has(k)));
}

function definedOnly(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}
