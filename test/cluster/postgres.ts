// A throwaway PostgreSQL (Debian's) for tests: its own data directory, 127.0.0.1 only, a free port;
// stopped with pg_ctl (which signals the postmaster by the PID in its data directory).
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from './harness.js';

const BIN = '/usr/lib/postgresql/15/bin';

export interface RunningPostgres {
  port: number;
  url: string;
  stop(): void;
}

export async function startPostgres(): Promise<RunningPostgres> {
  if (!existsSync(`${BIN}/pg_ctl`))
    throw new Error(
      `PostgreSQL 15 is not installed (${BIN}/pg_ctl): apt-get install postgresql (.ci/run does)`,
    );
  const dir = mkdtempSync(join(tmpdir(), 'floe-pg-'));
  chmodSync(dir, 0o755);
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  chownSync(dir, uid, gid);
  const data = join(dir, 'data');
  const asPg = (cmd: string, args: string[]) =>
    execFileSync('runuser', ['-u', 'postgres', '--', `${BIN}/${cmd}`, ...args], {
      stdio: 'pipe',
      timeout: 60_000,
    });
  asPg('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres']);
  const [port] = await freePorts(1);
  asPg('pg_ctl', [
    '-D',
    data,
    '-o',
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`,
    '-l',
    join(dir, 'log'),
    '-w',
    'start',
  ]);
  return {
    port: port!,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop() {
      try {
        asPg('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
