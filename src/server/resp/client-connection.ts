import { bugOn } from '../../testing/bug-switches.js';
import type { CommandContext, ServerState, Session } from './command.js';
import { dispatch, dispatchRepeats } from './dispatch.js';
import { OutWriter, type ProtocolVersion } from './encode.js';
import { ProtocolError, RequestParser } from './parser.js';
import { R, type Reply } from './reply.js';

/**
 * The part of `net.Socket` a connection uses (a `net.Socket` or `tls.TLSSocket` is one). The full simulator drives
 * connections over its virtual network with an implementation of its own (src/sim/full/resp-link.ts).
 */
export interface RespSocket {
  readonly remoteAddress?: string | undefined;
  readonly remotePort?: number | undefined;
  readonly localAddress?: string | undefined;
  readonly localPort?: number | undefined;
  readonly writableLength: number;
  readonly writable: boolean;
  readonly destroyed: boolean;
  setNoDelay(noDelay?: boolean): unknown;
  /** Idle timeout: emit 'timeout' after `ms` without activity (0: off). */
  setTimeout(ms: number): unknown;
  write(data: Uint8Array): unknown;
  end(): unknown;
  destroy(): unknown;
  pause(): unknown;
  resume(): unknown;
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'drain' | 'timeout' | 'end' | 'close', listener: () => void): unknown;
}

/**
 * The clocks a connection reads: `monotonicMs` stamps a request's arrival (`arrivedAt`, compared with the sequence
 * service's ReadIndex rounds, which must read the same clock), `wallMs` its introspection times (CLIENT LIST).
 */
export interface ConnectionClock {
  monotonicMs(): number;
  wallMs(): number;
}

/** Copies of one command answered together at most (bounds the replies queued before the output limit is checked). */
const MAX_REPEATS = 1024;

const systemConnectionClock: ConnectionClock = {
  monotonicMs: () => performance.now(),
  wallMs: () => Date.now(),
};

/** Hooks the server gives each connection (events for tests and metrics; bookkeeping on close). */
export interface ConnectionHooks {
  onPaused(c: ClientConnection, reason: 'output' | 'input'): void;
  onResumed(c: ClientConnection): void;
  onClosed(c: ClientConnection, reason: CloseReason): void;
}

export type CloseReason =
  | 'client'
  | 'quit'
  | 'protocol-error'
  | 'idle'
  | 'server-close'
  | 'socket-error'
  | 'output-limit'
  | 'request-timeout';

/**
 * One client: parses its requests one at a time, runs each to completion before starting the next (so replies
 * come back in request order and every command sees the effects of the ones before it, even when handlers are
 * asynchronous), and batches the replies of a pipeline into one socket write.
 *
 * Backpressure: it stops executing commands (and so stops reading) while the socket holds more than
 * `maxOutputBytes` unsent, and stops reading while more than `readHighWaterBytes` wait to be parsed behind a
 * command in progress; memory per client is therefore bounded whatever the client does.
 */
export class ClientConnection implements Session {
  proto: ProtocolVersion = 2;
  name = '';
  libName = '';
  libVer = '';
  user: string | undefined = undefined;
  authenticated = false;
  arrivedAt: number | undefined = undefined;
  readonlyMode = false;
  readonly channels = new Set<string>();
  readonly patterns = new Set<string>();
  readonly remoteAddress: string;
  readonly localAddress: string;
  readonly createdAt: number;
  lastInteraction: number;
  lastCommand = '';

  private readonly parser: RequestParser;
  private readonly out = new OutWriter();
  private readonly ctx: CommandContext;
  /** An asynchronous command is running; nothing else is parsed until it completes. */
  private busy = false;
  /** No more commands: QUIT, a protocol error, or the socket is going away. */
  private closing = false;
  private closeAfterThisReply = false;
  private waitingForDrain = false;
  private readPaused = false;
  private closeTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private flushScheduled = false;
  /** Inside `pump`: pushes are batched with the replies and flushed at its end. */
  private pumping = false;
  /** A `repeat` answered none of the copies it was offered: no more tries until the next read. */
  private repeatsRefused = false;
  /** The arguments of the asynchronous command in progress (its copies may be answered with it). */
  private asyncArgs: Buffer[] | undefined;
  /** The client half-closed: finish its pipeline, then close. */
  private peerEnded = false;
  private closeReason: CloseReason | undefined;
  /** Armed while the client is paused for output: it must read within `outputStallTimeoutMs`. */
  private stallTimer: NodeJS.Timeout | undefined;
  /** Armed while an incomplete request waits for its remaining bytes (`requestTimeoutMs`). */
  private requestTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly id: number,
    private readonly socket: RespSocket,
    private readonly server: ServerState,
    private readonly hooks: ConnectionHooks,
    private readonly clock: ConnectionClock = systemConnectionClock,
  ) {
    this.createdAt = clock.wallMs();
    this.lastInteraction = this.createdAt;
    this.remoteAddress = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? 0}`;
    this.localAddress = `${socket.localAddress ?? '?'}:${socket.localPort ?? 0}`;
    this.parser = new RequestParser(server.limits);
    this.ctx = { session: this, server };
    this.updatePreAuthLimits();
    socket.setNoDelay(true);
    this.armIdleTimer();
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('drain', () => this.onDrain());
    socket.on('timeout', () => this.onIdle());
    socket.on('end', () => {
      // The server allows half-open sockets so that a client that sends and then shuts down its side
      // (`printf ... | nc`) still gets every reply, including those of asynchronous commands.
      this.peerEnded = true;
      this.pump();
    });
    socket.on('error', (err) => {
      this.server.logger.debug({ err, client: this.id }, 'RESP client socket error');
      this.finish('socket-error');
    });
    socket.on('close', () => this.finish('client'));
  }

  // Session methods used by commands.

  closeAfterReply(): void {
    this.closeAfterThisReply = true;
  }

  sendPush(r: Reply): void {
    if (this.closed || this.closing) return;
    this.out.reply(r, this.proto);
    // Inside a pump the batch is flushed at its end; otherwise write now.
    if (!this.pumping) this.flush();
    else this.checkOutputHardLimit();
  }

  subscriptionsChanged(): void {
    this.armIdleTimer();
  }

  queryBufferBytes(): number {
    return this.parser.bufferedBytes;
  }

  outputBufferBytes(): number {
    return this.socket.writableLength + this.out.length;
  }

  get isPaused(): boolean {
    return this.readPaused;
  }

  /** Close now (server shutdown). */
  destroy(): void {
    this.closing = true;
    this.socket.destroy();
    this.finish('server-close');
  }

  // Input.

  private onData(chunk: Buffer): void {
    this.lastInteraction = this.clock.wallMs();
    this.arrivedAt = this.clock.monotonicMs();
    this.repeatsRefused = false;
    if (this.closing) return; // draining a closing socket: discard
    this.parser.push(chunk);
    this.pump();
  }

  /** Run every complete command, in order, until input runs out, a command goes async, or output is full. */
  private pump(): void {
    if (this.busy || this.closing || this.closed) {
      this.updateReading();
      return;
    }
    this.pumping = true;
    const maxOut = this.server.limits.maxOutputBytes;
    try {
      for (;;) {
        if (this.socket.writableLength + this.out.length > maxOut) {
          this.flush();
          if (this.socket.writableLength > maxOut) {
            this.waitingForDrain = true;
            this.armStallTimer();
            break;
          }
        }
        const cmd = this.parser.next();
        if (cmd === undefined) break;
        if (cmd instanceof ProtocolError) {
          this.protocolError(cmd);
          return;
        }
        this.server.counters.totalCommands++;
        const r = dispatch(this.ctx, cmd.args);
        if (r instanceof Promise) {
          this.busy = true;
          this.asyncArgs = cmd.args;
          r.then(
            (reply) => this.complete(reply),
            // dispatch never rejects; this is a last line of defence.
            (err: unknown) =>
              this.complete(R.error(`ERR ${err instanceof Error ? err.message : String(err)}`)),
          );
          break;
        }
        this.out.reply(r, this.proto);
        this.afterCommand();
        if (this.closing) return;
        if (r.kind !== 'error') this.answerRepeats(cmd.args);
      }
    } finally {
      this.pumping = false;
    }
    // Waiting on an asynchronous command: its reply (and those after it, if they complete within the same turn,
    // as a pipeline of INCRs sharing one ReadIndex round does) joins what is queued here in one write at the end
    // of the turn, instead of one write per reply.
    if (this.busy) this.scheduleFlush();
    else this.flush();
    if (this.peerEnded && !this.busy && !this.waitingForDrain) {
      this.gracefulClose('client');
      return;
    }
    this.updateRequestTimer();
    this.updateReading();
  }

  /**
   * Bytes left in the parser, or a multibulk request begun (its parts so far consumed, so nothing is buffered: a
   * client that stops right after a CRLF, finding FS-18), after a pump that is neither waiting for a command nor for
   * the socket are an incomplete request: it must be completed within `requestTimeoutMs` (a slowloris client is cut).
   */
  private get requestBegun(): boolean {
    return this.parser.bufferedBytes > 0 || this.parser.midRequest;
  }

  private updateRequestTimer(): void {
    const ms = this.server.limits.requestTimeoutMs;
    const partial = !this.busy && !this.waitingForDrain && this.requestBegun;
    if (!partial || ms === 0 || bugOn('resp-no-request-timeout')) {
      if (this.requestTimer) clearTimeout(this.requestTimer);
      this.requestTimer = undefined;
      return;
    }
    if (this.requestTimer) return; // the clock runs from the request's first bytes
    this.requestTimer = setTimeout(() => {
      this.requestTimer = undefined;
      if (this.closing || this.busy || this.waitingForDrain || !this.requestBegun) return;
      this.server.counters.requestTimeoutClosed++;
      this.server.counters.errorReplies++;
      this.server.logger.info(
        { client: this.id, addr: this.remoteAddress, bufferedBytes: this.parser.bufferedBytes },
        `closing RESP client ${this.remoteAddress}: request not completed within ${ms} ms`,
      );
      this.out.reply(R.error(`ERR request not completed within ${ms} ms (requestTimeoutMs)`), this.proto);
      this.gracefulClose('request-timeout');
    }, ms);
    this.requestTimer.unref();
  }

  private armStallTimer(): void {
    const ms = this.server.limits.outputStallTimeoutMs;
    if (ms === 0 || this.stallTimer) return;
    this.stallTimer = setTimeout(() => {
      this.stallTimer = undefined;
      if (this.closed || !this.waitingForDrain) return;
      this.dropForOutput(`its replies did not drain for ${ms} ms (outputStallTimeoutMs): it is not reading`);
    }, ms);
    this.stallTimer.unref();
  }

  private clearStallTimer(): void {
    if (this.stallTimer) clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
  }

  private complete(reply: Reply): void {
    this.busy = false;
    const args = this.asyncArgs;
    this.asyncArgs = undefined;
    if (this.closed) return;
    this.out.reply(reply, this.proto);
    this.afterCommand();
    if (this.closing) return;
    if (args !== undefined && reply.kind !== 'error') this.answerRepeats(args);
    this.pump(); // flushes (now, or at the end of this turn while a later command runs)
  }

  /**
   * Copies of the command just answered (same bytes, already received: a pipeline of `INCR key`) answered together
   * when the command has a `repeat` that can; otherwise they stay in the parser and run one by one.
   */
  private answerRepeats(args: Buffer[]): void {
    if (this.repeatsRefused) return;
    const n = this.parser.repeatsOfLast(MAX_REPEATS);
    if (n === 0) return;
    const replies = dispatchRepeats(this.ctx, args, n);
    if (replies.length === 0) {
      // Not again for the bytes already read (each try compares the copies ahead: a run refused copy after copy
      // would cost its length squared).
      this.repeatsRefused = true;
      return;
    }
    this.parser.skipRepeats(replies.length);
    this.server.counters.totalCommands += replies.length;
    this.out.replies(replies, this.proto);
    this.afterCommand();
  }

  /**
   * Flush at the end of this turn of the event loop (process.nextTick runs once the microtask queue is empty):
   * replies of commands that complete through promise callbacks alone go out in one write.
   */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    process.nextTick(this.scheduledFlush);
  }

  private readonly scheduledFlush = (): void => {
    this.flushScheduled = false;
    if (!this.closed && !this.closing) this.flush();
  };

  private afterCommand(): void {
    this.updatePreAuthLimits();
    if (this.closeAfterThisReply) this.gracefulClose('quit');
  }

  private protocolError(err: ProtocolError): void {
    this.server.counters.protocolErrors++;
    this.server.counters.errorReplies++;
    this.server.logger.debug(
      { client: this.id, addr: this.remoteAddress, error: err.message },
      'RESP protocol error',
    );
    this.out.reply(R.error(`ERR ${err.message}`), this.proto);
    this.gracefulClose('protocol-error');
  }

  /** Before authentication, Redis's smaller request limits apply (a stranger cannot make us buffer 1 MiB). */
  private updatePreAuthLimits(): void {
    const l = this.server.limits;
    this.parser.preAuth =
      !this.authenticated && this.server.backend.authRequired()
        ? { maxArgs: l.unauthenticatedMaxArgs, maxBulkBytes: l.unauthenticatedMaxBulkBytes }
        : undefined;
  }

  // Output.

  private flush(): void {
    const bytes = this.out.take();
    if (bytes && this.socket.writable) this.socket.write(bytes);
    this.checkOutputHardLimit();
  }

  /** Redis's client-output-buffer-limit (hard): a client this far behind is dropped, never buffered for. */
  private checkOutputHardLimit(): void {
    if (this.closed) return;
    const pending = this.outputBufferBytes();
    const limit = this.server.limits.maxOutputHardBytes;
    if (pending <= limit) return;
    this.dropForOutput(
      `${pending} reply bytes wait to be sent, over the hard limit of ${limit} (maxOutputHardBytes)`,
    );
  }

  private dropForOutput(why: string): void {
    this.server.counters.outputLimitClosed++;
    this.server.logger.warn(
      { client: this.id, addr: this.remoteAddress, outputBytes: this.outputBufferBytes() },
      `closing RESP client ${this.remoteAddress}: client-output-buffer-limit: ${why}`,
    );
    this.closing = true;
    this.closeReason = 'output-limit';
    this.out.take();
    this.socket.destroy();
  }

  private onDrain(): void {
    this.lastInteraction = this.clock.wallMs();
    if (!this.waitingForDrain) return;
    this.waitingForDrain = false;
    this.clearStallTimer();
    this.pump();
  }

  /** Read only while there is room: not while waiting for the socket to drain, nor past the read high-water mark. */
  private updateReading(): void {
    if (this.closed || this.closing) return;
    const shouldPause =
      this.waitingForDrain ||
      (this.busy && this.parser.bufferedBytes > this.server.limits.readHighWaterBytes);
    if (shouldPause && !this.readPaused) {
      this.readPaused = true;
      this.socket.pause();
      this.server.counters.backpressurePauses++;
      this.hooks.onPaused(this, this.waitingForDrain ? 'output' : 'input');
    } else if (!shouldPause && this.readPaused) {
      this.readPaused = false;
      this.socket.resume();
      this.hooks.onResumed(this);
    }
  }

  // Closing.

  /**
   * Send what is queued, half-close, keep reading (and discarding) so the client sees our reply and FIN rather
   * than a reset, and destroy the socket after `closeGraceMs` if the client does not close it first.
   */
  private gracefulClose(reason: CloseReason): void {
    if (this.closing) return;
    this.closing = true;
    this.closeReason = reason;
    this.flush();
    this.socket.end();
    if (this.readPaused) {
      this.readPaused = false;
      this.socket.resume();
    }
    this.closeTimer = setTimeout(() => this.socket.destroy(), this.server.limits.closeGraceMs);
    this.closeTimer.unref();
  }

  private armIdleTimer(): void {
    const ms = this.server.limits.idleTimeoutMs;
    const subscribed = this.channels.size > 0 || this.patterns.size > 0;
    this.socket.setTimeout(ms > 0 && !subscribed ? ms : 0);
  }

  private onIdle(): void {
    if (this.busy || this.closing || this.channels.size > 0 || this.patterns.size > 0) return;
    this.server.counters.idleClosed++;
    this.server.logger.debug({ client: this.id, addr: this.remoteAddress }, 'closing idle RESP client');
    this.closing = true;
    this.closeReason = 'idle';
    this.socket.destroy();
  }

  private finish(reason: CloseReason): void {
    if (this.closed) return;
    this.closed = true;
    this.closing = true;
    if (this.closeTimer) clearTimeout(this.closeTimer);
    if (this.requestTimer) clearTimeout(this.requestTimer);
    this.clearStallTimer();
    this.socket.setTimeout(0);
    if (!this.socket.destroyed) this.socket.destroy();
    this.hooks.onClosed(this, this.closeReason ?? reason);
  }
}
