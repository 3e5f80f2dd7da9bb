import { crc32c } from '@node-rs/crc32';
import type { NodeId, SnapshotMessage } from '../raft/types.js';
import { messageToTuple, pack, TupleReader, tupleToMessage, unpack } from './codec.js';
import { ProtocolError, TransportError } from './errors.js';
import { encodeFrame, encodeFrameHeader, encodeFrameTrailer, FrameKind } from './frame.js';
import type { FramedSocket } from './framed-socket.js';
import { defaultTimers, type TimerHandle, type TransportTimers } from './timers.js';

/**
 * Snapshot streaming over a dedicated connection (channel "snap"), so a large snapshot never sits in
 * front of heartbeats on the message connection:
 *
 *   dialer → listener  SNAP_BEGIN [snap message with empty data, totalBytes, crc32c(data)]
 *   dialer → listener  SNAP_CHUNK u32 offsetHigh | u32 offsetLow | bytes       (in order, repeated)
 *   listener → dialer  SNAP_ACK   [bytesReceived]                               (after each chunk)
 *   listener → dialer  SNAP_DONE  [ok, reason]                                 (once; then close)
 *
 * The dialer keeps at most CHUNK_WINDOW chunks unacknowledged, which bounds the memory either side
 * holds in socket buffers and keeps the connection's silence detector honest while the listener is
 * busy. The listener refuses a snapshot larger than maxSnapshotBytes before allocating anything.
 */
export const CHUNK_WINDOW = 4;
const OFFSET_BYTES = 8;

export interface SnapshotSendParams {
  conn: FramedSocket;
  msg: SnapshotMessage;
  chunkBytes: number;
  /** The stream fails when the listener is silent this long. */
  idleTimeoutMs: number;
  /** Default Node's global timers. */
  timers?: TransportTimers;
}

/** Thrown (as a rejection) when the listener reports failure in SNAP_DONE. */
export class SnapshotRefusedError extends TransportError {
  constructor(reason: string) {
    super('ERR_SNAPSHOT_REFUSED', `the peer refused the snapshot: ${reason}`);
  }
}

/**
 * Streams one snapshot on an authenticated snap connection. Resolves when the listener confirms it
 * received, verified and delivered it; rejects otherwise. Always closes the connection.
 */
export function streamSnapshot(p: SnapshotSendParams): Promise<void> {
  const { conn, msg, chunkBytes } = p;
  const data = msg.snapshot.data;
  const total = data.length;
  return new Promise<void>((resolve, reject) => {
    let sent = 0;
    let acked = 0;
    let settled = false;
    let idle: TimerHandle | undefined;
    const timers = p.timers ?? defaultTimers;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      timers.clearTimeout(idle);
      conn.endGracefully();
      if (err) reject(err);
      else resolve();
    };
    const armIdle = () => {
      timers.clearTimeout(idle);
      idle = timers.setTimeout(
        () =>
          conn.close(
            new TransportError('ERR_SNAPSHOT_TIMEOUT', `the peer was silent for ${p.idleTimeoutMs} ms`),
          ),
        p.idleTimeoutMs,
      );
    };
    conn.onClose((cause) =>
      finish(cause ?? new TransportError('ERR_SNAPSHOT_CLOSED', 'connection closed before the outcome')),
    );

    const pump = () => {
      if (settled || conn.isClosed) return;
      const socket = conn.socket;
      socket.cork();
      while (sent < total && sent - acked < CHUNK_WINDOW * chunkBytes) {
        const n = Math.min(chunkBytes, total - sent);
        const head = encodeFrameHeader(FrameKind.snapChunk, OFFSET_BYTES + n);
        const offset = Buffer.allocUnsafe(OFFSET_BYTES);
        offset.writeUInt32BE(Math.floor(sent / 2 ** 32), 0);
        offset.writeUInt32BE(sent % 2 ** 32, 4);
        conn.write(Buffer.concat([head, offset]));
        // A view of the caller's bytes: no copy of the snapshot is made on the sending side.
        const chunk = data.subarray(sent, sent + n);
        conn.write(chunk);
        conn.write(encodeFrameTrailer(FrameKind.snapChunk, offset, chunk));
        sent += n;
      }
      socket.uncork();
    };

    conn.setHandler((kind, payload) => {
      armIdle();
      if (kind === FrameKind.snapAck) {
        const t = new TupleReader(unpack(payload), 'snapAck');
        t.length(1);
        const received = t.uint(0, 'received');
        if (received > sent || received < acked) {
          throw new ProtocolError(`snapAck: ${received} bytes acknowledged; expected ${acked}..${sent}`);
        }
        acked = received;
        pump();
        return;
      }
      if (kind === FrameKind.snapDone) {
        const t = new TupleReader(unpack(payload), 'snapDone');
        t.length(2);
        const ok = t.bool(0, 'ok');
        const reason = t.string(1, 'reason', 200);
        finish(ok ? undefined : new SnapshotRefusedError(reason));
        return;
      }
      throw new ProtocolError(`unexpected frame kind ${kind} on a snapshot stream`);
    });

    armIdle();
    const begin = pack([messageToTuple(msg, true), total, crc32c(data) >>> 0]);
    conn.write(encodeFrame(FrameKind.snapBegin, begin));
    pump();
  });
}

export interface SnapshotReceiveParams {
  conn: FramedSocket;
  peer: NodeId;
  selfId: NodeId;
  maxSnapshotBytes: number;
  /** Hands the reassembled message to the core. */
  deliver(msg: SnapshotMessage): void;
  /** Outcome, for stats and logs. */
  onOutcome(ok: boolean, reason: string, bytes: number): void;
}

/**
 * The listener's side of one snapshot stream: checks the announced size against maxSnapshotBytes,
 * reassembles chunks strictly in order into one buffer, verifies length and crc32c, then delivers
 * the message. Any deviation answers SNAP_DONE [false, reason] and ends the connection.
 */
export function receiveSnapshot(p: SnapshotReceiveParams): void {
  const { conn } = p;
  let header: { msg: SnapshotMessage; total: number; crc: number } | undefined;
  let buffer: Buffer | undefined;
  let received = 0;
  let done = false;

  const conclude = (ok: boolean, reason: string) => {
    done = true;
    buffer = undefined;
    p.onOutcome(ok, reason, header?.total ?? 0);
    conn.write(encodeFrame(FrameKind.snapDone, pack([ok, reason])));
    conn.endGracefully();
  };

  const complete = () => {
    const h = header!;
    const data = buffer!;
    if (crc32c(data) >>> 0 !== h.crc)
      return conclude(false, 'crc32c mismatch: the data was corrupted in transit');
    const msg: SnapshotMessage = { ...h.msg, snapshot: { metadata: h.msg.snapshot.metadata, data } };
    p.deliver(msg);
    conclude(true, '');
  };

  conn.onClose((cause) => {
    if (!done && header) {
      done = true;
      buffer = undefined;
      p.onOutcome(
        false,
        cause?.message ?? 'the connection closed before the snapshot was complete',
        header.total,
      );
    }
  });

  conn.setHandler((kind, payload) => {
    // After a refusal the dialer may still have chunks in flight (it pipelines up to CHUNK_WINDOW):
    // they are expected, and ignored while the connection winds down.
    if (done) return;
    if (header === undefined) {
      if (kind !== FrameKind.snapBegin)
        throw new ProtocolError(`expected SNAP_BEGIN, got frame kind ${kind}`);
      const t = new TupleReader(unpack(payload), 'snapBegin');
      t.length(3);
      const msg = tupleToMessage(t.array(0, 'message'));
      const total = t.uint(1, 'totalBytes');
      const crc = t.uint(2, 'crc32c');
      if (msg.type !== 'snap') throw new ProtocolError(`snapBegin: message type ${msg.type}; expected snap`);
      if (crc > 0xffffffff) throw new ProtocolError(`snapBegin: crc32c ${crc} is not a 32-bit value`);
      if (msg.from !== p.peer || msg.to !== p.selfId) {
        throw new ProtocolError(
          `snapBegin: snapshot from ${msg.from} to ${msg.to} on a connection authenticated as ${p.peer} → ${p.selfId}`,
        );
      }
      header = { msg, total, crc };
      if (total > p.maxSnapshotBytes) {
        return conclude(
          false,
          `snapshot of ${total} bytes exceeds this node's limit of ${p.maxSnapshotBytes} (maxSnapshotBytes)`,
        );
      }
      buffer = Buffer.allocUnsafe(total);
      if (total === 0) complete();
      return;
    }
    if (kind !== FrameKind.snapChunk) throw new ProtocolError(`expected SNAP_CHUNK, got frame kind ${kind}`);
    if (payload.length <= OFFSET_BYTES) throw new ProtocolError('snapChunk: no data after the offset');
    const offset = payload.readUInt32BE(0) * 2 ** 32 + payload.readUInt32BE(4);
    const n = payload.length - OFFSET_BYTES;
    if (offset !== received)
      throw new ProtocolError(`snapChunk: offset ${offset}; expected ${received} (chunks are in order)`);
    if (received + n > header.total) {
      throw new ProtocolError(`snapChunk: ${received + n} bytes would exceed the announced ${header.total}`);
    }
    payload.copy(buffer!, received, OFFSET_BYTES);
    received += n;
    conn.write(encodeFrame(FrameKind.snapAck, pack([received])));
    if (received === header.total) complete();
  });
}
