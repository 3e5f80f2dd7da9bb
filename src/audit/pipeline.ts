/**
 * The audit pipeline: channel → batches → ClickHouse, spilling to local files when ClickHouse is slow
 * or down and replaying them, in order, when it is back (docs/audit.md).
 *
 * Modes:
 * - `direct`: batches are inserted into ClickHouse. A failed insert spills that batch and enters
 *   `spilling`.
 * - `spilling`: batches go to the spill; ClickHouse is probed every `retryMs` (doubling up to
 *   `maxRetryMs`). When it answers, `replaying`.
 * - `replaying`: the spill's files are inserted oldest first (each deleted once all of its frames are
 *   in); then `direct`. A failure goes back to `spilling`.
 * - `embedded`: no ClickHouse configured: every batch goes to rotating spill-format files under
 *   `spillDir`, shipped later with `floe audit replay --dir DIR --to URL`.
 *
 * `emit` never awaits and never throws. With the memory channel full, an event is written to the
 * spill synchronously; with the spill at its bound it is counted in `dropped` (metric
 * floe_audit_events_dropped_total) and the `alarm` is raised — never silently.
 */
import { EventEmitter } from 'node:events';
import type { Registry } from 'prom-client';
import type { UnsupportedLockPolicy } from '../storage/lock-file.js';
import { AuditChannel } from './channel.js';
import { type ClickHouseAuditOptions, ClickHouseAuditSink } from './clickhouse-sink.js';
import { type AuditEvent, auditEventToRow, pluginRecordToEvent } from './events.js';
import { registerAuditMetrics } from './metrics.js';
import { corruptionMessage, insertSpillContent, type ReplayFileResult } from './replay.js';
import { SpillStore } from './spill.js';

export interface AuditLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** Loud by default: errors and warnings to stderr. */
export const stderrAuditLogger: AuditLogger = {
  info() {},
  warn: (obj, msg) => process.stderr.write(`floe audit: warning: ${msg ?? ''} ${JSON.stringify(obj)}\n`),
  error: (obj, msg) => process.stderr.write(`floe audit: ERROR: ${msg ?? ''} ${JSON.stringify(obj)}\n`),
};

export interface AuditPipelineOptions {
  /** Where events go. Absent: the embedded default (files under spillDir). */
  clickhouse?: ClickHouseAuditOptions;
  /** Spill directory (with ClickHouse) or the embedded files' directory (without). */
  spillDir: string;
  /** Where the spill directory cannot be kernel-locked: refuse (default) or the PID rule (see SpillOptions). */
  unsupportedLock?: UnsupportedLockPolicy;
  /** Take an old-format (bare-PID) LOCK in the spill directory instead of refusing it (see SpillOptions). */
  takeLegacyLock?: boolean;
  /** Memory bound of the channel, in events. Default 100,000. */
  maxQueued?: number;
  /** Rows per INSERT (and per spill frame). Default 10,000. */
  batchSize?: number;
  /** A partial batch is sent after this long (ms). Default 1,000. */
  flushIntervalMs?: number;
  /** Bound on the spill files' total size (bytes). Default 1 GiB. */
  spillMaxBytes?: number;
  /** Size at which a spill file is closed and a new one started (bytes). Default 16 MiB. */
  spillFileBytes?: number;
  /** First retry after ClickHouse failed (ms), doubling up to maxRetryMs. Defaults 500 / 5,000. */
  retryMs?: number;
  maxRetryMs?: number;
  logger?: AuditLogger;
  /** prom-client registry for floe_audit_* metrics. */
  metrics?: Registry;
}

export type AuditMode = 'direct' | 'spilling' | 'replaying' | 'embedded';

export interface AuditAlarm {
  kind: 'spill_full' | 'spill_error' | 'corrupt_spill' | 'invalid_event';
  message: string;
  /** For corrupt_spill: the file and byte offset refused. */
  file?: string;
  offset?: number;
}

export interface AuditStats {
  mode: AuditMode;
  emitted: number;
  queued: number;
  inserted: number;
  spilled: number;
  replayed: number;
  dropped: number;
  invalid: number;
  alarms: number;
  insertFailures: number;
  spillBytes: number;
  spillMaxBytes: number;
  spillFiles: number;
  spillFull: boolean;
  corruptFiles: string[];
  lastError?: string;
}

export interface AuditPipeline {
  /** Queue an event: synchronous, never awaits, never throws. */
  emit(event: AuditEvent): void;
  /** The strategies' audit plugin sink: `auditPlugin(pipeline.sink, ...)`. */
  readonly sink: { record(event: Record<string, unknown>): void };
  /** Resolves once every event emitted before the call is in ClickHouse or fsynced in the spill. */
  flush(): Promise<void>;
  /**
   * Flush, then (with ClickHouse) wait until nothing is left in memory or in the spill and inserts go
   * straight to ClickHouse again. Waits as long as ClickHouse is down: bound it with a timeout.
   */
  settled(): Promise<void>;
  /** Flush, stop the background writer, close files and the ClickHouse client. */
  close(): Promise<void>;
  stats(): AuditStats;
  on(event: 'alarm', listener: (a: AuditAlarm) => void): AuditPipeline;
  on(event: 'mode', listener: (m: AuditMode) => void): AuditPipeline;
  off(event: 'alarm' | 'mode', listener: (...a: never[]) => void): AuditPipeline;
}

/** Create and start a pipeline (opens the spill directory, takes stock of files left by a previous run). */
export async function createAuditPipeline(o: AuditPipelineOptions): Promise<AuditPipeline> {
  const batchSize = o.batchSize ?? 10_000;
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new Error(`audit batchSize must be an integer >= 1, got ${o.batchSize}`);
  const flushIntervalMs = o.flushIntervalMs ?? 1000;
  const retryMs = o.retryMs ?? 500;
  const maxRetryMs = o.maxRetryMs ?? 5000;
  const log = o.logger ?? stderrAuditLogger;
  const events = new EventEmitter();
  const spill = new SpillStore({
    dir: o.spillDir,
    maxBytes: o.spillMaxBytes,
    fileBytes: o.spillFileBytes,
    unsupportedLock: o.unsupportedLock,
    takeLegacyLock: o.takeLegacyLock,
    onWarning: (m) => log.warn({ spillDir: o.spillDir }, m),
  });
  await spill.open();
  const ch = o.clickhouse ? new ClickHouseAuditSink(o.clickhouse) : undefined;

  let mode: AuditMode = ch ? (spill.hasData() ? 'spilling' : 'direct') : 'embedded';
  const s = {
    inserted: 0,
    spilled: 0,
    replayed: 0,
    dropped: 0,
    invalid: 0,
    alarms: 0,
    insertFailures: 0,
    corruptFiles: [] as string[],
    lastError: undefined as string | undefined,
  };
  let spillFull = false;
  let lastDropLogMs = 0;
  let processed = 0; // queued events the pump has finished with
  let nextRetryAt = 0;
  let retryDelay = retryMs;
  let closing = false;

  const alarm = (a: AuditAlarm) => {
    s.alarms++;
    log.error({ kind: a.kind, file: a.file, offset: a.offset }, a.message);
    try {
      events.emit('alarm', a);
    } catch (err) {
      log.error({ err: String(err) }, 'audit alarm listener threw');
    }
  };
  const setMode = (m: AuditMode) => {
    if (m === mode) return;
    mode = m;
    log.warn({ mode: m }, `audit pipeline mode: ${m}`);
    try {
      events.emit('mode', m);
    } catch {}
  };

  const noteDropped = (n: number, why: string) => {
    s.dropped += n;
    const now = Date.now();
    if (!spillFull) {
      spillFull = true;
      alarm({
        kind: 'spill_full',
        message: `audit spill at its bound (${spill.totalBytes} of ${spill.maxBytes} bytes in ${spill.dir}): new events are DROPPED and counted in floe_audit_events_dropped_total (${why})`,
      });
      lastDropLogMs = now;
    } else if (now - lastDropLogMs >= 10_000) {
      lastDropLogMs = now;
      log.error({ dropped: s.dropped }, `audit spill still full: ${s.dropped} events dropped so far`);
    }
  };
  const checkSpillRoom = () => {
    if (spillFull && spill.totalBytes < spill.maxBytes * 0.9) {
      spillFull = false;
      log.warn({ spillBytes: spill.totalBytes }, 'audit spill has room again: events are kept again');
    }
  };

  const toLines = (evs: AuditEvent[]): string[] => {
    const lines: string[] = [];
    for (const e of evs) {
      try {
        lines.push(JSON.stringify(auditEventToRow(e)));
      } catch (err) {
        s.invalid++;
        alarm({ kind: 'invalid_event', message: `audit event refused: ${(err as Error).message}` });
      }
    }
    return lines;
  };

  // Overflow: the channel is full. Synchronous write to the spill (fsync follows within 50 ms).
  const overflow = (e: AuditEvent) => {
    const lines = toLines([e]);
    if (lines.length === 0) return;
    let ok = false;
    try {
      ok = spill.appendSync(lines);
    } catch (err) {
      s.lastError = String(err);
      noteDropped(1, `spill write failed: ${(err as Error).message}`);
      return;
    }
    if (ok) s.spilled++;
    else noteDropped(1, 'memory channel full too');
  };

  const channel = new AuditChannel({
    maxQueued: o.maxQueued,
    overflow,
    onError: (err) => {
      s.lastError = String(err);
      log.error({ err: String(err) }, 'audit emit failed');
    },
  });

  const spillLines = async (lines: string[]) => {
    if (lines.length === 0) return;
    try {
      if (await spill.append(lines)) s.spilled += lines.length;
      else noteDropped(lines.length, 'ClickHouse unavailable and the spill is full');
    } catch (err) {
      s.lastError = String(err);
      alarm({
        kind: 'spill_error',
        message: `audit spill write failed in ${spill.dir}: ${(err as Error).message}`,
      });
      noteDropped(lines.length, 'spill write failed');
    }
  };

  const failed = (err: unknown) => {
    s.insertFailures++;
    s.lastError = err instanceof Error ? err.message : String(err);
    if (mode !== 'spilling')
      log.error(
        { err: s.lastError },
        'audit insert into ClickHouse failed: spilling to disk until it is back',
      );
    setMode('spilling');
    ch?.forgetVersion();
    nextRetryAt = Date.now() + retryDelay;
    retryDelay = Math.min(retryDelay * 2, maxRetryMs);
  };

  // Replay spill files oldest first. Returns true when the spill is empty and mode is direct.
  const replay = async (): Promise<boolean> => {
    if (!ch) return false;
    for (;;) {
      await spill.drainWrites();
      spill.rotate();
      const files = spill.pendingFiles();
      if (files.length === 0) {
        setMode('direct');
        retryDelay = retryMs;
        checkSpillRoom();
        return true;
      }
      for (const file of files) {
        if (closing) return false; // the rest stays on disk for the next start or `floe audit replay`
        const content = await spill.read(file);
        let r: ReplayFileResult;
        try {
          r = await insertSpillContent(ch, content, batchSize, async () => {
            // Keep the channel from overflowing while a long backlog replays.
            if (channel.size > channel.maxQueued / 2) await spillLines(toCount(channel.take(batchSize)));
          });
        } catch (err) {
          failed(err);
          return false;
        }
        s.replayed += r.rows;
        if (r.corruption) {
          const to = await spill.quarantine(file);
          s.corruptFiles.push(to);
          alarm({
            kind: 'corrupt_spill',
            file,
            offset: r.corruption.offset,
            message: corruptionMessage(r.corruption, to),
          });
        } else await spill.remove(file);
        checkSpillRoom();
      }
    }
  };
  const toCount = (evs: AuditEvent[]) => {
    processed += evs.length;
    return toLines(evs);
  };

  let flushRequested = false;
  let inflight: Promise<void> = Promise.resolve();
  const pump = async () => {
    for (;;) {
      if (!closing && !flushRequested) {
        const untilProbe = mode === 'spilling' ? Math.max(1, nextRetryAt - Date.now()) : flushIntervalMs;
        await channel.wait(batchSize, Math.min(flushIntervalMs, untilProbe));
      }
      // One INSERT may be in flight while the next batch is serialised; anything that looks at the
      // mode or the spill waits for it first.
      if (mode !== 'direct' || spill.hasData()) await inflight;
      if (mode === 'spilling' && ch && Date.now() >= nextRetryAt) {
        let up = false;
        try {
          up = await ch.ping();
        } catch {}
        if (up) setMode('replaying');
        else failed(new Error(s.lastError ?? 'ClickHouse ping failed'));
      }
      // Overflow (channel full) writes to the spill in any mode: once the channel is back under half
      // its bound, ship that too (direct mode does not look at the spill otherwise).
      if (mode === 'direct' && spill.hasData() && channel.size <= channel.maxQueued / 2) setMode('replaying');
      if (mode === 'replaying') await replay();
      const evs = channel.take(batchSize);
      if (evs.length > 0) {
        const lines = toLines(evs);
        await inflight; // its failure switches the mode, and this batch then spills too
        if (mode === 'direct' && ch && lines.length > 0) {
          const sink = ch;
          inflight = (async () => {
            try {
              await sink.insertPayload(`${lines.join('\n')}\n`, lines.length);
              s.inserted += lines.length;
            } catch (err) {
              failed(err);
              await spillLines(lines);
            }
            processed += evs.length;
            checkSpillRoom();
          })();
        } else {
          await spillLines(lines);
          processed += evs.length;
          checkSpillRoom();
        }
      }
      if (channel.size === 0) {
        await inflight;
        flushRequested = false;
        if (flushWaiters.length > 0) {
          await spill.sync();
          for (let i = flushWaiters.length - 1; i >= 0; i--) {
            const w = flushWaiters[i]!;
            if (processed >= w.target) {
              flushWaiters.splice(i, 1);
              w.resolve();
            }
          }
        }
        if (closing) return;
      }
    }
  };
  const flushWaiters: { target: number; resolve: () => void }[] = [];
  const running = pump().catch((err) => {
    s.lastError = String(err);
    alarm({ kind: 'spill_error', message: `audit pipeline stopped on an unexpected error: ${String(err)}` });
  });

  let closed = false;
  const emit = (e: AuditEvent) => {
    if (!closed) {
      channel.emit(e);
      return;
    }
    // Nothing drains the channel any more: count it, loudly, rather than queue it for no one.
    s.dropped++;
    if (s.dropped === 1 || Date.now() - lastDropLogMs >= 10_000) {
      lastDropLogMs = Date.now();
      log.error({ dropped: s.dropped }, 'audit event emitted after close(): dropped');
    }
  };

  const stats = (): AuditStats => ({
    mode,
    emitted: channel.emitted,
    queued: channel.size,
    ...s,
    corruptFiles: [...s.corruptFiles],
    spillBytes: spill.totalBytes,
    spillMaxBytes: spill.maxBytes,
    spillFiles: spill.pendingFiles().length + (spill.hasData() ? 1 : 0),
    spillFull,
  });
  if (o.metrics) registerAuditMetrics(o.metrics, stats);

  const flush = async () => {
    const target = channel.emitted - channel.overflowed; // events that entered the queue
    if (processed >= target && channel.size === 0) return;
    await new Promise<void>((resolve) => {
      flushWaiters.push({ target, resolve });
      flushRequested = true;
      channel.wake();
    });
  };

  const pipeline: AuditPipeline = {
    emit,
    sink: {
      record: (r) => {
        try {
          emit(pluginRecordToEvent(r));
        } catch (err) {
          s.invalid++;
          alarm({ kind: 'invalid_event', message: `audit plugin record refused: ${(err as Error).message}` });
        }
      },
    },
    flush,
    settled: async () => {
      await flush();
      if (!ch) return;
      await new Promise<void>((resolve) => {
        const check = () => {
          if (mode === 'direct' && !spill.hasData()) {
            events.off('mode', check);
            resolve();
          }
        };
        events.on('mode', check);
        check();
      });
    },
    close: async () => {
      if (closed) return;
      closing = true;
      channel.wake();
      await running;
      closed = true;
      await spill.close();
      await ch?.close();
    },
    stats,
    on: (ev: string, l: (...a: never[]) => void) => {
      events.on(ev, l as (...a: unknown[]) => void);
      return pipeline;
    },
    off: (ev, l) => {
      events.off(ev, l as (...a: unknown[]) => void);
      return pipeline;
    },
  };
  return pipeline;
}
