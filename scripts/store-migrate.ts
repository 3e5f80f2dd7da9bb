// Moves worker-ID leases from the built-in store to etcd (docs/etcd-store.md, "Moving between stores").
//   npx tsx scripts/store-migrate.ts export <data-dir of each stopped member>... > leases.json
//   npx tsx scripts/store-migrate.ts import --etcd-endpoints http://a:2379,... [--etcd-prefix /floe] leases.json
import { readFileSync } from 'node:fs';
import { encodeExport, exportFromDataDirs, importIntoEtcd, type LeaseExport } from '../src/store/migrate.js';

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === 'export' && rest.length > 0) {
    const e = await exportFromDataDirs(rest);
    process.stdout.write(`${encodeExport(e)}\n`);
    const n = e.pools.reduce((a, p) => a + p.records.length, 0);
    process.stderr.write(
      `exported ${e.pools.length} app(s), ${n} worker record(s) from ${rest.length} data dir(s)\n`,
    );
    return 0;
  }
  if (cmd === 'import') {
    let endpoints: string[] = [];
    let prefix = '/floe';
    let file: string | undefined;
    for (let i = 0; i < rest.length; i++) {
      if (rest[i] === '--etcd-endpoints')
        endpoints = String(rest[++i] ?? '')
          .split(',')
          .filter(Boolean);
      else if (rest[i] === '--etcd-prefix') prefix = String(rest[++i] ?? '');
      else file = rest[i];
    }
    if (endpoints.length === 0 || !file) {
      process.stderr.write('import needs --etcd-endpoints http://host:2379,... and the export file\n');
      return 2;
    }
    const data = JSON.parse(readFileSync(file, 'utf8')) as LeaseExport;
    const r = await importIntoEtcd(data, endpoints, prefix);
    process.stderr.write(
      `imported ${r.apps} app(s), ${r.records} worker record(s)` +
        (r.refused.length > 0 ? `; refused (already in etcd): ${r.refused.join(', ')}` : '') +
        '\n',
    );
    return r.refused.length > 0 ? 1 : 0;
  }
  process.stderr.write(
    'usage: store-migrate.ts export <member data dir>... > leases.json\n' +
      '       store-migrate.ts import --etcd-endpoints URLS [--etcd-prefix /floe] leases.json\n',
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
