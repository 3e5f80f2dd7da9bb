import { FrameDecoder } from './frame.js';
import type { PeerSocket } from './socket-factory.js';
import { defaultTimers, type TransportTimers } from './timers.js';

export type FrameHandler = (kind: number, payload: Buffer) => void;

/**
 * A socket that speaks frames. Whatever goes wrong on input — a bad length prefix, a handler that
 * throws on a malformed frame, a socket error — closes this one connection and reports the first
 * cause to `onClose`; nothing propagates to the event loop.
 */
export class FramedSocket {
  private readonly decoder: FrameDecoder;
  private handler: FrameHandler = () => {};
  private closeCause: Error | undefined;
  private closedFlag = false;
  private readonly closeListeners: ((cause: Error | undefined) => void)[] = [];
  /** Resolves once the underlying socket has fully closed (its handle is released). */
  readonly closed: Promise<void>;
  /** now() of the last byte received: dead connections are found by silence, not by write errors. */
  lastReceivedAt: number;

  constructor(
    readonly socket: PeerSocket,
    maxFrameBytes: number,
    private readonly now: () => number,
    private readonly timers: TransportTimers = defaultTimers,
  ) {
    this.decoder = new FrameDecoder(maxFrameBytes);
    this.lastReceivedAt = now();
    socket.setNoDelay(true);
    this.closed = new Promise((resolve) => {
      socket.once('close', () => {
        this.closedFlag = true;
        const cause = this.closeCause;
        for (const l of this.closeListeners.splice(0)) l(cause);
        resolve();
      });
    });
    socket.on('error', (err) => {
      this.closeCause ??= err;
    });
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    // A half-closed peer is of no use to us: end means close.
    socket.on('end', () => this.close());
  }

  /** True once close() was called or the socket went away. */
  get isClosed(): boolean {
    return this.closedFlag || this.socket.destroyed;
  }

  /** Why the connection closed, when it was not a plain close(). */
  get cause(): Error | undefined {
    return this.closeCause;
  }

  setHandler(handler: FrameHandler): void {
    this.handler = handler;
  }

  setMaxFrameBytes(n: number): void {
    this.decoder.maxFrameBytes = n;
  }

  /** Runs after the socket has closed, with the first error seen (if any). Runs at once if already closed. */
  onClose(listener: (cause: Error | undefined) => void): void {
    if (this.closedFlag) listener(this.closeCause);
    else this.closeListeners.push(listener);
  }

  /** Writes one encoded frame. Returns false when the socket's buffer is over its high-water mark. */
  write(frame: Uint8Array): boolean {
    if (this.isClosed) return false;
    return this.socket.write(frame);
  }

  /** Bytes accepted by write() but not yet handed to the kernel. */
  get writableLength(): number {
    return this.socket.writableLength;
  }

  /** Destroys the connection now; `cause` (if any) is what onClose listeners see. Idempotent. */
  close(cause?: Error): void {
    if (cause) this.closeCause ??= cause;
    if (!this.socket.destroyed) this.socket.destroy();
  }

  /** Flushes what was written, then closes (used after a final REJECT or snapshot outcome). */
  endGracefully(cause?: Error): void {
    if (cause) this.closeCause ??= cause;
    if (this.socket.destroyed) return;
    this.socket.end();
    // The peer may never read or close its end; do not let the socket outlive a short grace period.
    const timer = this.timers.setTimeout(() => this.socket.destroy(), 1000);
    timer.unref?.();
    this.socket.once('close', () => this.timers.clearTimeout(timer));
  }

  private onData(chunk: Buffer): void {
    if (this.isClosed) return;
    this.lastReceivedAt = this.now();
    try {
      this.decoder.push(chunk, (kind, payload) => {
        if (!this.isClosed) this.handler(kind, payload);
      });
    } catch (err) {
      this.close(err instanceof Error ? err : new Error(String(err)));
    }
  }
}
