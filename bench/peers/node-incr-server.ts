/**
 * The ceiling of a Node.js RESP server on this machine, for `npm run bench:standalone`: it answers every INCR with
 * the next integer and does nothing else (no RESP parsing beyond counting commands, no keys, no Raft, no
 * persistence, no metrics). Whatever Floe does per INCR comes on top of this process's cost, so Floe's ratio to redis
 * cannot exceed this server's. Usage: `node --import tsx bench/peers/node-incr-server.ts <port> [workers]`; prints
 * `ready <pid>...`. With workers > 1 it runs in that many processes sharing the port (`serve-workers.ts`).
 */
import { createServer } from 'node:net';
import { serveWorkers } from './serve-workers.js';

const STAR = 0x2a;
const LF = 0x0a;
let counter = 0;

const server = createServer((socket) => {
  socket.setNoDelay(true);
  let atLineStart = true; // kept across reads: a read may end exactly at a line's end
  socket.on('data', (buf: Buffer) => {
    // redis-benchmark sends each INCR as one RESP array: a '*' that starts a line starts a command.
    let commands = 0;
    for (let i = 0; i < buf.length; i++) {
      const b = buf[i]!;
      if (b === STAR && atLineStart) commands++;
      atLineStart = b === LF;
    }
    if (commands === 0) return;
    let out = '';
    for (let k = 0; k < commands; k++) out += `:${++counter}\r\n`;
    socket.write(out);
  });
  socket.on('error', () => socket.destroy());
});
serveWorkers(Number(process.argv[3] ?? 1), (done) =>
  server.listen(Number(process.argv[2]), '127.0.0.1', done),
);
