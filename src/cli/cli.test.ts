import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { decode, PRESETS, ShortCodec } from '../id/index.js';
import { runCaptured } from './run-captured.js';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

const run = (...argv: string[]) => runCaptured(argv);

/** Run the real entry point in a child process (node + tsx, as `npx tsx src/cli/main.ts` does). */
function spawnCli(...argv: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...argv], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, FLOE_SHORT_CODE_SECRET: '' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('floe CLI (spawned)', () => {
  it('decode prints the parts of a twitter ID', async () => {
    const r = await spawnCli('decode', '1541815603606036480', '--layout', 'twitter');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('time        2022-06-28T16:07:40.105Z');
    expect(r.stdout).toMatch(/datacenter\s+11\n/);
    expect(r.stdout).toMatch(/worker\s+26\n/);
    expect(r.stdout).toMatch(/sequence\s+0\n/);
  });

  it('bad input exits 2 with a one-line error and no stack trace', async () => {
    const r = await spawnCli('gen', '--worker', '5000', '--layout', 'twitter');
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe('floe: error: --worker must be an integer in [0, 31], got "5000"\n');
  });

  it('gen prints increasing IDs for the requested worker', async () => {
    const r = await spawnCli('gen', '--count', '5', '--worker', '7', '--json');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { ids: string[]; layout: string };
    expect(out.layout).toBe('floe');
    const ids = out.ids.map(BigInt);
    expect(ids.length).toBe(5);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    expect(ids.every((id) => decode(id, 'floe').worker === 7)).toBe(true);
  });
});

describe('floe decode', () => {
  it('--json gives every part', async () => {
    const r = await run('decode', '0x1565a11f6217a000', '--layout', 'twitter', '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      id: '1541815603606036480',
      hex: '0x1565a11f6217a000',
      layout: 'twitter',
      time: '2022-06-28T16:07:40.105Z',
      timestamp: 1656432460105,
      datacenter: 11,
      worker: 26,
      sequence: 0,
    });
  });

  it('defaults to the floe layout', async () => {
    const r = await run('decode', '4194304', '--json');
    expect(JSON.parse(r.stdout)).toMatchObject({
      layout: 'floe',
      time: '2026-01-01T00:00:00.001Z',
      worker: 0,
    });
  });

  it('decodes short codes with --short', async () => {
    const id = 117853770414555136n;
    const code = new ShortCodec({ secret: 'abc' }).encode(id);
    const r = await run('decode', code, '--short', '--secret', 'abc', '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).id).toBe(id.toString());
    const wrong = await run('decode', code, '--short', '--secret', 'other');
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(/^floe: error: invalid short code/);
  });

  it('refuses non-numeric and out-of-range ids and unknown layouts with exit 2', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['decode', 'abc'], /^floe: error: id must be a decimal or 0x-hex integer, got "abc"\n$/],
      [['decode', '-5'], /error/],
      [
        ['decode', '9223372036854775808'],
        /^floe: error: invalid id "9223372036854775808": larger than 2\^63 - 1/,
      ],
      [
        ['decode', '1', '--layout', 'nope'],
        /^floe: error: unknown layout "nope"; known layouts: floe, twitter/,
      ],
      [['decode'], /missing required argument 'id'/],
    ];
    for (const [argv, message] of cases) {
      const r = await run(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    }
  });
});

describe('floe layouts', () => {
  it('lists every preset with bits, unit, epoch, limits and end of life', async () => {
    const r = await run('layouts');
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(
      /^NAME\s+BITS ts\/dc\/wk\/seq\s+ORDER\s+UNIT\s+EPOCH\s+MAX WORKERS\s+IDS\/S PER WORKER\s+RUNS OUT$/,
    );
    expect(lines.find((l) => l.startsWith('twitter'))).toMatch(
      /^twitter\s+41\/5\/5\/12\s+node-sequence\s+1 ms\s+2010-11-04T01:42:54.657Z\s+1,024\s+4,096,000\s+2080-07-10T17:30:30.209Z$/,
    );
    expect(lines.find((l) => l.startsWith('sonyflake'))).toMatch(
      /39\/0\/16\/8\s+sequence-node\s+10 ms.*65,536\s+25,600/,
    );
    expect(lines.length).toBe(1 + Object.keys(PRESETS).length);
  });

  it('--json', async () => {
    const r = await run('layouts', '--json');
    const rows = JSON.parse(r.stdout) as Array<{ name: string; idsPerSecond: number; endOfLife: string }>;
    expect(rows.map((x) => x.name)).toEqual(['floe', 'twitter', 'sonyflake', 'baidu']);
    expect(rows[2]).toMatchObject({ name: 'sonyflake', idsPerSecond: 25_600, maxWorkers: 65_536 });
    expect(rows[3]!.endOfLife).toBe(new Date(PRESETS.baidu.endOfLifeMs).toISOString());
  });
});

describe('floe gen', () => {
  it('prints one decimal ID per line by default', async () => {
    const r = await run('gen', '--count', '3', '--layout', 'twitter', '--worker', '3', '--datacenter', '4');
    expect(r.code).toBe(0);
    const ids = r.stdout.trim().split('\n').map(BigInt);
    expect(ids.length).toBe(3);
    expect(ids.map((id) => decode(id, 'twitter')).map((p) => [p.datacenter, p.worker])).toEqual([
      [4, 3],
      [4, 3],
      [4, 3],
    ]);
  });

  it('prints hex and short formats', async () => {
    const hex = await run('gen', '--count', '2', '--format', 'hex');
    expect(hex.stdout).toMatch(/^0x[0-9a-f]{16}\n0x[0-9a-f]{16}\n$/);
    const short = await run('gen', '--count', '2', '--format', 'short', '--secret', 's3');
    const codes = short.stdout.trim().split('\n');
    const codec = new ShortCodec({ secret: 's3' });
    const ids = codes.map((c) => codec.decode(c));
    expect(ids[1]! > ids[0]!).toBe(true);
  });

  it('writes large counts in order', async () => {
    const r = await run('gen', '--count', '10000');
    const ids = r.stdout.trim().split('\n').map(BigInt);
    expect(ids.length).toBe(10_000);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
  });

  it('refuses bad options with exit 2, naming the option and range', async () => {
    const cases: Array<[string[], string]> = [
      [['gen', '--count', '0'], 'floe: error: --count must be an integer in [1, 10000000], got "0"\n'],
      [['gen', '--count', 'ten'], 'floe: error: --count must be an integer in [1, 10000000], got "ten"\n'],
      [['gen', '--worker', '1024'], 'floe: error: --worker must be an integer in [0, 1023], got "1024"\n'],
      [['gen', '--datacenter', '1'], 'floe: error: --datacenter must be an integer in [0, 0], got "1"\n'],
      [['gen', '--format', 'oct'], 'floe: error: --format must be one of dec, hex, short, got "oct"\n'],
      [['gen', '--layout', 'Baidu'], ''],
    ];
    for (const [argv, message] of cases) {
      const r = await run(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      if (message) expect(r.stderr).toBe(message);
    }
    // baidu ran out in 2024: the generator refuses, naming the date.
    const baidu = await run('gen', '--layout', 'baidu');
    expect(baidu.stderr).toMatch(/^floe: error: layout baidu ran out of time on 2024-11-20T21:24:16.000Z/);
  });

  it('unknown commands and options exit 2; --help exits 0', async () => {
    expect((await run('frobnicate')).code).toBe(2);
    expect((await run('gen', '--bogus')).code).toBe(2);
    const help = await run('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/decode.*\n.*layouts.*\n.*gen/s);
  });
});

describe('floe serve: listener limits from the --config file', () => {
  it('reads the limit keys of the config file, checks them naming the flag, and lets a flag win', async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const file = join(mkdtempSync(join(tmpdir(), 'floe-cli-')), 'serve.json');
    writeFileSync(file, JSON.stringify({ respMaxClientsPerIp: 'lots' }));
    const bad = await run('serve', '--config', file);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--resp-max-clients-per-ip must be a non-negative integer \(got "lots"\)/);
    // The flag beats the file: with a good flag the bad file value is never read (the next error is another one).
    writeFileSync(file, JSON.stringify({ respMaxClientsPerIp: 'lots', httpAddr: 'nonsense' }));
    const flagWins = await run('serve', '--config', file, '--resp-max-clients-per-ip', '10');
    expect(flagWins.code).toBe(2);
    expect(flagWins.stderr).not.toMatch(/resp-max-clients-per-ip/);
  });
});
