import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Snapshot } from '../raft/types.js';
import { SnapshotCorruptionError } from './errors.js';
import { SnapshotStore, snapshotFileName } from './snapshot-store.js';
import { flipByte, removeTempDirs, tempDir } from './test-helpers.js';

afterEach(removeTempDirs);

function snap(index: number, term: number, size = 100): Snapshot {
  const data = new Uint8Array(size).map((_, i) => (i * 13 + index) & 0xff);
  return { metadata: { index, term, conf: { voters: [1, 2, 3], learners: [7] } }, data };
}

describe('SnapshotStore', () => {
  it('writes and loads a snapshot under <index>-<term>.snap', async () => {
    const dir = await tempDir();
    const store = await SnapshotStore.open(dir);
    await store.save(snap(4660, 3));
    expect(await fsp.readdir(dir)).toEqual(['0000000000001234-0000000000000003.snap']);
    expect(await store.load(4660, 3)).toEqual(snap(4660, 3));
    expect((await store.list()).map((r) => [r.index, r.term])).toEqual([[4660, 3]]);
  });

  it('round-trips an empty snapshot', async () => {
    const store = await SnapshotStore.open(await tempDir());
    await store.save(snap(1, 1, 0));
    expect(await store.load(1, 1)).toEqual(snap(1, 1, 0));
  });

  it('detects a flipped byte anywhere in the file', async () => {
    const dir = await tempDir();
    const store = await SnapshotStore.open(dir);
    await store.save(snap(10, 2, 40));
    const file = path.join(dir, snapshotFileName(10, 2));
    const pristine = await fsp.readFile(file);
    for (let at = 0; at < pristine.length; at++) {
      await fsp.writeFile(file, pristine);
      await flipByte(file, at);
      await expect(store.load(10, 2), `flip at ${at}`).rejects.toBeInstanceOf(SnapshotCorruptionError);
    }
  });

  it('detects truncation and a file renamed to another index', async () => {
    const dir = await tempDir();
    const store = await SnapshotStore.open(dir);
    await store.save(snap(10, 2));
    const file = path.join(dir, snapshotFileName(10, 2));
    const full = await fsp.readFile(file);
    await fsp.writeFile(file, full.subarray(0, full.length - 1));
    await expect(store.load(10, 2)).rejects.toThrow(/truncated or padded/);
    await fsp.writeFile(path.join(dir, snapshotFileName(11, 2)), full);
    await expect(store.load(11, 2)).rejects.toThrow(
      /file name says index 11 term 2, metadata says index 10 term 2/,
    );
    await expect(store.load(99, 9)).rejects.toThrow(/file is missing/);
  });

  it('removes leftover temp files from an interrupted write and never lists them', async () => {
    const dir = await tempDir();
    const store = await SnapshotStore.open(dir);
    await store.save(snap(5, 1));
    await fsp.writeFile(path.join(dir, `${snapshotFileName(9, 1)}.tmp`), 'partial');
    expect((await store.list()).map((r) => r.index)).toEqual([5]);
    const warnings: string[] = [];
    await SnapshotStore.open(dir, (m) => warnings.push(m));
    expect(warnings).toHaveLength(1);
    expect(await fsp.readdir(dir)).toEqual([snapshotFileName(5, 1)]);
  });

  it('retains only the given snapshots', async () => {
    const dir = await tempDir();
    const store = await SnapshotStore.open(dir);
    for (const i of [1, 2, 3, 4]) await store.save(snap(i * 10, 1));
    const removed = await store.retainOnly([
      { index: 30, term: 1 },
      { index: 40, term: 1 },
    ]);
    expect(removed).toEqual([snapshotFileName(10, 1), snapshotFileName(20, 1)]);
    expect((await store.list()).map((r) => r.index)).toEqual([30, 40]);
  });
});
