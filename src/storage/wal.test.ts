import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StorageClosedError, StorageFailedError, WalCorruptionError } from './errors.js';
import { encodeEntries, encodeHardState, UNKNOWN_VOTE } from './payload.js';
import { encodeFrame, frameOf, RecordType, readFrame, SEGMENT_PREAMBLE_BYTES } from './record.js';
import { ent, ents, flipByte, removeTempDirs, tempDir } from './test-helpers.js';
import { Wal, type WalOpenResult } from './wal.js';

afterEach(removeTempDirs);

async function reopen(dir: string, segmentBytes?: number): Promise<WalOpenResult & { warnings: string[] }> {
  const warnings: string[] = [];
  const r = await Wal.open(dir, { segmentBytes, onWarning: (m) => warnings.push(m) });
  return { ...r, warnings };
}

/** Byte offsets of every record in a segment file (the header included). */
async function recordOffsets(file: string): Promise<number[]> {
  const buf = await fsp.readFile(file);
  const out: number[] = [];
  let off = SEGMENT_PREAMBLE_BYTES;
  for (;;) {
    const fr = readFrame(buf, off);
    if (fr.kind !== 'ok') break;
    out.push(off);
    off = fr.next;
  }
  expect(off).toBe(buf.length);
  return out;
}

describe('WAL', () => {
  it('round-trips entries, hard state and snapshot markers across reopen', async () => {
    const dir = await tempDir();
    const { wal, state } = await reopen(dir);
    expect(state.entries).toEqual([]);
    await wal.append([{ type: 'entries', entries: ents(1, 5, 1) }], { sync: true });
    await wal.append([{ type: 'hardState', hardState: { term: 1, vote: 2, commit: 3 } }], { sync: true });
    await wal.append([{ type: 'snapshot', marker: { index: 3, term: 1, reset: false } }], { sync: true });
    await wal.append([{ type: 'entries', entries: [ent(6, 2)] }], { sync: false });
    await wal.close();

    const r = await reopen(dir);
    expect(r.torn).toBeUndefined();
    expect(r.state.entries).toEqual(ents(1, 5, 1).concat([ent(6, 2)]));
    expect(r.state.tail.hardState).toEqual({ term: 1, vote: 2, commit: 3 });
    expect(r.state.tail.lastIndex).toBe(6);
    expect(r.state.markers).toEqual([{ index: 3, term: 1, reset: false }]);
    await r.wal.close();
  });

  it('lets a later entries record replace a conflicting suffix', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir);
    await wal.append([{ type: 'entries', entries: ents(1, 10, 1) }], { sync: true });
    await wal.append([{ type: 'entries', entries: ents(6, 8, 2) }], { sync: true });
    await wal.close();
    const r = await reopen(dir);
    expect(r.state.entries).toEqual([...ents(1, 5, 1), ...ents(6, 8, 2)]);
    expect(r.state.tail).toMatchObject({ lastIndex: 8, lastTerm: 2 });
    await r.wal.close();
  });

  it('a reset snapshot marker voids older entries', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir);
    await wal.append([{ type: 'entries', entries: ents(1, 4, 1) }], { sync: true });
    await wal.append(
      [
        { type: 'snapshot', marker: { index: 50, term: 3, reset: true } },
        { type: 'entries', entries: ents(51, 52, 3) },
      ],
      { sync: true },
    );
    await wal.close();
    const r = await reopen(dir);
    expect(r.state.entries).toEqual(ents(51, 52, 3));
    expect(r.state).toMatchObject({ prevIndex: 50, prevTerm: 3, floor: 50 });
    await r.wal.close();
  });

  it('splits a large append into records of about 1 MiB, all written by one append', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir);
    const big = ents(1, 40, 1, 64 * 1024); // 2.5 MiB of entry data
    await wal.append([{ type: 'entries', entries: big }], { sync: true });
    expect(wal.stats()).toMatchObject({ appends: 1, records: 3, writes: 1, syncs: 1 });
    await wal.close();
    const r = await reopen(dir);
    // Compared as strings: a deep toEqual walks typed arrays element by element (seconds for 2.5 MiB).
    const view = (es: typeof big) =>
      es.map((e) => [e.index, e.term, e.type === 'normal' && Buffer.from(e.data).toString('base64')]);
    expect(view(r.state.entries)).toEqual(view(big));
    await r.wal.close();
  });

  it('rolls segments at the configured size and deletes whole segments behind an index', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir, 2048);
    for (let i = 1; i <= 200; i++) {
      await wal.append([{ type: 'entries', entries: [ent(i, 1, 40)] }], { sync: false });
    }
    await wal.append([{ type: 'hardState', hardState: { term: 1, vote: 1, commit: 200 } }], { sync: true });
    const names = wal.segmentNames();
    expect(names.length).toBeGreaterThan(4);
    for (const n of names) expect((await fsp.stat(path.join(dir, n))).size).toBeLessThanOrEqual(2048);
    // Segment file names carry the first index they expect.
    expect(names[0]).toBe('0000000000000001-0000000000000001.wal');

    const firstIndexOf = (n: string) => Number.parseInt(n.slice(17, 33), 16);
    const cut = firstIndexOf(names[3]!) - 1; // segments 0..2 hold only entries <= cut
    expect(await wal.releaseTo(cut)).toBe(3);
    expect(await fsp.readdir(dir)).toEqual(names.slice(3));
    expect(wal.stats().segmentsDeleted).toBe(3);
    await wal.close();

    const r = await reopen(dir, 2048);
    expect(r.state.prevIndex).toBe(cut);
    expect(r.state.entries[0]!.index).toBe(cut + 1);
    expect(r.state.entries.at(-1)!.index).toBe(200);
    expect(r.state.tail.hardState.commit).toBe(200);
    await r.wal.close();
  });

  it('never deletes the current segment', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir, 1024);
    await wal.append([{ type: 'entries', entries: ents(1, 3, 1) }], { sync: true });
    expect(await wal.releaseTo(1_000_000)).toBe(0);
    expect(wal.segmentNames()).toHaveLength(1);
    await wal.close();
  });

  it('cuts a torn last record at every byte offset and keeps everything before it', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir);
    await wal.append([{ type: 'entries', entries: ents(1, 3, 1) }], { sync: true });
    await wal.append([{ type: 'hardState', hardState: { term: 1, vote: 1, commit: 2 } }], { sync: true });
    await wal.append([{ type: 'entries', entries: ents(4, 6, 1, 30) }], { sync: true });
    await wal.close();
    const file = path.join(dir, (await fsp.readdir(dir))[0]!);
    const full = await fsp.readFile(file);
    const offsets = await recordOffsets(file);
    const lastStart = offsets.at(-1)!;
    const fenced = { term: 2, vote: UNKNOWN_VOTE, commit: 2 };
    const fenceBytes = encodeFrame(RecordType.hardState, encodeHardState(fenced)).length;

    for (let cut = lastStart; cut < full.length; cut++) {
      await fsp.writeFile(file, full.subarray(0, cut));
      const r = await reopen(dir);
      expect(r.state.entries, `cut at ${cut}`).toEqual(ents(1, 3, 1));
      if (cut > lastStart) {
        expect(r.torn).toMatchObject({ offset: lastStart, fileBytes: cut });
        expect(r.recovery).toEqual({
          tailCut: true,
          file: path.basename(file),
          cutAtOffset: lastStart,
          bytesCut: cut - lastStart,
          reason: expect.any(String),
          hardStateBefore: { term: 1, vote: 1, commit: 2 },
          hardStateAfter: fenced,
        });
        expect(r.state.tail.hardState).toEqual(fenced);
        expect(r.warnings.join('\n')).toMatch(/cut a torn record/);
      } else {
        expect(r.torn).toBeUndefined();
        expect(r.recovery).toEqual({ tailCut: false });
        expect(r.state.tail.hardState).toEqual({ term: 1, vote: 1, commit: 2 });
      }
      await r.wal.close();
      // Cut to the start of the torn record, then the fence record written and fsynced there.
      expect((await fsp.stat(file)).size).toBe(cut > lastStart ? lastStart + fenceBytes : lastStart);
    }
    // After the cut, the fence is durable (no second cut needed) and appending continues after it.
    const r = await reopen(dir);
    expect(r.recovery.tailCut).toBe(false);
    expect(r.state.tail.hardState).toEqual(fenced);
    await r.wal.append([{ type: 'entries', entries: ents(4, 4, 2) }], { sync: true });
    await r.wal.close();
    const again = await reopen(dir);
    expect(again.state.entries).toEqual([...ents(1, 3, 1), ent(4, 2)]);
    expect(again.state.tail.hardState).toEqual(fenced);
    await again.wal.close();
  });

  it('cuts zeros after the final record (a file extended but never filled) as a torn tail', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir);
    await wal.append([{ type: 'entries', entries: ents(1, 2, 1) }], { sync: true });
    await wal.append([{ type: 'entries', entries: ents(3, 4, 1) }], { sync: true });
    await wal.close();
    const file = path.join(dir, (await fsp.readdir(dir))[0]!);
    const size = (await fsp.stat(file)).size;
    await fsp.appendFile(file, Buffer.alloc(4096));
    const r = await reopen(dir);
    expect(r.torn).toMatchObject({
      offset: size,
      fileBytes: size + 4096,
      reason: /zero bytes \(never written\)/,
    });
    expect(r.state.entries).toEqual(ents(1, 4, 1));
    expect(r.recovery).toMatchObject({ tailCut: true, cutAtOffset: size, bytesCut: 4096 });
    await r.wal.close();
  });

  it('refuses a segment in the old format or with a damaged preamble, naming the file', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir);
    await wal.append([{ type: 'entries', entries: ents(1, 2, 1) }], { sync: true });
    await wal.close();
    const name = (await fsp.readdir(dir))[0]!;
    const file = path.join(dir, name);
    const good = await fsp.readFile(file);
    await fsp.writeFile(file, good.subarray(SEGMENT_PREAMBLE_BYTES)); // no preamble
    await expect(reopen(dir)).rejects.toThrow(`${name} at byte offset 0: not a Floe WAL segment`);
    const v9 = Buffer.from(good);
    v9[SEGMENT_PREAMBLE_BYTES - 1] = 9;
    await fsp.writeFile(file, v9);
    await expect(reopen(dir)).rejects.toThrow('WAL format version 9; this build reads versions 2 and 4');
    // A segment cut inside its header record is never torn: segments are created whole.
    await fsp.writeFile(file, good.subarray(0, SEGMENT_PREAMBLE_BYTES + 5));
    await expect(reopen(dir)).rejects.toThrow(
      /at byte offset 8: frame header cut short .*\(segment header\)/,
    );
  });

  it('reads a format-2 WAL, and rewrites only its last segment in format 4', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir, 1024);
    const conf = { type: 'conf', index: 1, term: 1, change: { type: 'addVoter', nodeId: 4 } } as const;
    await wal.append([{ type: 'entries', entries: [conf, ...ents(2, 40, 1, 40)] }], { sync: true });
    await wal.append([{ type: 'hardState', hardState: { term: 1, vote: 2, commit: 30 } }], { sync: true });
    await wal.close();
    const names = (await fsp.readdir(dir)).sort();
    expect(names.length).toBeGreaterThan(1);
    // Without a resulting membership, format 4 writes rows exactly as format 2 did: only the
    // version byte tells the two apart.
    for (const n of names) {
      const f = path.join(dir, n);
      const b = await fsp.readFile(f);
      b[SEGMENT_PREAMBLE_BYTES - 1] = 2;
      await fsp.writeFile(f, b);
    }
    const r = await reopen(dir, 1024);
    expect(r.state.entries).toEqual([conf, ...ents(2, 40, 1, 40)]);
    expect(r.state.tail.hardState).toEqual({ term: 1, vote: 2, commit: 30 });
    await r.wal.append([{ type: 'entries', entries: [ent(41, 1)] }], { sync: true });
    await r.wal.close();
    const versions = await Promise.all(
      names.map(async (n) => (await fsp.readFile(path.join(dir, n)))[SEGMENT_PREAMBLE_BYTES - 1]),
    );
    expect(versions).toEqual([...names.slice(1).map(() => 2), 4]);
    const again = await reopen(dir, 1024);
    expect(again.state.tail.lastIndex).toBe(41);
    await again.wal.close();
  });

  it('refuses a flipped byte in a middle record, naming the file and the byte offset', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir);
    for (let i = 1; i <= 4; i++)
      await wal.append([{ type: 'entries', entries: ents(i, i, 1, 16) }], { sync: true });
    await wal.close();
    const name = (await fsp.readdir(dir))[0]!;
    const file = path.join(dir, name);
    const offsets = await recordOffsets(file);
    const start = offsets[2]!; // the second entries record: valid records follow it
    const end = offsets[3]!;
    const pristine = await fsp.readFile(file);
    for (let at = start; at < end; at++) {
      await fsp.writeFile(file, pristine);
      await flipByte(file, at);
      const err = await reopen(dir).then(
        (r) => r.wal.close().then(() => undefined),
        (e: unknown) => e,
      );
      expect(err, `flip at ${at}`).toBeInstanceOf(WalCorruptionError);
      expect((err as WalCorruptionError).offset).toBe(start);
      expect((err as WalCorruptionError).message).toContain(`${name} at byte offset ${start}`);
    }
    // Nothing was cut: the file is untouched by a refused open.
    expect((await fsp.readFile(file)).length).toBe(pristine.length);
  });

  it('refuses damage at the end of a segment that is not the last one', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir, 1024);
    for (let i = 1; i <= 60; i++)
      await wal.append([{ type: 'entries', entries: [ent(i, 1, 40)] }], { sync: false });
    await wal.close();
    const names = (await fsp.readdir(dir)).sort();
    expect(names.length).toBeGreaterThan(2);
    const file = path.join(dir, names[1]!);
    const size = (await fsp.stat(file)).size;
    const lastRecord = (await recordOffsets(file)).at(-1)!;
    // A torn-looking tail is still corruption there: the segment was sealed with an fdatasync.
    await fsp.truncate(file, size - 3);
    await expect(reopen(dir, 1024)).rejects.toThrow(
      new RegExp(`${names[1]!.replace('.', '\\.')} at byte offset ${lastRecord}: frame length`),
    );
  });

  it('refuses a missing middle segment', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir, 1024);
    for (let i = 1; i <= 60; i++)
      await wal.append([{ type: 'entries', entries: [ent(i, 1, 40)] }], { sync: false });
    await wal.close();
    const names = (await fsp.readdir(dir)).sort();
    await fsp.rm(path.join(dir, names[1]!));
    const err = await reopen(dir, 1024).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WalCorruptionError);
    expect((err as Error).message).toMatch(/segment seq 3 follows seq 1: 1 segment\(s\) missing/);
    expect((err as WalCorruptionError).file).toBe(names[2]);
  });

  it('refuses an index gap and an unknown record type even with valid checksums', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir);
    await wal.append([{ type: 'entries', entries: ents(1, 2, 1) }], { sync: true });
    await wal.close();
    const file = path.join(dir, (await fsp.readdir(dir))[0]!);
    const good = await fsp.readFile(file);

    const gap = encodeFrame(RecordType.entries, encodeEntries(ents(5, 5, 1)));
    await fsp.writeFile(file, Buffer.concat([good, gap]));
    await expect(reopen(dir)).rejects.toThrow(
      `at byte offset ${good.length}: entries start at 5 but the log ends at 2 (gap)`,
    );

    const unknown = frameOf(77, encodeHardState({ term: 1, vote: 1, commit: 1 }));
    await fsp.writeFile(file, Buffer.concat([good, unknown]));
    await expect(reopen(dir)).rejects.toThrow(`at byte offset ${good.length}: unknown record type 77`);
  });

  it('removes a leftover temporary segment (an interrupted roll)', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir);
    await wal.append([{ type: 'entries', entries: ents(1, 2, 1) }], { sync: true });
    await wal.close();
    await fsp.writeFile(path.join(dir, '0000000000000002-0000000000000003.wal.tmp'), 'half a header');
    const r = await reopen(dir);
    expect(r.warnings.join()).toMatch(/removed leftover temporary file/);
    expect(await fsp.readdir(dir)).toEqual(['0000000000000001-0000000000000001.wal']);
    expect(r.state.entries).toEqual(ents(1, 2, 1));
    await r.wal.close();
  });

  it('coalesces concurrent appends into fewer fdatasyncs (group commit)', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir);
    const n = 400;
    const done: number[] = [];
    await Promise.all(
      Array.from({ length: n }, (_, i) =>
        wal
          .append([{ type: 'entries', entries: [ent(i + 1, 1, 64)] }], { sync: true })
          .then(() => done.push(i + 1)),
      ),
    );
    const s = wal.stats();
    expect(s.appends).toBe(n);
    expect(s.syncs).toBeLessThan(n);
    expect(s.maxAppendsPerSync).toBeGreaterThan(1);
    // Promises resolve in append order.
    expect(done).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    console.log(
      `group commit: ${n} concurrent appends → ${s.syncs} fdatasyncs (${(n / s.syncs).toFixed(1)} per sync)`,
    );
    await wal.close();
    const r = await reopen(dir);
    expect(r.state.entries).toHaveLength(n);
    await r.wal.close();
  });

  it('fails stop after a write error and refuses appends after close', async () => {
    const dir = await tempDir();
    const { wal } = await reopen(dir);
    await wal.append([{ type: 'entries', entries: ents(1, 1, 1) }], { sync: true });
    // Pull the file handle away underneath the writer: the next write fails with EBADF.
    const fh = (wal as unknown as { fh: { close(): Promise<void> } }).fh;
    await fh.close();
    await expect(
      wal.append([{ type: 'entries', entries: ents(2, 2, 1) }], { sync: true }),
    ).rejects.toBeInstanceOf(StorageFailedError);
    await expect(wal.append([{ type: 'entries', entries: ents(2, 2, 1) }], { sync: true })).rejects.toThrow(
      /refusing further writes/,
    );
    await wal.close().catch(() => {});
    await expect(wal.append([], { sync: true })).rejects.toBeInstanceOf(StorageClosedError);
  });
});
