import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { runCaptured } from './run-captured.js';

const run = (env: Record<string, string>, ...argv: string[]) => runCaptured(argv, env);

/** A port nothing listens on (listen on 0, read it, close). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe('host:port in the CLI: one parser, errors name the argument', () => {
  it('accepts [::1]:7001 as a peer address and https:// endpoints; refuses what is not HOST:PORT with exit 2', async () => {
    const port = await closedPort();
    // Valid arguments get as far as dialling the endpoint (nothing listens there).
    const ok = await run({}, 'cluster', 'add', '4', '[::1]:7001', '--endpoint', `127.0.0.1:${port}`);
    expect(ok.stderr).toMatch(/cannot reach Floe at http:\/\/127\.0\.0\.1:\d+/);
    const https = await run({}, 'cluster', 'status', '--endpoint', `https://127.0.0.1:${port}`);
    expect(https.stderr).toMatch(/cannot reach Floe at https:\/\/127\.0\.0\.1:\d+/);

    const unbracketed = await run({}, 'cluster', 'add', '4', '::1:7001', '--endpoint', `127.0.0.1:${port}`);
    expect(unbracketed.code).toBe(2);
    expect(unbracketed.stderr).toContain(
      '<peer-addr> must be HOST:PORT (IPv6 as [ADDR]:PORT), got "::1:7001": an IPv6 address needs brackets: [::1]:7001',
    );
    const noPort = await run({}, 'cluster', 'status', '--endpoint', '127.0.0.1');
    expect(noPort.code).toBe(2);
    expect(noPort.stderr).toContain(
      '--endpoint must be HOST:PORT (IPv6 as [ADDR]:PORT), got "127.0.0.1": the port is missing',
    );
    const badPort = await run({}, 'user', 'list', '--endpoint', 'localhost:99999');
    expect(badPort.code).toBe(2);
    expect(badPort.stderr).toContain('got "localhost:99999": the port 99999 is not in 1..65535');
    const missingCa = await run(
      { FLOE_TLS_CA: '/nonexistent/ca.pem' },
      'user',
      'list',
      '--endpoint',
      `https://127.0.0.1:${port}`,
    );
    expect(missingCa.code).toBe(2);
    expect(missingCa.stderr).toContain('FLOE_TLS_CA=/nonexistent/ca.pem: cannot read the file (ENOENT)');
  });
});
