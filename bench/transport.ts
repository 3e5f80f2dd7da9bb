// Peer transport throughput on loopback: two PeerTransports in this one process (so both ends share
// one event loop and the figures are a floor), plus the codec comparison behind src/transport/codec.ts.
//
//   npx tsx bench/transport.ts            (about 10 s)
//
// Not a test: prints figures, asserts nothing about speed.
import { randomBytes } from 'node:crypto';
import { Packr } from 'msgpackr';
import type { AppendMessage, Message } from '../src/raft/types.js';
import { decodeMessage, encodeMessage } from '../src/transport/codec.js';
import { FRAME_HEADER_BYTES, FRAME_TRAILER_BYTES } from '../src/transport/frame.js';
import { PeerTransport } from '../src/transport/index.js';

const SECRET = 'bench-cluster-secret-0123456789';
const ENTRY_BYTES = 64;

function append(entriesPerMessage: number, index: number): AppendMessage {
  return {
    type: 'app',
    from: 1,
    to: 2,
    term: 3,
    logIndex: index,
    logTerm: 3,
    commit: index,
    entries: Array.from({ length: entriesPerMessage }, (_, i) => ({
      type: 'normal' as const,
      term: 3,
      index: index + 1 + i,
      data: randomBytes(ENTRY_BYTES),
    })),
  };
}

function codecComparison(): void {
  console.log('codec: pack + unpack round trips of one append message (64-byte entries), 400 ms each');
  const shared: object[] = [];
  const variants: [string, (m: Message) => Uint8Array, (b: Uint8Array) => unknown][] = [];
  const maps = new Packr({ useRecords: false });
  variants.push(['msgpack maps (useRecords: false)', (m) => maps.pack(m), (b) => maps.unpack(b)]);
  const inline = new Packr({ useRecords: true });
  variants.push(['msgpackr records, inline structures', (m) => inline.pack(m), (b) => inline.unpack(b)]);
  const sharedA = new Packr({ structures: shared });
  const sharedB = new Packr({ structures: shared });
  variants.push(['msgpackr records, shared structures', (m) => sharedA.pack(m), (b) => sharedB.unpack(b)]);
  variants.push(['positional tuples + shape check (used)', (m) => encodeMessage(m), (b) => decodeMessage(b)]);
  for (const entries of [1, 64]) {
    const msg = append(entries, 1000);
    for (const [name, enc, dec] of variants) {
      let n = 0;
      let bytes = 0;
      const t0 = performance.now();
      while (performance.now() - t0 < 400) {
        for (let i = 0; i < 100; i++) {
          const b = enc(msg);
          bytes = b.length;
          dec(b);
        }
        n += 100;
      }
      const perSec = n / ((performance.now() - t0) / 1000);
      console.log(
        `  ${String(entries).padStart(2)} entries  ${name.padEnd(40)} ${String(bytes).padStart(5)} B  ${fmt(perSec)}/s`,
      );
    }
  }
}

async function pair(onMessage: (m: Message) => void): Promise<[PeerTransport, PeerTransport]> {
  const b = await PeerTransport.start({
    nodeId: 2,
    clusterId: 'bench',
    secret: SECRET,
    listen: { host: '127.0.0.1', port: 0 },
    peers: new Map(),
    onMessage,
  });
  const a = await PeerTransport.start({
    nodeId: 1,
    clusterId: 'bench',
    secret: SECRET,
    listen: { host: '127.0.0.1', port: 0 },
    peers: new Map([[2, `127.0.0.1:${b.address.port}`]]),
    onMessage: () => {},
  });
  b.addPeer(1, `127.0.0.1:${a.address.port}`);
  await new Promise<void>((resolve) => {
    const check = () => {
      if (a.stats().peers[2]?.connected) {
        a.off('change', check);
        resolve();
      }
    };
    a.on('change', check);
    check();
  });
  return [a, b];
}

async function streamAppends(entriesPerMessage: number, seconds: number): Promise<void> {
  let received = 0;
  let wake: (() => void) | undefined;
  const window = 2048; // below the default queue bound (4096): nothing is dropped
  const [a, b] = await pair(() => {
    received++;
    if (wake && received % 256 === 0) {
      const w = wake;
      wake = undefined;
      w();
    }
  });
  const msg = append(entriesPerMessage, 1000);
  const wireBytes = encodeMessage(msg).length + FRAME_HEADER_BYTES + FRAME_TRAILER_BYTES;
  let sent = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < seconds * 1000) {
    while (sent - received < window) {
      a.send([msg]);
      sent++;
    }
    await new Promise<void>((resolve) => {
      wake = resolve;
      setImmediate(() => {
        if (sent - received < window / 2) resolve();
      });
    });
  }
  while (received < sent) await new Promise<void>((r) => (wake = r));
  const secs = (performance.now() - t0) / 1000;
  const dropped = a.stats().peers[2]!.dropped;
  const perSec = received / secs;
  console.log(
    `  ${String(entriesPerMessage).padStart(2)} x ${ENTRY_BYTES} B entries/msg  ${fmt(perSec)} msgs/s  ` +
      `${fmt(perSec * entriesPerMessage)} entries/s  ${((perSec * entriesPerMessage * ENTRY_BYTES) / 2 ** 20).toFixed(1)} MB/s entry data  ` +
      `${((perSec * wireBytes) / 2 ** 20).toFixed(1)} MB/s on the wire  (${wireBytes} B/frame, dropped ${dropped})`,
  );
  await Promise.all([a.close(), b.close()]);
}

async function snapshotTransfer(mib: number): Promise<void> {
  let delivered: (() => void) | undefined;
  const [a, b] = await pair((m) => {
    if (m.type === 'snap') delivered?.();
  });
  const data = randomBytes(mib * 2 ** 20);
  const statuses: boolean[] = [];
  const done = new Promise<void>((resolve) => {
    let count = 0;
    delivered = () => {
      if (++count === 1) resolve();
    };
  });
  const t0 = performance.now();
  a.send([
    {
      type: 'snap',
      from: 1,
      to: 2,
      term: 1,
      snapshot: { metadata: { index: 1, term: 1, conf: { voters: [1, 2], learners: [] } }, data },
    },
  ]);
  a.on('snapshotStatus', (_p, ok) => statuses.push(ok));
  await done;
  const secs = (performance.now() - t0) / 1000;
  console.log(
    `  ${mib} MiB snapshot in 1 MiB chunks: ${(mib / secs).toFixed(0)} MB/s (${(secs * 1000).toFixed(0)} ms)`,
  );
  await Promise.all([a.close(), b.close()]);
}

function fmt(n: number): string {
  return n >= 1e6 ? `${(n / 1e6).toFixed(2)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : n.toFixed(0);
}

// Optional argument: run one part only (codec | append1 | append64 | snapshot), e.g. for profiling.
const only = process.argv[2];
if (!only || only === 'codec') codecComparison();
if (!only || only.startsWith('append')) {
  console.log('transport: two PeerTransports on 127.0.0.1, one process, send([msg]) per message, 3 s each');
}
if (!only || only === 'append1') await streamAppends(1, 3);
if (!only || only === 'append64') await streamAppends(64, 3);
if (!only || only === 'snapshot') await snapshotTransfer(64);
