/**
 * Starts a real ClickHouse server (Debian's `/usr/sbin/clickhouse-server`) on 127.0.0.1 with its own
 * temporary config and data directory, for tests and the audit benchmark. Stopped by PID.
 * Not used in production: Floe never starts ClickHouse for a user.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CLICKHOUSE_SERVER_BIN = '/usr/sbin/clickhouse-server';

/** True when Debian's clickhouse-server is installed (tests skip, saying so, when it is not). */
export function clickhouseServerAvailable(): boolean {
  return existsSync(CLICKHOUSE_SERVER_BIN);
}

/** A free TCP port on 127.0.0.1 (bound, read, released). */
export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export interface ClickHouseProcess {
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  readonly httpPort: number;
  readonly dir: string;
  /** PID of the running server (undefined while stopped). */
  pid(): number | undefined;
  /** SIGKILL the server and wait for it to be gone (the data directory stays). */
  kill(): Promise<void>;
  /** Start it again on the same ports and data directory; resolves when /ping answers. */
  restart(): Promise<void>;
  /** SIGTERM (then SIGKILL after 10 s), wait for exit, delete the temporary directory. */
  stop(): Promise<void>;
}

function configXml(dir: string, httpPort: number, tcpPort: number): string {
  return `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>${dir}/log/server.log</log><errorlog>${dir}/log/error.log</errorlog><size>10M</size><count>2</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>${httpPort}</http_port>
  <tcp_port>${tcpPort}</tcp_port>
  <path>${dir}/data/</path>
  <tmp_path>${dir}/tmp/</tmp_path>
  <user_files_path>${dir}/user_files/</user_files_path>
  <format_schema_path>${dir}/format_schemas/</format_schema_path>
  <users_config>${dir}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <max_concurrent_queries>50</max_concurrent_queries>
</yandex>
`;
}

const USERS_XML = `<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`;

async function waitReady(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  while (Date.now() < deadline) {
    if (exited) throw new Error(`clickhouse-server exited during start-up (see its log under ${url})`);
    try {
      const r = await fetch(`${url}/ping`);
      if (r.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50)); // polling a port that has no readiness event
  }
  throw new Error(`clickhouse-server did not answer ${url}/ping within ${timeoutMs} ms`);
}

async function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => child.once('exit', () => resolve()));
}

/** Start clickhouse-server on free 127.0.0.1 ports in a fresh temporary directory. */
export async function startClickHouse(): Promise<ClickHouseProcess> {
  if (!clickhouseServerAvailable())
    throw new Error(`${CLICKHOUSE_SERVER_BIN} is not installed (apt-get install -y clickhouse-server)`);
  const dir = mkdtempSync(join(tmpdir(), 'floe-ch-'));
  for (const d of ['data', 'tmp', 'user_files', 'format_schemas', 'log']) mkdirSync(join(dir, d));
  const httpPort = await freePort();
  const tcpPort = await freePort();
  writeFileSync(join(dir, 'config.xml'), configXml(dir, httpPort, tcpPort));
  writeFileSync(join(dir, 'users.xml'), USERS_XML);
  const url = `http://127.0.0.1:${httpPort}`;
  let child: ChildProcess | undefined;
  const launch = async () => {
    const c = spawn(CLICKHOUSE_SERVER_BIN, [`--config-file=${join(dir, 'config.xml')}`], {
      cwd: dir,
      stdio: 'ignore',
    });
    child = c;
    await waitReady(url, c, 30_000);
  };
  await launch();
  return {
    url,
    httpPort,
    dir,
    pid: () => (child && child.exitCode === null && child.signalCode === null ? child.pid : undefined),
    kill: async () => {
      const c = child;
      if (!c?.pid) return;
      process.kill(c.pid, 'SIGKILL');
      await waitExit(c);
    },
    restart: async () => {
      if (child && child.exitCode === null && child.signalCode === null) throw new Error('still running');
      await launch();
    },
    stop: async () => {
      const c = child;
      if (c?.pid && c.exitCode === null && c.signalCode === null) {
        process.kill(c.pid, 'SIGTERM');
        const t = setTimeout(() => {
          if (c.pid && c.exitCode === null && c.signalCode === null) process.kill(c.pid, 'SIGKILL');
        }, 10_000);
        await waitExit(c);
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
