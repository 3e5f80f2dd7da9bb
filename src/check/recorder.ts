// Records a client's calls in the history format of history-file.ts, in memory and/or to a file,
// so that several test processes can each write a file and one checker merges them.

import { closeSync, openSync, writeSync } from 'node:fs';
import { formatRecord, type HistoryRecord } from './history-file.js';

/**
 * Nanoseconds from CLOCK_MONOTONIC. On Linux every process on the machine reads the same clock, so
 * histories from several processes can be merged. Past 2^53 ns (~104 days of uptime) a double
 * rounds to a few ns; order is still never inverted, only ties appear, and ties count as concurrent.
 */
export function monotonicNowNs(): number {
  return Number(process.hrtime.bigint());
}

export interface RecorderOptions {
  /** Append JSON lines to this file (created if missing). Omit to record in memory only. */
  path?: string;
  /** clientId of calls that do not name one. Default `pid-<process.pid>`. */
  clientId?: string | number;
  /** The clock; every merged recorder must share it. Default monotonicNowNs. */
  now?: () => number;
  /**
   * Write an invoke line before each call, so that if this process dies mid-call the call still
   * appears, with an unknown outcome. Default true (only matters with path).
   */
  writeInvokes?: boolean;
  /** Keep completed records in memory for records(). Default: true without path, false with one. */
  keepInMemory?: boolean;
}

/** A call in flight; settle it exactly once. */
export interface PendingCall {
  /** The call returned output. */
  ok(output: unknown): void;
  /** The outcome is unknown (timeout, connection lost): it may or may not have taken effect. */
  unknown(): void;
  /** The call certainly had no effect (e.g. rejected before reaching the state machine). */
  failed(): void;
}

export interface TrackOptions<T> {
  /** What to record as output. Default: the resolved value itself. */
  output?: (value: T) => unknown;
  /** How to record a rejection. Default 'unknown' (the safe choice: the call may have applied). */
  onError?: (err: unknown) => 'unknown' | 'failed';
  clientId?: string | number;
}

export class HistoryRecorder {
  private readonly fd: number | undefined;
  private readonly clientId: string | number;
  private readonly now: () => number;
  private readonly writeInvokes: boolean;
  private readonly memory: HistoryRecord[] | undefined;
  private readonly pending = new Map<number, { record: Omit<HistoryRecord, 'returnTime'>; seq: number }>();
  private seq = 0;
  private closed = false;

  constructor(options: RecorderOptions = {}) {
    this.fd = options.path === undefined ? undefined : openSync(options.path, 'a');
    this.clientId = options.clientId ?? `pid-${process.pid}`;
    this.now = options.now ?? monotonicNowNs;
    this.writeInvokes = options.writeInvokes ?? true;
    this.memory = (options.keepInMemory ?? options.path === undefined) ? [] : undefined;
  }

  /** Note that a call is being sent now. */
  invoke(op: string, key: string, input: unknown, clientId: string | number = this.clientId): PendingCall {
    if (this.closed) throw new Error('HistoryRecorder is closed');
    const seq = this.seq++;
    const record = { clientId, op, key, input, invokeTime: this.now() };
    this.pending.set(seq, { record, seq });
    if (this.writeInvokes) this.write(formatRecord({ type: 'invoke', seq, ...record }));
    let settled = false;
    const settle = (how: 'ok' | 'unknown' | 'failed', output?: unknown) => {
      if (settled) throw new Error(`call #${seq} (${op} ${key}) was already settled`);
      settled = true;
      if (!this.pending.delete(seq) || this.closed) return; // close() already recorded it as unknown
      if (how === 'failed') {
        if (this.writeInvokes) this.write(JSON.stringify({ type: 'failed', clientId, seq }));
        return;
      }
      const returnTime = how === 'ok' ? this.now() : null;
      this.complete({ ...record, output: how === 'ok' ? output : null, returnTime }, seq);
    };
    return {
      ok: (output) => settle('ok', output),
      unknown: () => settle('unknown'),
      failed: () => settle('failed'),
    };
  }

  /** Record fn's call: ok with its value, or per options.onError (default unknown) if it rejects. */
  async track<T>(
    op: string,
    key: string,
    input: unknown,
    fn: () => Promise<T>,
    options: TrackOptions<T> = {},
  ): Promise<T> {
    const call = this.invoke(op, key, input, options.clientId ?? this.clientId);
    try {
      const value = await fn();
      call.ok(options.output ? options.output(value) : value);
      return value;
    } catch (err) {
      if ((options.onError?.(err) ?? 'unknown') === 'failed') call.failed();
      else call.unknown();
      throw err;
    }
  }

  /** Completed records so far (requires keepInMemory); calls still in flight are not included. */
  records(): HistoryRecord[] {
    if (!this.memory) throw new Error('records() needs keepInMemory: true');
    return [...this.memory];
  }

  /** Calls still in flight. */
  get inFlight(): number {
    return this.pending.size;
  }

  /** Record every call still in flight as unknown and close the file. Idempotent. */
  close(): void {
    if (this.closed) return;
    for (const { record, seq } of this.pending.values()) {
      this.complete({ ...record, output: null, returnTime: null }, seq);
    }
    this.pending.clear();
    this.closed = true;
    if (this.fd !== undefined) closeSync(this.fd);
  }

  private complete(record: Omit<HistoryRecord, 'source'>, seq: number): void {
    this.memory?.push(record);
    this.write(formatRecord({ ...record, seq }));
  }

  private write(line: string): void {
    // Synchronous: a line is in the kernel before the caller continues, so kill -9 loses nothing
    // already recorded, and lines from one process never interleave.
    if (this.fd !== undefined) writeSync(this.fd, line + '\n');
  }
}
