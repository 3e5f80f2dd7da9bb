import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EXIT_ILLEGAL, EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE, runCheckCommand } from './check-command.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'floe-cli-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const file = (name: string, ...records: object[]) => {
  const path = join(dir, name);
  writeFileSync(path, records.map((r) => JSON.stringify(r) + '\n').join(''));
  return path;
};
const rec = (op: string, key: string, input: unknown, output: unknown, t0: number, t1: number | null) => ({
  clientId: 'c',
  op,
  key,
  input,
  output,
  invokeTime: t0,
  returnTime: t1,
});

async function run(...argv: string[]) {
  let out = '';
  let err = '';
  const code = await runCheckCommand(
    argv,
    { write: (s: string) => (out += s) },
    { write: (s: string) => (err += s) },
  );
  return { code, out, err };
}

describe('check command', () => {
  it('exits 0 for a linearizable kv history merged from two files', async () => {
    const a = file('a.jsonl', rec('write', 'k', 1, null, 0, 10));
    const b = file('b.jsonl', rec('read', 'k', null, 1, 20, 30));
    const r = await run('--model', 'kv', a, b);
    expect(r.code).toBe(EXIT_OK);
    expect(r.out).toMatch(/^LINEARIZABLE: model kv, 2 operations, 1 partitions/);
  });

  it('exits 1 and names the key for an illegal history', async () => {
    const a = file(
      'a.jsonl',
      rec('write', 'good', 1, null, 0, 10),
      rec('write', 'bad', 1, null, 0, 10),
      rec('write', 'bad', 2, null, 11, 12),
      rec('read', 'bad', null, 1, 20, 30),
    );
    const r = await run('--model', 'kv', a);
    expect(r.code).toBe(EXIT_ILLEGAL);
    expect(r.out).toContain('key "bad": not linearizable');
    expect(r.out).toMatch(
      /a\.jsonl:4 client c \[20, 30\] read\(\) -> 1 \(returned first\) {2}<- impossible from state 2/,
    );
  });

  it('checks counters and IDs', async () => {
    const c = file('c.jsonl', rec('incr', 'n', 1, 1, 0, 1), rec('incr', 'n', 1, 1, 2, 3));
    expect((await run('--model', 'counter', c)).code).toBe(EXIT_ILLEGAL);
    const ids = file('i.jsonl', rec('issue', '', null, '10', 0, 1), rec('issue', '', null, '5', 2, 3));
    expect((await run('--model', 'unique-ids', ids)).code).toBe(EXIT_OK);
    const inc = await run('--model', 'increasing-ids', ids);
    expect(inc.code).toBe(EXIT_ILLEGAL);
    expect(inc.out).toContain('is not greater than ID 10');
  });

  it('exits 2 when the time budget runs out', async () => {
    const records = [];
    for (let i = 0; i < 3000; i++) records.push(rec('write', 'k', i, null, i, 1e6));
    records.push(rec('read', 'k', null, -1, 1e6 + 1, 1e6 + 2));
    const r = await run('--model', 'kv', '--timeout-ms', '50', file('h.jsonl', ...records));
    expect(r.code).toBe(EXIT_UNKNOWN);
    expect(r.out).toContain('UNKNOWN');
  });

  it('exits 3 with a clear message on bad usage or input', async () => {
    expect((await run('--model', 'queue', 'x')).err).toMatch(/--model must be one of kv, counter/);
    expect((await run('--model', 'kv')).err).toMatch(/no history files given/);
    expect((await run('--model', 'kv', '--timeout-ms', '0', 'x')).err).toMatch(
      /--timeout-ms must be a positive/,
    );
    expect((await run('--bogus')).code).toBe(EXIT_USAGE);
    const missing = await run('--model', 'kv', join(dir, 'missing.jsonl'));
    expect(missing.code).toBe(EXIT_USAGE);
    expect(missing.err).toContain('ENOENT');
    const bad = await run('--model', 'kv', file('bad.jsonl', rec('cas', 'k', 5, true, 0, 1)));
    expect(bad.code).toBe(EXIT_USAGE);
    expect(bad.err).toMatch(/bad\.jsonl:1: cas input must be/);
  });

  it('runs as a process through tsx and exits 1 on an illegal history', async () => {
    const h = file('h.jsonl', rec('write', 'k', 1, null, 0, 10), rec('read', 'k', null, 2, 20, 30));
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/check/cli.ts', '--model', 'kv', h], {
      cwd: join(import.meta.dirname, '..', '..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(EXIT_ILLEGAL);
    expect(out).toContain('NOT LINEARIZABLE');
  });
});
