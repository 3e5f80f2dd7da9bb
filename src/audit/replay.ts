/**
 * Shipping spill-format files into ClickHouse, oldest first: used by the pipeline when ClickHouse
 * returns and by `floe audit replay --dir DIR --to URL`. Frames are concatenated up to `batchSize`
 * rows per INSERT. A file with a corrupt frame has its good frames (those before the bad one)
 * inserted and is then refused, naming the file and the byte offset; the caller sets it aside.
 */
import type { ClickHouseAuditSink } from './clickhouse-sink.js';
import type { SpillFileContent } from './spill.js';

export interface ReplayFileResult {
  rows: number;
  /** Set when the file was refused at this point. */
  corruption?: { file: string; offset: number; reason: string };
}

/** Insert a file's good frames; rejects (having inserted a prefix) if an INSERT fails. */
export async function insertSpillContent(
  sink: Pick<ClickHouseAuditSink, 'insertPayload'>,
  content: SpillFileContent,
  batchSize: number,
  between?: () => Promise<void>,
): Promise<ReplayFileResult> {
  let chunk: Buffer[] = [];
  let rows = 0;
  let total = 0;
  const send = async () => {
    if (rows === 0) return;
    await sink.insertPayload(chunk.length === 1 ? chunk[0]! : Buffer.concat(chunk), rows);
    total += rows;
    chunk = [];
    rows = 0;
    await between?.();
  };
  for (const f of content.frames) {
    if (rows > 0 && rows + f.rows > batchSize) await send();
    chunk.push(f.payload);
    rows += f.rows;
  }
  await send();
  return content.corruption
    ? { rows: total, corruption: { file: content.file, ...content.corruption } }
    : { rows: total };
}

/** The alarm text for a refused file. */
export function corruptionMessage(
  c: { file: string; offset: number; reason: string },
  keptAs?: string,
): string {
  return `audit spill file ${c.file} refused at byte offset ${c.offset}: ${c.reason}; the frames before that offset were replayed${keptAs ? `, the file is kept as ${keptAs}` : ''}`;
}
