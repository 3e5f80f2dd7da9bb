// Moves worker-ID leases and sequences (configuration and high-water mark of every live and deleted key) between
// the stores (docs/etcd-store.md, "Moving between stores").
// Built-in Raft -> etcd:
//   npx tsx scripts/store-migrate.ts export <data-dir of each stopped member>... > leases.json
//   npx tsx scripts/store-migrate.ts import --etcd-endpoints http://a:2379,... [--etcd-prefix /floe] leases.json
// etcd -> built-in Raft (or any running Floe installation, through its lease API):
//   npx tsx scripts/store-migrate.ts export-etcd --etcd-endpoints http://a:2379,... [--etcd-prefix /floe] > leases.json
//   npx tsx scripts/store-migrate.ts import-api --target http://leader:7380 leases.json
// etcd TLS and authentication for both etcd commands: --etcd-ca, --etcd-cert, --etcd-key, --etcd-user and
// --etcd-password (or FLOE_ETCD_PASSWORD), as `floe serve --store etcd` takes them.
import { readFileSync } from 'node:fs';
import { type EtcdSecurity, parseEtcdSecurity } from '../src/store/etcd/etcd-security.js';
import {
  encodeExport,
  exportFromDataDirs,
  exportFromEtcd,
  httpJsonCall,
  importIntoEtcd,
  importThroughApi,
  type LeaseExport,
} from '../src/store/migrate.js';

const FLAGS: Record<string, string> = {
  '--etcd-endpoints': 'etcdEndpoints',
  '--etcd-prefix': 'etcdPrefix',
  '--etcd-ca': 'etcdCa',
  '--etcd-cert': 'etcdCert',
  '--etcd-key': 'etcdKey',
  '--etcd-user': 'etcdUser',
  '--etcd-password': 'etcdPassword',
  '--target': 'target',
};

function parseArgs(rest: string[]): { opts: Record<string, string>; files: string[] } {
  const opts: Record<string, string> = {};
  const files: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const k = FLAGS[rest[i]!];
    if (k) opts[k] = String(rest[++i] ?? '');
    else if (rest[i]!.startsWith('--')) throw new Error(`unknown option ${rest[i]}`);
    else files.push(rest[i]!);
  }
  return { opts, files };
}

function etcdOf(opts: Record<string, string>): {
  endpoints: string[];
  prefix: string;
  security: EtcdSecurity;
} {
  const endpoints = (opts.etcdEndpoints ?? '').split(',').filter(Boolean);
  if (endpoints.length === 0) throw new Error('needs --etcd-endpoints http://host:2379,...');
  const s = parseEtcdSecurity((k) => opts[k], endpoints);
  if ('error' in s) throw new Error(s.error);
  return { endpoints, prefix: opts.etcdPrefix ?? '/floe', security: s.ok };
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === 'export' && rest.length > 0) {
    const e = await exportFromDataDirs(rest);
    process.stdout.write(`${encodeExport(e)}\n`);
    const n = e.pools.reduce((a, p) => a + p.records.length, 0);
    process.stderr.write(
      `exported ${e.pools.length} app(s), ${n} worker record(s), ${e.sequences.length} sequence(s), ` +
        `${e.tombstones.length} deleted sequence mark(s) from ${rest.length} data dir(s)\n`,
    );
    return 0;
  }
  if (cmd === 'import') {
    const { opts, files } = parseArgs(rest);
    const file = files[0];
    if (!file) throw new Error('import needs --etcd-endpoints http://host:2379,... and the export file');
    const { endpoints, prefix, security } = etcdOf(opts);
    const data = JSON.parse(readFileSync(file, 'utf8')) as LeaseExport;
    const r = await importIntoEtcd(data, endpoints, prefix, security);
    process.stderr.write(
      `imported ${r.apps} app(s), ${r.records} worker record(s), ${r.sequences} sequence(s)` +
        (r.refused.length > 0 ? `; refused (already in etcd): ${r.refused.join(', ')}` : '') +
        '\n',
    );
    return r.refused.length > 0 ? 1 : 0;
  }
  if (cmd === 'export-etcd') {
    const { endpoints, prefix, security } = etcdOf(parseArgs(rest).opts);
    const e = await exportFromEtcd(endpoints, prefix, security);
    process.stdout.write(`${encodeExport(e)}\n`);
    const n = e.pools.reduce((a, p) => a + p.records.length, 0);
    process.stderr.write(
      `exported ${e.pools.length} app(s), ${n} worker record(s), ${e.sequences.length} sequence(s), ` +
        `${e.tombstones.length} deleted sequence mark(s) from etcd ${prefix}\n`,
    );
    return 0;
  }
  if (cmd === 'import-api') {
    const { opts, files } = parseArgs(rest);
    const file = files[0];
    if (!opts.target || !file)
      throw new Error('import-api needs --target http://host:7380 and the export file');
    const data = JSON.parse(readFileSync(file, 'utf8')) as LeaseExport;
    const r = await importThroughApi(data, httpJsonCall(opts.target), (l) => process.stderr.write(`${l}\n`));
    process.stderr.write(
      `imported ${r.apps} app(s), ${r.records} worker mark(s), ${r.sequences} sequence(s)` +
        (r.refused.length > 0 ? `; refused (already on the target): ${r.refused.join(', ')}` : '') +
        '\n',
    );
    return r.refused.length > 0 ? 1 : 0;
  }
  process.stderr.write(
    'usage: store-migrate.ts export <member data dir>... > leases.json\n' +
      '       store-migrate.ts import --etcd-endpoints URLS [--etcd-prefix /floe] leases.json\n' +
      '       store-migrate.ts export-etcd --etcd-endpoints URLS [--etcd-prefix /floe] > leases.json\n' +
      '       store-migrate.ts import-api --target http://host:7380 leases.json\n' +
      '       (etcd commands also take --etcd-ca/--etcd-cert/--etcd-key/--etcd-user/--etcd-password)\n',
  );
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`store-migrate: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
