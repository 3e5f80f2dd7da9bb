// The history recording format: JSON lines, one file per recording process, merged by the checker.
//
// A complete operation is one line:
//   {"clientId":"c1","op":"write","key":"k","input":5,"output":null,"invokeTime":1200,"returnTime":1350}
// returnTime null means the outcome is unknown (output is then ignored).
//
// A recorder may also write, before the call, an invoke line carrying a per-file sequence number:
//   {"type":"invoke","clientId":"c1","seq":7,"op":"write","key":"k","input":5,"invokeTime":1200}
// and afterwards either the complete line with the same clientId and seq, or
//   {"type":"failed","clientId":"c1","seq":7}
// for a call that certainly had no effect (it is then left out of the history). An invoke line
// with neither (the recording process died mid-call) becomes an operation with an unknown outcome,
// so a kill -9 of the client never loses a write that might have happened.

import { readFile } from 'node:fs/promises';
import type { Operation } from './model.js';

/** One operation as recorded, before a model gives its input and output their types. */
export interface HistoryRecord {
  clientId: string | number;
  /** The operation's name, e.g. 'read', 'write', 'cas', 'incr', 'get', 'issue'. */
  op: string;
  /** The object it touches; '' (or absent) for a single-object history. */
  key?: string;
  input?: unknown;
  output?: unknown;
  /** Same unit and monotonic source for every record being merged (see recorder.ts). */
  invokeTime: number;
  /** null: the outcome is unknown. */
  returnTime: number | null;
  /** "file:line" the record came from, for error messages. */
  source?: string;
}

/** Turns a record's untyped input/output into a model's; throws naming what was wrong. */
export type RecordDecoder<I, O> = (record: HistoryRecord) => { input: I; output: O };

/** A malformed history file or record. The message names the source line. */
export class HistoryFormatError extends Error {
  override name = 'HistoryFormatError';
}

export interface ParseResult {
  records: HistoryRecord[];
  /** A torn final line (the writer died mid-line), ignored rather than rejected. */
  tornTail: boolean;
}

/**
 * Parse one history file's text. A final line without a newline that is not valid JSON is taken as
 * a torn write and ignored; any other malformed line throws HistoryFormatError naming it.
 */
export function parseHistoryText(text: string, sourceName = '<history>'): ParseResult {
  const lines = text.split('\n');
  const complete: HistoryRecord[] = [];
  // Invoke lines waiting for their completion, by clientId and seq.
  const pending = new Map<string, HistoryRecord>();
  const settled = new Set<string>();
  let tornTail = false;
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    const source = `${sourceName}:${i + 1}`;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      if (i === lines.length - 1) {
        tornTail = true;
        return;
      }
      throw new HistoryFormatError(`${source}: not valid JSON (${(err as Error).message})`);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new HistoryFormatError(`${source}: expected a JSON object per line`);
    }
    const obj = value as Record<string, unknown>;
    const type = obj.type ?? 'op';
    const clientId = obj.clientId;
    if (typeof clientId !== 'string' && typeof clientId !== 'number') {
      throw new HistoryFormatError(`${source}: clientId must be a string or number`);
    }
    const seq = obj.seq;
    if (seq !== undefined && (typeof seq !== 'number' || !Number.isInteger(seq))) {
      throw new HistoryFormatError(`${source}: seq must be an integer when present`);
    }
    const pairKey = seq === undefined ? undefined : `${typeof clientId}:${clientId}#${seq}`;
    if (type === 'failed') {
      if (pairKey === undefined) throw new HistoryFormatError(`${source}: a "failed" line needs a seq`);
      pending.delete(pairKey);
      settled.add(pairKey);
      return;
    }
    if (type !== 'op' && type !== 'invoke') {
      throw new HistoryFormatError(
        `${source}: type must be "op", "invoke" or "failed", got ${JSON.stringify(type)}`,
      );
    }
    if (typeof obj.op !== 'string') throw new HistoryFormatError(`${source}: op must be a string`);
    if (obj.key !== undefined && typeof obj.key !== 'string') {
      throw new HistoryFormatError(`${source}: key must be a string when present`);
    }
    if (typeof obj.invokeTime !== 'number' || !Number.isFinite(obj.invokeTime)) {
      throw new HistoryFormatError(`${source}: invokeTime must be a finite number`);
    }
    const record: HistoryRecord = {
      clientId,
      op: obj.op,
      input: obj.input,
      output: obj.output,
      invokeTime: obj.invokeTime,
      returnTime: null,
      source,
    };
    if (obj.key !== undefined) record.key = obj.key as string;
    if (type === 'invoke') {
      if (pairKey === undefined) throw new HistoryFormatError(`${source}: an "invoke" line needs a seq`);
      if (!settled.has(pairKey)) pending.set(pairKey, record);
      return;
    }
    if (!('returnTime' in obj)) {
      throw new HistoryFormatError(`${source}: returnTime is missing (use null for an unknown outcome)`);
    }
    const rt = obj.returnTime;
    if (rt !== null && (typeof rt !== 'number' || !Number.isFinite(rt) || rt < obj.invokeTime)) {
      throw new HistoryFormatError(
        `${source}: returnTime must be null or a number >= invokeTime (${obj.invokeTime})`,
      );
    }
    record.returnTime = rt;
    if (pairKey !== undefined) {
      pending.delete(pairKey);
      settled.add(pairKey);
    }
    complete.push(record);
  });
  // Calls whose process died before their outcome was written: unknown outcome.
  const orphans = [...pending.values()].map((r) => ({ ...r, output: undefined, returnTime: null }));
  return { records: [...complete, ...orphans], tornTail };
}

/** Read and merge history files (one per recording process), sorted by invoke time. */
export async function readHistoryFiles(paths: readonly string[]): Promise<ParseResult> {
  const all: HistoryRecord[] = [];
  let tornTail = false;
  for (const path of paths) {
    const parsed = parseHistoryText(await readFile(path, 'utf8'), path);
    all.push(...parsed.records);
    tornTail ||= parsed.tornTail;
  }
  all.sort((a, b) => a.invokeTime - b.invokeTime);
  return { records: all, tornTail };
}

/** Give records a model's types. Errors from decode are rethrown naming the record's source. */
export function toOperations<I, O>(
  records: readonly HistoryRecord[],
  decode: RecordDecoder<I, O>,
): Operation<I, O>[] {
  return records.map((r) => {
    let io: { input: I; output: O };
    try {
      io = decode(r);
    } catch (err) {
      throw new HistoryFormatError(`${r.source ?? '<record>'}: ${(err as Error).message}`);
    }
    const op: Operation<I, O> = {
      clientId: r.clientId,
      input: io.input,
      output: io.output,
      invokeTime: r.invokeTime,
      returnTime: r.returnTime === null ? Number.POSITIVE_INFINITY : r.returnTime,
    };
    if (r.key !== undefined) op.key = r.key;
    if (r.source !== undefined) op.source = r.source;
    return op;
  });
}

/** Render one line of the format (no trailing newline); bigints become decimal strings. */
export function formatRecord(r: object): string {
  return JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
}
