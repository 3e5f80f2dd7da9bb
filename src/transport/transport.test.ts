import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer, connect as netConnect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { HeartbeatMessage, Message, NodeId, SnapshotMessage } from '../raft/types.js';
import { acceptHandshake } from './accept.js';
import { encodeMessage, messageToTuple, pack, WIRE_VERSION } from './codec.js';
import { dialPeer } from './dial.js';
import { encodeFrame, encodeFrameHeader, FrameDecoder, FrameKind, type FrameKindCode } from './frame.js';
import { FramedSocket } from './framed-socket.js';
import {
  computeProof,
  decodeChallenge,
  decodeHello,
  decodeReject,
  decodeRemovedReject,
  encodeAuth,
  encodeChallenge,
  encodeHello,
  encodeReject,
  encodeRemovedReject,
  HANDSHAKE_MAX_FRAME_BYTES,
  type HandshakeContext,
  newNonce,
  proofMatches,
  secretKey,
} from './handshake.js';
import { defaultSocketFactory, type SocketFactory } from './socket-factory.js';
import {
  plain,
  sampleMessages,
  startCluster,
  startNode,
  TEST_CLUSTER,
  TEST_SECRET,
  type TestNode,
  waitFor,
} from './test-support.js';
import { PeerTransport } from './transport.js';

const started: TestNode[] = [];
const cleanups: (() => Promise<void> | void)[] = [];

async function node(id: NodeId, peers = new Map<NodeId, string>(), extra = {}): Promise<TestNode> {
  const n = await startNode(id, peers, extra);
  started.push(n);
  return n;
}

async function cluster(n: number, extra = {}): Promise<TestNode[]> {
  const nodes = await startCluster(n, extra);
  started.push(...nodes);
  return nodes;
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((n) => n.t.close()));
  for (const c of cleanups.splice(0)) await c();
  // Helpers above close raw sockets and servers without waiting for libuv to release them.
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
});

function heartbeat(from: NodeId, to: NodeId, tag: number): HeartbeatMessage {
  return { type: 'heartbeat', from, to, term: 1, commit: tag, context: new Uint8Array([tag % 256]) };
}

function snapMessage(from: NodeId, to: NodeId, data: Uint8Array, index = 100): SnapshotMessage {
  return {
    type: 'snap',
    from,
    to,
    term: 3,
    snapshot: { metadata: { index, term: 2, conf: { voters: [1, 2, 3], learners: [] } }, data },
  };
}

/** A port nobody listens on (we bind one, note it, release it). */
async function deadPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A raw TCP client that records every frame it receives and when it is closed. */
async function rawClient(port: number) {
  const events = new EventEmitter();
  const socket = netConnect({ host: '127.0.0.1', port });
  const frames: { kind: number; payload: Buffer }[] = [];
  const decoder = new FrameDecoder(1 << 20);
  let closed = false;
  socket.on('data', (c) => {
    decoder.push(c, (kind, payload) => frames.push({ kind, payload }));
    events.emit('change');
  });
  socket.on('error', () => {});
  socket.on('close', () => {
    closed = true;
    events.emit('change');
  });
  await new Promise<void>((r) => socket.once('connect', () => r()));
  cleanups.push(() => {
    socket.destroy();
  });
  return { socket, frames, events, isClosed: () => closed };
}

function helloFrame(
  fields: Partial<{ clusterId: string; dialerId: number; listenerId: number; nonce: Uint8Array }> = {},
) {
  return encodeFrame(
    FrameKind.hello,
    encodeHello({
      version: WIRE_VERSION,
      clusterId: fields.clusterId ?? TEST_CLUSTER,
      dialerId: fields.dialerId ?? 3,
      listenerId: fields.listenerId ?? 2,
      channel: 'msg',
      nonce: fields.nonce ?? newNonce(),
    }),
  );
}

/** Dials `target` as node `as`, with the real secret: a legitimate member that will misbehave. */
async function authenticatedAs(
  as: NodeId,
  target: TestNode,
  channel: 'msg' | 'snap' = 'msg',
): Promise<FramedSocket> {
  const conn = await dialPeer({
    factory: defaultSocketFactory,
    target: target.t.address,
    key: secretKey(TEST_SECRET),
    clusterId: TEST_CLUSTER,
    selfId: as,
    peerId: target.id,
    channel,
    timeoutMs: 5000,
    maxFrameBytes: 4 << 20,
    now: () => performance.now(),
    track: () => {},
  });
  cleanups.push(() => conn.close());
  return conn;
}

/** A listener that authenticates as node `id` and then never reads another byte. */
async function stuckPeer(id: NodeId, knownPeer: NodeId) {
  const events = new EventEmitter();
  let accepted: Socket | undefined;
  const server = createServer((socket) => {
    const conn = new FramedSocket(socket, HANDSHAKE_MAX_FRAME_BYTES, () => performance.now());
    acceptHandshake(conn, {
      key: secretKey(TEST_SECRET),
      clusterId: TEST_CLUSTER,
      selfId: id,
      timeoutMs: 5000,
      maxFrameBytes: 4 << 20,
      isKnownPeer: (p) => p === knownPeer,
      claim: () => true,
      onAccepted: () => {
        socket.pause();
        accepted = socket;
        events.emit('change');
      },
      onRejected: () => {},
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(async () => {
    accepted?.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return {
    addr: `127.0.0.1:${(server.address() as { port: number }).port}`,
    events,
    isAccepted: () => !!accepted,
  };
}

/** A socket factory whose server remembers every accepted socket (so a test can pause one). */
function recordingFactory(accepted: Socket[]): SocketFactory {
  return {
    connect: defaultSocketFactory.connect,
    createServer: (onSocket) =>
      defaultSocketFactory.createServer((s) => {
        accepted.push(s);
        onSocket(s);
      }),
  };
}

const nonSnap = (ms: Message[]) => ms.filter((m) => m.type !== 'snap');

describe('PeerTransport: delivery', () => {
  it('three transports exchange one message of every type, in order per sender', async () => {
    const nodes = await cluster(3);
    for (const a of nodes) for (const b of nodes) if (a !== b) a.t.send(sampleMessages(a.id, b.id));
    await waitFor(
      nodes.flatMap((n) => n.emitters),
      () => nodes.every((n) => n.inbox.length === 2 * 12),
      'every message to arrive',
    );
    for (const b of nodes) {
      for (const a of nodes) {
        if (a === b) continue;
        const got = b.inbox.filter((m) => m.from === a.id);
        expect(plain(nonSnap(got))).toEqual(plain(nonSnap(sampleMessages(a.id, b.id))));
        expect(plain(got.filter((m) => m.type === 'snap'))).toEqual(
          plain(sampleMessages(a.id, b.id).filter((m) => m.type === 'snap')),
        );
      }
      const st = b.t.stats();
      expect(st.rejectedHandshakes).toBe(0);
      expect(st.protocolErrors).toBe(0);
    }
    // Every snap message got exactly one status, all ok.
    await waitFor(
      nodes.flatMap((n) => n.emitters),
      () => nodes.every((n) => n.snapshotStatus.length === 2),
      'snapshot statuses',
    );
    for (const n of nodes) expect(n.snapshotStatus.every((s) => s.ok)).toBe(true);
  });

  it('streams a multi-MB snapshot in chunks and reassembles it byte-exact', async () => {
    // 64 KiB chunks under a 256 KiB frame limit: a 5 MiB snapshot can only arrive if it was chunked.
    const limits = { snapshotChunkBytes: 64 * 1024, maxFrameBytes: 256 * 1024, maxQueueBytes: 256 * 1024 };
    const [a, b] = (await cluster(2, limits)) as [TestNode, TestNode];
    const data = randomBytes(5 * 1024 * 1024 + 12_345);
    a.t.send([snapMessage(1, 2, data)]);
    await waitFor([...a.emitters, ...b.emitters], () => a.snapshotStatus.length === 1, 'the snapshot status');
    expect(a.snapshotStatus).toEqual([{ peer: 2, ok: true }]);
    const got = b.inbox.filter((m): m is SnapshotMessage => m.type === 'snap');
    expect(got).toHaveLength(1);
    expect(Buffer.from(got[0]!.snapshot.data).equals(data)).toBe(true);
    expect(got[0]!.snapshot.metadata).toEqual({
      index: 100,
      term: 2,
      conf: { voters: [1, 2, 3], learners: [] },
    });
    expect(b.t.stats().peers[1]!.snapshotsReceived).toBe(1);
    expect(a.t.stats().peers[2]).toMatchObject({
      snapshotsSent: 1,
      snapshotsFailed: 0,
      snapshotInFlight: false,
    });
  });

  it('keeps heartbeats flowing while a snapshot is stalled, and allows one snapshot in flight per peer', async () => {
    const accepted: Socket[] = [];
    const a = await node(1);
    const b = await node(2, new Map(), { socketFactory: recordingFactory(accepted) });
    a.t.addPeer(2, b.addr);
    b.t.addPeer(1, a.addr);
    const all = [...a.emitters, ...b.emitters];
    await waitFor(
      all,
      () => a.t.stats().peers[2]!.connected && b.t.stats().peers[1]!.inboundConnected,
      'link 1→2',
    );
    // Stall the receiver's snapshot connection as soon as it is authenticated.
    b.t.once('inboundConnected', (_peer, channel) => {
      if (channel === 'snap') accepted.at(-1)!.pause();
    });
    const data = randomBytes(8 * 1024 * 1024);
    a.t.send([snapMessage(1, 2, data)]);
    await waitFor(
      all,
      () => b.t.stats().peers[1]!.snapshotsReceived === 0 && accepted.length === 2,
      'snap connection',
    );
    a.t.send([heartbeat(1, 2, 42)]);
    await waitFor(all, () => b.inbox.some((m) => m.type === 'heartbeat'), 'the heartbeat');
    expect(b.inbox.some((m) => m.type === 'snap')).toBe(false);
    expect(a.t.stats().peers[2]!.snapshotInFlight).toBe(true);
    // A second snapshot while one is in flight is refused at once, with its own status.
    a.t.send([snapMessage(1, 2, new Uint8Array(10), 101)]);
    await waitFor(all, () => a.snapshotStatus.length === 1, 'the refused snapshot status');
    expect(a.snapshotStatus).toEqual([{ peer: 2, ok: false }]);
    accepted.at(-1)!.resume();
    await waitFor(all, () => a.snapshotStatus.length === 2, 'the first snapshot status');
    expect(a.snapshotStatus[1]).toEqual({ peer: 2, ok: true });
    const snap = b.inbox.find((m): m is SnapshotMessage => m.type === 'snap')!;
    expect(snap.snapshot.metadata.index).toBe(100);
    expect(Buffer.from(snap.snapshot.data).equals(data)).toBe(true);
  });

  it('reports ok=false when the receiver refuses an oversized snapshot, and keeps the message link up', async () => {
    const a = await node(1);
    const b = await node(2, new Map(), { maxSnapshotBytes: 1024 * 1024 });
    a.t.addPeer(2, b.addr);
    b.t.addPeer(1, a.addr);
    const all = [...a.emitters, ...b.emitters];
    await waitFor(all, () => a.t.stats().peers[2]!.connected, 'link 1→2');
    let snapClosed = false;
    b.t.on('inboundClosed', (_peer, channel) => {
      if (channel === 'snap') snapClosed = true;
    });
    a.t.send([snapMessage(1, 2, randomBytes(2 * 1024 * 1024))]);
    await waitFor(all, () => a.snapshotStatus.length === 1, 'the snapshot status');
    expect(a.snapshotStatus).toEqual([{ peer: 2, ok: false }]);
    expect(b.inbox).toHaveLength(0);
    await waitFor(all, () => b.t.stats().peers[1]!.snapshotsRejected === 1, 'the rejection to be counted');
    expect(b.logger.has('warn', 'maxSnapshotBytes')).toBe(true);
    // Chunks the sender had in flight when refused are expected: no protocol error once the stream closed.
    await waitFor(all, () => snapClosed, 'the snapshot connection to close');
    expect(b.t.stats().protocolErrors).toBe(0);
    expect(a.t.stats().peers[2]!.snapshotsFailed).toBe(1);
    a.t.send([heartbeat(1, 2, 1)]);
    await waitFor(all, () => b.inbox.length === 1, 'a heartbeat after the refusal');
  });

  it('reports ok=false for a snapshot to a peer nobody listens for', async () => {
    const a = await node(1, new Map([[2, `127.0.0.1:${await deadPort()}`]]), { handshakeTimeoutMs: 2000 });
    a.t.send([snapMessage(1, 2, new Uint8Array(100))]);
    await waitFor(a.emitters, () => a.snapshotStatus.length === 1, 'the snapshot status');
    expect(a.snapshotStatus).toEqual([{ peer: 2, ok: false }]);
  });

  it('keeps a connection when onMessage throws, and counts it', async () => {
    let calls = 0;
    const delivered = new EventEmitter();
    const a = await node(1);
    const b = await node(2, new Map(), {
      onMessage: () => {
        calls++;
        delivered.emit('change');
        if (calls === 1) throw new Error('core bug');
      },
    });
    a.t.addPeer(2, b.addr);
    b.t.addPeer(1, a.addr);
    const all = [...a.emitters, ...b.emitters, delivered];
    await waitFor(all, () => a.t.stats().peers[2]!.connected, 'link');
    a.t.send([heartbeat(1, 2, 1), heartbeat(1, 2, 2)]);
    await waitFor(all, () => b.t.stats().peers[1]!.received === 2, 'both heartbeats');
    expect(calls).toBe(2);
    expect(b.t.stats().deliveryErrors).toBe(1);
    expect(b.logger.has('error', 'core bug')).toBe(true);
  });
});

describe('PeerTransport: handshake', () => {
  async function pairWithSpare(): Promise<[TestNode, TestNode, number]> {
    // b knows peers 1 (a, real) and 3 (nobody yet).
    const spare = await deadPort();
    const [a, b] = (await cluster(2)) as [TestNode, TestNode];
    b.t.addPeer(3, `127.0.0.1:${spare}`);
    return [a, b, spare];
  }

  it('refuses a node with the wrong secret, in both directions, and never delivers its messages', async () => {
    const [, b] = await pairWithSpare();
    const stray = await node(3, new Map([[2, b.addr]]), { secret: 'not-the-cluster-secret!!' });
    b.t.addPeer(3, stray.addr); // b dials the stray too
    const all = [...b.emitters, ...stray.emitters];
    await waitFor(
      all,
      () =>
        b.t.stats().rejectedHandshakes >= 1 &&
        stray.t.stats().rejectedHandshakes >= 1 &&
        stray.t.stats().peers[2]!.dialFailures >= 1 &&
        b.t.stats().peers[3]!.dialFailures >= 1,
      'both sides to refuse each other',
    );
    // Each dialer found out that the listener cannot prove the secret, before sending any Raft data.
    expect(stray.t.stats().peers[2]!.lastError).toMatch(/could not prove it knows the cluster secret/);
    expect(b.t.stats().peers[3]!.lastError).toMatch(/could not prove it knows the cluster secret/);
    stray.t.send([heartbeat(3, 2, 1)]);
    expect(stray.t.stats().peers[2]!.dropped).toBe(1);
    expect(b.inbox).toHaveLength(0);
    expect(stray.inbox).toHaveLength(0);
    expect(b.t.stats().peers[3]!.inboundConnected).toBe(false);
    expect(b.logger.has('warn', 'refused an inbound peer connection')).toBe(true);
  });

  it('answers a wrong proof with REJECT badProof and closes', async () => {
    const [, b] = await pairWithSpare();
    const c = await rawClient(b.t.address.port);
    c.socket.write(helloFrame());
    await waitFor(c.events, () => c.frames.length === 1, 'the challenge');
    expect(c.frames[0]!.kind).toBe(FrameKind.challenge);
    c.socket.write(encodeFrame(FrameKind.auth, encodeAuth(randomBytes(32))));
    await waitFor(c.events, () => c.isClosed(), 'the close');
    expect(c.frames[1]!.kind).toBe(FrameKind.reject);
    expect(b.t.stats().rejectedByReason.badProof).toBe(1);
  });

  it('refuses a wrong cluster id, an unknown node id, a wrong target id and a duplicate claim', async () => {
    const [a, b] = await pairWithSpare();
    const wrongCluster = await node(3, new Map([[2, b.addr]]), { clusterId: 'another-cluster' });
    const unknown = await node(9, new Map([[2, b.addr]]));
    const all = [...b.emitters, ...wrongCluster.emitters, ...unknown.emitters];
    await waitFor(
      all,
      () =>
        !!b.t.stats().rejectedByReason.clusterId &&
        !!b.t.stats().rejectedByReason.unknownNode &&
        wrongCluster.t.stats().peers[2]!.dialFailures > 0 &&
        unknown.t.stats().peers[2]!.dialFailures > 0,
      'both refusals, seen from both sides',
    );
    expect(wrongCluster.t.stats().peers[2]!.lastError).toMatch(/refused the handshake: clusterId/);
    expect(unknown.t.stats().peers[2]!.lastError).toMatch(/refused the handshake: unknownNode/);

    // A raw HELLO addressed to a different node id.
    const c = await rawClient(b.t.address.port);
    c.socket.write(helloFrame({ listenerId: 7 }));
    await waitFor(c.events, () => c.isClosed(), 'the close');
    expect(b.t.stats().rejectedByReason.wrongNode).toBe(1);

    // Node 1 (a) already holds an authenticated message connection: a second claim with the right secret is refused.
    await expect(authenticatedAs(1, b)).rejects.toThrow(/refused the handshake: duplicate/);
    expect(b.t.stats().rejectedByReason.duplicate).toBe(1);
    expect(a.t.stats().peers[2]!.connected).toBe(true);
    a.t.send([heartbeat(1, 2, 5)]);
    await waitFor(b.emitters, () => b.inbox.length === 1, 'the legitimate peer to keep working');
    expect(b.inbox.every((m) => m.from === 1)).toBe(true);
  });

  it('a peer back from a power loss replaces its silent old connection, and a live one is never replaced', async () => {
    // A machine that loses power sends no FIN: its old inbound connection stays open here until the idle timeout
    // (10 s), and its rebooted process dials again. Before the fix every new claim was refused as a duplicate until then.
    let clock = 0;
    const b = await node(2, new Map([[1, `127.0.0.1:${await deadPort()}`]]), {
      now: () => clock,
      keepaliveIntervalMs: 100,
    });
    const old = await authenticatedAs(1, b);
    let oldClosed = false;
    old.onClose(() => {
      oldClosed = true;
      b.events.emit('change');
    });
    old.socket.write(encodeFrame(FrameKind.message, encodeMessage(heartbeat(1, 2, 1))));
    await waitFor(b.emitters, () => b.inbox.length === 1, 'the first process to be heard');
    // Heard 150 ms ago (the clock is b's): a live member's connection, so a second claim is refused.
    clock += 150;
    await expect(authenticatedAs(1, b)).rejects.toThrow(/refused the handshake: duplicate/);
    expect(oldClosed).toBe(false);
    // Silent for more than two keepalive intervals: the power-lost process's connection. The new one replaces it.
    clock += 100;
    const fresh = await authenticatedAs(1, b);
    await waitFor(b.emitters, () => oldClosed, 'the silent connection to be closed');
    expect(b.t.stats().replacedInbound).toBe(1);
    expect(b.logger.has('warn', 'replaces a silent one from the same peer')).toBe(true);
    fresh.socket.write(encodeFrame(FrameKind.message, encodeMessage(heartbeat(1, 2, 2))));
    await waitFor(b.emitters, () => b.inbox.length === 2, 'the new process to be heard');
    expect(b.t.stats().peers[1]!.inboundConnected).toBe(true);
  });

  it('does not deliver a message sent before authentication', async () => {
    const [, b] = await pairWithSpare();
    const c = await rawClient(b.t.address.port);
    const injected = encodeFrame(FrameKind.message, encodeMessage(heartbeat(3, 2, 9)));
    c.socket.write(Buffer.concat([helloFrame(), injected]));
    await waitFor(c.events, () => c.isClosed(), 'the close');
    expect(b.t.stats().rejectedByReason.protocol).toBe(1);
    expect(b.inbox).toHaveLength(0);
  });

  it('times out a silent connection and bounds unauthenticated connections', async () => {
    const b = await node(2, new Map([[1, `127.0.0.1:${await deadPort()}`]]), {
      handshakeTimeoutMs: 200,
      maxPendingHandshakes: 2,
    });
    const c1 = await rawClient(b.t.address.port);
    const c2 = await rawClient(b.t.address.port);
    await waitFor(b.emitters, () => b.t.stats().pendingHandshakes === 2, 'two pending handshakes');
    const c3 = await rawClient(b.t.address.port);
    await waitFor(c3.events, () => c3.isClosed(), 'the third connection to be closed at once');
    expect(b.t.stats().rejectedByReason.busy).toBe(1);
    await waitFor(
      [c1.events, c2.events],
      () => c1.isClosed() && c2.isClosed(),
      'the silent ones to time out',
    );
    expect(b.t.stats().rejectedByReason.timeout).toBe(2);
    expect(b.t.stats().pendingHandshakes).toBe(0);
  });
});

describe('PeerTransport: hostile input', () => {
  it('survives garbage and oversized prefixes before authentication', async () => {
    const [a, b] = (await cluster(2)) as [TestNode, TestNode];
    const garbage = await rawClient(b.t.address.port);
    garbage.socket.write(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    const huge = await rawClient(b.t.address.port);
    huge.socket.write(Buffer.alloc(8, 0xff));
    await waitFor([garbage.events, huge.events], () => garbage.isClosed() && huge.isClosed(), 'both closes');
    expect(b.t.stats().rejectedByReason.protocol).toBe(2);
    a.t.send([heartbeat(1, 2, 1)]);
    await waitFor(b.emitters, () => b.inbox.length === 1, 'the good peer to keep working');
  });

  it('closes an authenticated connection on each kind of bad frame, logs it, and keeps serving the good peer', async () => {
    const [a, b] = (await cluster(2)) as [TestNode, TestNode];
    b.t.addPeer(3, `127.0.0.1:${await deadPort()}`);
    const hb = heartbeat(3, 2, 1);
    const badFrames: [string, Buffer][] = [
      ['oversized length prefix', encodeFrameHeader(FrameKind.message, 4 * 1024 * 1024)], // L = 4 MiB + 1
      ['invalid msgpack', encodeFrame(FrameKind.message, Buffer.from([0xc1, 0xc1]))],
      ['unknown message type', encodeFrame(FrameKind.message, pack([77, 3, 2, 1]))],
      ['missing fields', encodeFrame(FrameKind.message, pack(messageToTuple(hb).slice(0, 5)))],
      ['wrong field type', encodeFrame(FrameKind.message, pack([7, 3, 2, 1, 'x', new Uint8Array(0), null]))],
      ['unknown frame kind', encodeFrame(99 as FrameKindCode, Buffer.from([1]))],
      ['snapshot chunk on a message connection', encodeFrame(FrameKind.snapChunk, Buffer.alloc(20))],
    ];
    let expectedErrors = 0;
    for (const [what, bytes] of badFrames) {
      const conn = await authenticatedAs(3, b);
      await waitFor(b.emitters, () => b.t.stats().peers[3]!.inboundConnected, `inbound for ${what}`);
      conn.socket.write(bytes);
      expectedErrors++;
      await waitFor(b.emitters, () => b.t.stats().protocolErrors === expectedErrors, `close after ${what}`);
      await conn.closed;
      await waitFor(b.emitters, () => !b.t.stats().peers[3]!.inboundConnected, `slot released after ${what}`);
    }
    expect(b.logger.has('error', 'exceeds the limit of 4194304 bytes')).toBe(true);
    expect(b.logger.has('error', 'invalid msgpack')).toBe(true);
    expect(b.logger.has('error', 'unknown type code 77')).toBe(true);
    expect(b.logger.has('error', 'commit must be an integer')).toBe(true);
    expect(b.logger.has('error', 'fields, got 5')).toBe(true);

    // A truncated frame followed by a close: nothing delivered, nothing counted as a message.
    const trunc = await authenticatedAs(3, b);
    trunc.socket.end(encodeFrame(FrameKind.message, encodeMessage(hb)).subarray(0, 10));
    await trunc.closed;

    // A well-formed message whose `from` is not the authenticated peer is dropped; the connection stays.
    const liar = await authenticatedAs(3, b);
    await waitFor(b.emitters, () => b.t.stats().peers[3]!.inboundConnected, 'inbound for the liar');
    liar.socket.write(encodeFrame(FrameKind.message, encodeMessage(heartbeat(1, 2, 66))));
    liar.socket.write(encodeFrame(FrameKind.message, encodeMessage(heartbeat(3, 7, 67))));
    liar.socket.write(encodeFrame(FrameKind.message, encodeMessage(heartbeat(3, 2, 68))));
    await waitFor(b.emitters, () => b.inbox.length === 1, 'the honest message');
    expect(b.inbox[0]).toMatchObject({ from: 3, commit: 68 });
    expect(b.t.stats().peers[3]!.misaddressed).toBe(2);
    expect(liar.isClosed).toBe(false);

    a.t.send([heartbeat(1, 2, 2)]);
    b.t.send([heartbeat(2, 1, 3)]);
    await waitFor(
      [...a.emitters, ...b.emitters],
      () => b.inbox.length === 2 && a.inbox.length === 1,
      'good traffic',
    );
    expect(b.t.stats().peers[1]!.connected).toBe(true);
  });

  it('refuses corrupted, out-of-order and misaddressed snapshot streams', async () => {
    const [, b] = (await cluster(2)) as [TestNode, TestNode];
    b.t.addPeer(3, `127.0.0.1:${await deadPort()}`);
    const data = randomBytes(10_000);
    const begin = (msg: SnapshotMessage, crc: number) =>
      encodeFrame(FrameKind.snapBegin, pack([messageToTuple(msg, true), data.length, crc]));
    const chunk = (offset: number, bytes: Uint8Array) => {
      const head = Buffer.alloc(8);
      head.writeUInt32BE(offset, 4);
      return encodeFrame(FrameKind.snapChunk, Buffer.concat([head, bytes]));
    };
    const outcome = async (frames: Buffer[]) => {
      const conn = await authenticatedAs(3, b, 'snap');
      const replies: number[] = [];
      conn.setHandler((kind) => replies.push(kind));
      for (const f of frames) conn.socket.write(f);
      await conn.closed;
      return replies;
    };
    const good = snapMessage(3, 2, data);

    // Wrong checksum: every byte arrives, the CRC-32C does not match, SNAP_DONE [false].
    const r1 = await outcome([begin(good, 12345), chunk(0, data)]);
    expect(r1.at(-1)).toBe(FrameKind.snapDone);
    expect(b.t.stats().peers[3]!.snapshotsRejected).toBe(1);
    expect(b.logger.has('warn', 'crc32c mismatch')).toBe(true);

    // A chunk at the wrong offset, and a snapshot claiming another sender: protocol errors.
    const before = b.t.stats().protocolErrors;
    await outcome([begin(good, 0), chunk(100, data.subarray(100))]);
    await outcome([begin(snapMessage(1, 2, data), 0)]);
    await waitFor(b.emitters, () => b.t.stats().protocolErrors === before + 2, 'both protocol errors');
    expect(b.logger.has('error', 'offset 100; expected 0')).toBe(true);
    expect(b.logger.has('error', 'snapshot from 1 to 2 on a connection authenticated as 3')).toBe(true);
    expect(b.inbox).toHaveLength(0);
  });

  it('refuses a removed peer and closes its connections', async () => {
    const [a, b] = (await cluster(2)) as [TestNode, TestNode];
    const all = [...a.emitters, ...b.emitters];
    b.t.removePeer(1);
    await waitFor(all, () => !a.t.stats().peers[2]!.connected, 'a to lose its link');
    await waitFor(
      all,
      () => (b.t.stats().rejectedByReason.unknownNode ?? 0) >= 1,
      'a to be refused on redial',
    );
    expect(b.t.stats().peers[1]).toBeUndefined();
    a.t.send([heartbeat(1, 2, 1)]);
    expect(b.inbox).toHaveLength(0);
  });
});

// FS-23: a member that applied the removal of a dialer's id tells it so, in the handshake, under the cluster secret
// (decision 0008). Node 3 is the removed one; node 2 removed it at log index 42.
describe('PeerTransport: the removal verdict (FS-23)', () => {
  const key = secretKey(TEST_SECRET);
  const REMOVED_AT = 42;
  const removedAt = (id: NodeId) => (id === 3 ? REMOVED_AT : undefined);

  /** A dialer that records the verdicts its transport believes. */
  async function dialerOf3(listenerAddr: string) {
    const told: { peer: NodeId; removedAt: number }[] = [];
    const events = new EventEmitter();
    const d = await node(3, new Map([[2, listenerAddr]]), {
      onRemoved: (peer: NodeId, at: number) => {
        told.push({ peer, removedAt: at });
        events.emit('change');
      },
    });
    return { d, told, all: [...d.emitters, events] };
  }

  it('FS-23: a removed dialer is told "removed", with the index, only after its AUTH proof held; it reports it and keeps backing off', async () => {
    const b = await node(2, new Map(), { removedAt });
    // The transcript, as a raw client: no refusal at HELLO, a CHALLENGE as for a peer.
    const c = await rawClient(b.t.address.port);
    const nonce = newNonce();
    c.socket.write(helloFrame({ dialerId: 3, nonce }));
    await waitFor(c.events, () => c.frames.length === 1, 'the challenge');
    expect(c.frames[0]!.kind).toBe(FrameKind.challenge);
    const challenge = decodeChallenge(c.frames[0]!.payload);
    const ctx: HandshakeContext = {
      clusterId: TEST_CLUSTER,
      dialerId: 3,
      listenerId: 2,
      channel: 'msg',
      dialerNonce: nonce,
      listenerNonce: challenge.nonce,
    };
    c.socket.write(encodeFrame(FrameKind.auth, encodeAuth(computeProof(key, 'dialer', ctx))));
    await waitFor(c.events, () => c.isClosed(), 'the verdict and the close');
    expect(c.frames[1]!.kind).toBe(FrameKind.reject);
    expect(decodeReject(c.frames[1]!.payload)).toBe('removed');
    const verdict = decodeRemovedReject(c.frames[1]!.payload);
    expect(verdict.removedAt).toBe(REMOVED_AT);
    expect(proofMatches(key, 'removed', ctx, verdict.proof, { removedAt: REMOVED_AT })).toBe(true);
    // The proof covers the index: it cannot be moved to another one, nor pass as a listener's or dialer's proof.
    expect(proofMatches(key, 'removed', ctx, verdict.proof, { removedAt: REMOVED_AT + 1 })).toBe(false);
    expect(proofMatches(key, 'listener', ctx, verdict.proof)).toBe(false);
    expect(b.t.stats().rejectedByReason.removed).toBe(1);

    // The production dialer believes it, reports it, and redials with the normal backoff.
    const { d, told, all } = await dialerOf3(b.addr);
    await waitFor([...all, ...b.emitters], () => told.length >= 2, 'two verdicts, one per dial');
    expect(told[0]).toEqual({ peer: 2, removedAt: REMOVED_AT });
    expect(d.t.stats().removedVerdicts).toBeGreaterThanOrEqual(2);
    expect(d.t.stats().forgedVerdicts).toBe(0);
    expect(d.t.stats().peers[2]!.state).not.toBe('connected');
    expect(d.t.stats().peers[2]!.lastError).toMatch(/node 2 says this node was removed .*index 42/);
    expect(d.logger.has('warn', 'proved that this node was removed')).toBe(true);
    expect(b.inbox).toHaveLength(0);
  });

  it('FS-23: a removed dialer that fails its AUTH proof never sees "removed"', async () => {
    const b = await node(2, new Map(), { removedAt });
    const c = await rawClient(b.t.address.port);
    c.socket.write(helloFrame({ dialerId: 3 }));
    await waitFor(c.events, () => c.frames.length === 1, 'the challenge');
    c.socket.write(encodeFrame(FrameKind.auth, encodeAuth(randomBytes(32))));
    await waitFor(c.events, () => c.isClosed(), 'the close');
    expect(c.frames.map((f) => f.kind)).toEqual([FrameKind.challenge, FrameKind.reject]);
    expect(decodeReject(c.frames[1]!.payload)).toBe('badProof');
    expect(c.frames[1]!.payload.equals(encodeReject('badProof'))).toBe(true);
    expect(b.t.stats().rejectedByReason.removed).toBeUndefined();

    // A whole transport with the wrong secret, dialling as the removed id: refused, never told.
    const told: number[] = [];
    const stray = await node(3, new Map([[2, b.addr]]), {
      secret: 'not-the-cluster-secret!!',
      onRemoved: (_p: NodeId, at: number) => told.push(at),
    });
    await waitFor(
      [...stray.emitters, ...b.emitters],
      () => stray.t.stats().peers[2]!.dialFailures >= 2,
      'two dials',
    );
    expect(told).toEqual([]);
    expect(b.t.stats().rejectedByReason.removed).toBeUndefined();
  });

  it('FS-23: a stranger that was never removed is still refused at HELLO with unknownNode', async () => {
    const b = await node(2, new Map(), { removedAt });
    const c = await rawClient(b.t.address.port);
    c.socket.write(helloFrame({ dialerId: 9 }));
    await waitFor(c.events, () => c.isClosed(), 'the close');
    expect(c.frames.map((f) => f.kind)).toEqual([FrameKind.reject]);
    expect(decodeReject(c.frames[0]!.payload)).toBe('unknownNode');
    // A removed id that is a peer again (never, as ids are not reused; the peer set wins) is accepted.
    const [x, y] = (await cluster(2, { removedAt: (id: NodeId) => (id === 1 ? 7 : undefined) })) as [
      TestNode,
      TestNode,
    ];
    expect(y.t.stats().peers[1]!.inboundConnected).toBe(true);
    expect(x.t.stats().removedVerdicts).toBe(0);
  });

  /**
   * A listener with the cluster secret that answers AUTH with a verdict it makes up: `how` says what is wrong
   * with it. 'early' answers HELLO with a verdict, before any proof (what anyone could send).
   */
  async function forger(how: 'early' | 'badProof' | 'malformed') {
    const server = createServer((socket) => {
      socket.on('error', () => {});
      const conn = new FramedSocket(socket, HANDSHAKE_MAX_FRAME_BYTES, () => performance.now());
      let ctx: HandshakeContext | undefined;
      conn.setHandler((kind, payload) => {
        if (kind === FrameKind.hello) {
          const hello = decodeHello(payload);
          if (how === 'early') {
            conn.write(encodeFrame(FrameKind.reject, encodeRemovedReject(REMOVED_AT, randomBytes(32))));
            return;
          }
          ctx = {
            clusterId: TEST_CLUSTER,
            dialerId: hello.dialerId,
            listenerId: 2,
            channel: hello.channel,
            dialerNonce: hello.nonce,
            listenerNonce: newNonce(),
          };
          conn.write(
            encodeFrame(
              FrameKind.challenge,
              encodeChallenge(ctx.listenerNonce, computeProof(key, 'listener', ctx)),
            ),
          );
          return;
        }
        if (kind === FrameKind.auth && ctx) {
          const verdict =
            how === 'badProof'
              ? // A real proof, but for another index than the one it claims.
                encodeRemovedReject(
                  REMOVED_AT,
                  computeProof(key, 'removed', ctx, { removedAt: REMOVED_AT - 1 }),
                )
              : pack(['removed', REMOVED_AT]);
          conn.write(encodeFrame(FrameKind.reject, verdict));
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
    return `127.0.0.1:${(server.address() as { port: number }).port}`;
  }

  for (const how of ['early', 'badProof', 'malformed'] as const) {
    it(`FS-23: a verdict that cannot be believed (${how}) is ignored, counted and logged`, async () => {
      const { d, told, all } = await dialerOf3(await forger(how));
      await waitFor(all, () => d.t.stats().forgedVerdicts >= 2, 'two ignored verdicts');
      expect(told).toEqual([]);
      expect(d.t.stats().removedVerdicts).toBe(0);
      expect(d.logger.has('warn', 'ignored a removal verdict')).toBe(true);
      const why = {
        early: /before it proved the cluster secret/,
        badProof: /proof does not hold/,
        malformed: /malformed/,
      };
      expect(d.t.stats().peers[2]!.lastError).toMatch(why[how]);
    });
  }
});

describe('PeerTransport: reconnect, queues and shutdown', () => {
  it('reconnects after the peer restarts on the same port', async () => {
    const [a, b] = (await cluster(2)) as [TestNode, TestNode];
    const port = b.t.address.port;
    await b.t.close();
    await waitFor(a.emitters, () => !a.t.stats().peers[2]!.connected, 'a to notice');
    a.t.send([heartbeat(1, 2, 1)]); // dropped: not connected
    await waitFor(a.emitters, () => a.unreachable.includes(2), 'unreachable to be reported');
    expect(a.t.stats().peers[2]!.dropped).toBeGreaterThanOrEqual(1);

    const b2 = await node(2, new Map([[1, a.addr]]), { listen: { host: '127.0.0.1', port } });
    await waitFor([...a.emitters, ...b2.emitters], () => a.t.stats().peers[2]!.connected, 'a to reconnect');
    expect(a.t.stats().peers[2]!.reconnects).toBe(1);
    a.t.send([heartbeat(1, 2, 2)]);
    await waitFor(b2.emitters, () => b2.inbox.length === 1, 'delivery after the restart');
    expect(b2.inbox[0]).toMatchObject({ type: 'heartbeat', commit: 2 });
    await waitFor(b2.emitters, () => b2.t.stats().peers[1]!.connected, 'b2 to connect to a');
    b2.t.send([heartbeat(2, 1, 3)]);
    await waitFor(a.emitters, () => a.inbox.length === 1, 'the reverse direction');
  });

  it('drops while disconnected and rate-limits unreachable reports', async () => {
    let now = 1000;
    const a = await node(1, new Map([[2, `127.0.0.1:${await deadPort()}`]]), {
      now: () => now,
      unreachableIntervalMs: 100,
    });
    a.t.send(Array.from({ length: 1000 }, (_, i) => heartbeat(1, 2, i)));
    expect(a.t.stats().peers[2]).toMatchObject({ dropped: 1000, queued: 0, sent: 0 });
    await waitFor(a.emitters, () => a.unreachable.length >= 1, 'the first report');
    a.t.send([heartbeat(1, 2, 1)]);
    now += 99;
    a.t.send([heartbeat(1, 2, 1)]);
    await Promise.resolve(); // reports are queued as microtasks; let any that were queued run
    expect(a.unreachable).toEqual([2]);
    now += 1;
    a.t.send([heartbeat(1, 2, 1)]);
    await waitFor(a.emitters, () => a.unreachable.length === 2, 'the next report after the interval');
    // Messages to a node that is not a peer are refused too; a snapshot to one still gets its status.
    a.t.send([heartbeat(1, 5, 1), snapMessage(1, 5, new Uint8Array(1))]);
    expect(a.t.stats().unsendable).toBe(2);
    await waitFor(a.emitters, () => a.snapshotStatus.length === 1, 'the snapshot status');
    expect(a.snapshotStatus).toEqual([{ peer: 5, ok: false }]);
  });

  it('keeps the queue and socket buffer bounded against a peer that stops reading, and reports it unreachable', async () => {
    const stuck = await stuckPeer(2, 1);
    const maxQueueMessages = 64;
    const maxQueueBytes = 64 * 1024;
    const a = await node(1, new Map([[2, stuck.addr]]), {
      maxQueueMessages,
      maxQueueBytes,
      maxFrameBytes: 64 * 1024,
      idleTimeoutMs: 600_000,
    });
    await waitFor([...a.emitters, stuck.events], () => a.t.stats().peers[2]!.connected, 'the handshake');
    const entry = new Uint8Array(1024);
    const msg: Message = {
      type: 'app',
      from: 1,
      to: 2,
      term: 1,
      logIndex: 0,
      logTerm: 0,
      commit: 0,
      entries: [{ type: 'normal', term: 1, index: 1, data: entry }],
    };
    const batch = Array.from({ length: 500 }, () => msg);
    let total = 0;
    let maxSocketBuffered = 0;
    for (let round = 0; round < 200; round++) {
      a.t.send(batch);
      total += batch.length;
      // Let the flush (nextTick) and any 'drain' run; the bounds must hold at every point.
      await new Promise((r) => setImmediate(r));
      const p = a.t.stats().peers[2]!;
      expect(p.queued).toBeLessThanOrEqual(maxQueueMessages);
      expect(p.queuedBytes).toBeLessThanOrEqual(maxQueueBytes);
      maxSocketBuffered = Math.max(maxSocketBuffered, p.socketBufferedBytes);
    }
    const p = a.t.stats().peers[2]!;
    expect(p.connected).toBe(true);
    expect(p.dropped).toBeGreaterThan(0);
    expect(p.sent + p.queued + p.dropped).toBe(total);
    // 100 000 messages of ~1 KiB were offered; what was not dropped fits in the kernel's buffers,
    // the socket's high-water mark plus one frame, and our queue.
    expect(p.sent).toBeLessThan(total / 4);
    expect(maxSocketBuffered).toBeLessThanOrEqual(16 * 1024 + 64 * 1024);
    await waitFor(a.emitters, () => a.unreachable.includes(2), 'onUnreachable');
  });

  it('keeps a busy connection alive with pings, and closes one whose peer falls silent', async () => {
    let now = 0;
    const clock = { now: () => now, keepaliveIntervalMs: 20, idleTimeoutMs: 100 };
    const a = await node(1, new Map(), clock);
    const b = await node(2, new Map(), clock);
    a.t.addPeer(2, b.addr);
    b.t.addPeer(1, a.addr);
    const all = [...a.emitters, ...b.emitters];
    await waitFor(all, () => a.t.stats().peers[2]!.connected, 'link');
    // Continuous traffic for 20 idle timeouts of (fake) time: the link must never be judged dead.
    for (let i = 1; i <= 40; i++) {
      now += 50;
      a.t.send([heartbeat(1, 2, i)]);
      await waitFor(all, () => b.inbox.length === i && a.t.stats().peers[2]!.pongs >= i, `step ${i}`);
    }
    expect(a.t.stats().peers[2]).toMatchObject({ connected: true, reconnects: 0, dropped: 0 });

    // A peer that authenticates and then never reads nor answers is dropped after idleTimeoutMs.
    const stuck = await stuckPeer(3, 1);
    a.t.addPeer(3, stuck.addr);
    await waitFor(
      [...a.emitters, stuck.events],
      () => a.t.stats().peers[3]!.connected,
      'link to the stuck peer',
    );
    // Advance in two steps, with traffic to peer 2 in between, so only the stuck peer is ever
    // silent for longer than idleTimeoutMs (one jump past it would make both look idle).
    now += 60;
    const pongs = a.t.stats().peers[2]!.pongs;
    a.t.send([heartbeat(1, 2, 41)]);
    await waitFor(
      all,
      () => b.inbox.length === 41 && a.t.stats().peers[2]!.pongs > pongs,
      'traffic to peer 2',
    );
    now += 60;
    await waitFor(a.emitters, () => !a.t.stats().peers[3]!.connected, 'the idle close');
    expect(a.t.stats().peers[3]!.lastError).toMatch(/no answer from the peer for 100 ms/);
    expect(a.t.stats().peers[2]!.connected).toBe(true);
  });

  it('close() releases every socket, server and timer, is idempotent, and silences the transport', async () => {
    const before = resourceCounts();
    const nodes = await startCluster(3);
    const [a] = nodes as [TestNode];
    // A snapshot in flight while closing must not leave anything behind either.
    a.t.send([snapMessage(1, 2, randomBytes(3 * 1024 * 1024)), heartbeat(1, 3, 1)]);
    await Promise.all(nodes.map((n) => n.t.close()));
    await Promise.all(nodes.map((n) => n.t.close())); // idempotent
    expect(resourceCounts()).toEqual(before);
    a.t.send([heartbeat(1, 2, 1)]);
    a.t.addPeer(4, '127.0.0.1:1');
    expect(a.t.stats().peers[4]).toBeUndefined();
    expect(a.snapshotStatus).toEqual([]); // no callbacks after close
  });

  it('rejects bad options and a port that is taken', async () => {
    const a = await node(1);
    await expect(
      PeerTransport.start({
        nodeId: 2,
        clusterId: TEST_CLUSTER,
        secret: TEST_SECRET,
        listen: { host: '127.0.0.1', port: a.t.address.port },
        peers: new Map(),
        onMessage: () => {},
      }),
    ).rejects.toThrow(/EADDRINUSE/);
    await expect(
      PeerTransport.start({
        nodeId: 2,
        clusterId: TEST_CLUSTER,
        secret: 'short',
        listen: { host: '127.0.0.1', port: 0 },
        peers: new Map(),
        onMessage: () => {},
      }),
    ).rejects.toThrow(/secret/);
  });
});

function resourceCounts(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) {
    if (r === 'TCPSocketWrap' || r === 'TCPServerWrap' || r === 'Timeout') counts[r] = (counts[r] ?? 0) + 1;
  }
  return counts;
}
