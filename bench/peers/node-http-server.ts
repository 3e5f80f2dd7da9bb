/**
 * The ceiling of a Node.js HTTP server on this machine, for `npm run bench:standalone`: `node:http` answering
 * `GET /api/segment/get/{key}` with the next integer as plain text, as Leaf does, and nothing else (no routing
 * framework, no validation, no Raft). Floe's Leaf path runs Fastify and the sequence service on top of this cost.
 * Usage: `node --import tsx bench/peers/node-http-server.ts <port> [workers]`; prints `ready <pid>...` (with workers
 * > 1, that many processes share the port: `serve-workers.ts`).
 */
import { createServer } from 'node:http';
import { serveWorkers } from './serve-workers.js';

let counter = 0;
const server = createServer((req, res) => {
  if (req.method !== 'GET' || !req.url?.startsWith('/api/segment/get/')) {
    res.writeHead(404).end();
    return;
  }
  const body = String(++counter);
  res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': body.length });
  res.end(body);
});
serveWorkers(Number(process.argv[3] ?? 1), (done) =>
  server.listen(Number(process.argv[2]), '127.0.0.1', done),
);
