// The fault proxy as its own process, for chaos scripts:
//
//   tsx src/testing/fault-proxy-cli.ts --listen 127.0.0.1:7001 --target 127.0.0.1:6001 [--control 127.0.0.1:0]
//
// On start it prints one JSON line: {"event":"listening","listen":...,"target":...,"control":"http://..."}.
// Control it with the commands of CONTROL_HELP, either as lines on stdin (each answered by a JSON
// line on stdout) or over HTTP on the control address:
//   curl -s -d 'delay 200 50 up' http://127.0.0.1:PORT/      (POST a command)
//   curl -s http://127.0.0.1:PORT/stats                        (GET counters and faults)
// It exits 0 on SIGTERM, SIGINT or the command "exit", closing every connection first.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import {
  applyControlCommand,
  CONTROL_HELP,
  type ControlReply,
  FaultProxy,
  parseHostPort,
} from './fault-proxy.js';

const USAGE = `usage: fault-proxy-cli --listen HOST:PORT --target HOST:PORT [--control HOST:PORT] [--max-buffered-bytes N] [--seed N]
  --control: HTTP control address (default 127.0.0.1:0; "off" to disable)
${CONTROL_HELP}
  exit                                       close everything and exit`;

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(3);
}

let values: Record<string, string | boolean | undefined>;
try {
  ({ values } = parseArgs({
    options: {
      listen: { type: 'string' },
      target: { type: 'string' },
      control: { type: 'string', default: '127.0.0.1:0' },
      'max-buffered-bytes': { type: 'string' },
      seed: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (err) {
  fail((err as Error).message);
}
if (values.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
if (typeof values.listen !== 'string' || typeof values.target !== 'string')
  fail('--listen and --target are required');

let proxy: FaultProxy;
try {
  proxy = await FaultProxy.start({
    listen: values.listen,
    target: values.target,
    ...(values['max-buffered-bytes'] === undefined
      ? {}
      : { maxBufferedBytes: Number(values['max-buffered-bytes']) }),
    ...(values.seed === undefined ? {} : { seed: Number(values.seed) }),
  });
} catch (err) {
  fail(`cannot start: ${(err as Error).message}`);
}

let exiting = false;
async function shutdown(): Promise<void> {
  if (exiting) return;
  exiting = true;
  await proxy.close();
  controlServer?.closeAllConnections();
  controlServer?.close();
  process.exit(0);
}

function handle(line: string): ControlReply | undefined {
  if (line.trim() === '') return undefined;
  if (line.trim() === 'exit') {
    void shutdown();
    return { ok: true };
  }
  return applyControlCommand(proxy, line);
}

let controlServer: http.Server | undefined;
let controlUrl: string | null = null;
if (values.control !== 'off') {
  const { host, port } = (() => {
    try {
      return parseHostPort(String(values.control), 'control');
    } catch (err) {
      return fail((err as Error).message);
    }
  })();
  controlServer = http.createServer((req, res) => {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(`${JSON.stringify(body)}\n`);
    };
    if (req.method === 'GET' && (req.url === '/stats' || req.url === '/')) {
      reply(200, applyControlCommand(proxy, 'stats'));
      return;
    }
    if (req.method !== 'POST') {
      reply(405, { ok: false, error: `use POST with a command as the body, or GET /stats\n${CONTROL_HELP}` });
      return;
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => {
      body += d;
      // A command is a few words; anything longer is a mistake, not a command.
      if (body.length > 4096) req.destroy();
    });
    req.on('end', () => {
      const r = handle(body) ?? { ok: false, error: 'empty command' };
      reply(r.ok ? 200 : 400, r);
    });
  });
  await new Promise<void>((resolve, reject) => {
    controlServer!.once('error', reject);
    controlServer!.listen({ host, port }, resolve);
  }).catch((err: Error) => fail(`cannot open the control port: ${err.message}`));
  const addr = controlServer.address() as AddressInfo;
  controlUrl = `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
}

process.stdout.write(
  `${JSON.stringify({ event: 'listening', listen: proxy.address, target: values.target, control: controlUrl })}\n`,
);

// stdin: one command per line. End of stdin is not a reason to exit (scripts often detach it).
createInterface({ input: process.stdin }).on('line', (line) => {
  const r = handle(line);
  if (r) process.stdout.write(`${JSON.stringify(r)}\n`);
});
process.on('SIGTERM', () => void shutdown());
process.on('SIGINT', () => void shutdown());
