import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { NodeStorage } from '../node/seams.js';
import { CompactedError, type ConfState } from '../raft/types.js';
import { DurableStorage, type DurableStorageOptions } from './durable-storage.js';
import {
  SnapshotCorruptionError,
  StorageConfigError,
  StorageLockedError,
  StorageUsageError,
  WalCorruptionError,
} from './errors.js';
import { runExample } from './example.js';
import { snapshotFileName } from './snapshot-store.js';
import { dump, ent, ents, flipByte, removeTempDirs, tempDir } from './test-helpers.js';

afterEach(removeTempDirs);

const CONF: ConfState = { voters: [1, 2, 3], learners: [] };
const bytes = (s: string) => new TextEncoder().encode(s);

async function open(dir: string, options: DurableStorageOptions = {}): Promise<DurableStorage> {
  return DurableStorage.open(dir, { bootstrapConf: CONF, ...options });
}

describe('DurableStorage', () => {
  it('is what the node runtime expects (NodeStorage)', async () => {
    const s = await open(await tempDir());
    const seam: NodeStorage = s; // compile-time check; the runtime check below keeps the test honest
    await seam.save({ entries: ents(1, 1, 1) }, { sync: true });
    expect(seam.storage.lastIndex()).toBe(1);
    await seam.close();
  });

  it('starts empty with the bootstrap membership and keeps it across reopen', async () => {
    const dir = await tempDir();
    const s = await open(dir);
    expect(dump(s.storage)).toMatchObject({ first: 1, last: 0, initial: { conf: CONF } });
    await s.close();
    const again = await DurableStorage.open(dir); // no bootstrapConf: the recorded one is used
    expect(again.storage.initialState().conf).toEqual(CONF);
    await again.close();
  });

  it('round-trips entries, hard state and snapshots across reopen', async () => {
    const dir = await tempDir();
    const s = await open(dir, { trailingEntries: 3 });
    await s.save({ entries: ents(1, 10, 1), hardState: { term: 1, vote: 1, commit: 8 } }, { sync: true });
    await s.createSnapshot(8, CONF, bytes('state@8'));
    await s.save({ entries: ents(11, 12, 2), hardState: { term: 2, vote: 3, commit: 9 } }, { sync: true });
    const live = dump(s.storage);
    expect(live.first).toBe(6); // 8 - 3 trailing entries + 1
    expect(live.snapshot.metadata).toEqual({ index: 8, term: 1, conf: CONF });
    await s.close();

    const r = await open(dir, { trailingEntries: 3 });
    expect(dump(r.storage)).toEqual(live);
    expect(r.hardState()).toEqual({ term: 2, vote: 3, commit: 9 });
    expect(r.warnings).toEqual([]);
    await r.close();
  });

  it('is readable only once durable, and the hard state is durable when save resolves', async () => {
    const dir = await tempDir();
    const s = await open(dir);
    const p = s.save({ entries: ents(1, 3, 1), hardState: { term: 1, vote: 2, commit: 0 } }, { sync: true });
    expect(s.storage.lastIndex()).toBe(0); // queued, not yet durable
    await p;
    expect(s.storage.lastIndex()).toBe(3);
    // A second process view: read the directory back while the first is still open (lock aside).
    await s.close();
    const r = await open(dir);
    expect(r.storage.initialState().hardState).toEqual({ term: 1, vote: 2, commit: 0 });
    await r.close();
  });

  it('overwrites a conflicting suffix, live and after reopen', async () => {
    const dir = await tempDir();
    const s = await open(dir);
    await s.save({ entries: ents(1, 10, 1) }, { sync: true });
    await s.save({ entries: ents(7, 8, 2) }, { sync: true });
    const want = [...ents(1, 6, 1), ...ents(7, 8, 2)];
    expect(s.storage.entries(1, 9)).toEqual(want);
    expect(s.storage.lastIndex()).toBe(8);
    await s.close();
    const r = await open(dir);
    expect(r.storage.entries(1, 9)).toEqual(want);
    expect(r.storage.lastIndex()).toBe(8);
    await r.close();
  });

  it('installs a leader snapshot (replacing the log) and recovers it', async () => {
    const dir = await tempDir();
    const s = await open(dir);
    await s.save({ entries: ents(1, 5, 1), hardState: { term: 1, vote: 1, commit: 3 } }, { sync: true });
    const leaderSnap = {
      metadata: { index: 100, term: 4, conf: { voters: [1, 2, 3, 4], learners: [] } },
      data: bytes('big'),
    };
    await s.save(
      { snapshot: leaderSnap, entries: [ent(101, 4)], hardState: { term: 4, vote: 0, commit: 100 } },
      { sync: false },
    );
    const live = dump(s.storage);
    expect(live).toMatchObject({ first: 101, last: 101, initial: { conf: { voters: [1, 2, 3, 4] } } });
    await s.close();
    const r = await open(dir);
    expect(dump(r.storage)).toEqual(live);
    await r.close();
  });

  it('rolls segments, deletes the ones behind the trailing window, and compacts memory the same way', async () => {
    const dir = await tempDir();
    const opts = { segmentBytes: 2048, trailingEntries: 50 };
    const s = await open(dir, opts);
    for (let i = 1; i <= 400; i += 10) {
      await s.save(
        { entries: ents(i, i + 9, 1, 40), hardState: { term: 1, vote: 1, commit: i + 9 } },
        { sync: true },
      );
    }
    const before = s.segmentNames();
    expect(before.length).toBeGreaterThan(6);
    await s.createSnapshot(300, CONF, bytes('at 300'));
    const after = s.segmentNames();
    expect(after.length).toBeLessThan(before.length);
    expect(await fsp.readdir(path.join(dir, 'wal'))).toEqual(after);
    expect(s.stats().segmentsDeleted).toBe(before.length - after.length);
    // Every deleted segment held only entries <= 250; the oldest kept one still reaches 251.
    const firstIndexOf = (n: string) => Number.parseInt(n.slice(17, 33), 16);
    expect(firstIndexOf(after[0]!)).toBeLessThanOrEqual(251);
    expect(firstIndexOf(after[1]!) - 1).toBeGreaterThan(250);
    expect(s.storage.firstIndex()).toBe(251);
    expect(() => s.storage.entries(250, 260)).toThrow(CompactedError);
    const live = dump(s.storage);
    await s.close();
    const r = await open(dir, opts);
    expect(dump(r.storage)).toEqual(live);
    await r.close();
  });

  it('keeps only the newest K snapshot files', async () => {
    const dir = await tempDir();
    const s = await open(dir, { keepSnapshots: 2, trailingEntries: 0 });
    await s.save({ entries: ents(1, 40, 1), hardState: { term: 1, vote: 1, commit: 40 } }, { sync: true });
    for (const i of [10, 20, 30, 40]) await s.createSnapshot(i, CONF, bytes(`at ${i}`));
    expect(await fsp.readdir(path.join(dir, 'snap'))).toEqual([
      snapshotFileName(30, 1),
      snapshotFileName(40, 1),
    ]);
    expect(s.stats().snapshotsWritten).toBe(4);
    await s.close();
  });

  it('ignores and removes a snapshot file the WAL never recorded (crash before its marker)', async () => {
    const dir = await tempDir();
    const s = await open(dir, { trailingEntries: 0 });
    await s.save({ entries: ents(1, 20, 1), hardState: { term: 1, vote: 1, commit: 20 } }, { sync: true });
    await s.createSnapshot(10, CONF, bytes('at 10'));
    await s.close();
    // A snapshot file written but whose WAL marker never became durable, plus its temp file.
    const snapDir = path.join(dir, 'snap');
    await fsp.copyFile(
      path.join(snapDir, snapshotFileName(10, 1)),
      path.join(snapDir, snapshotFileName(15, 1)),
    );
    await fsp.writeFile(path.join(snapDir, `${snapshotFileName(18, 1)}.tmp`), 'half');
    const r = await open(dir, { trailingEntries: 0 });
    expect(r.storage.snapshot().metadata.index).toBe(10);
    expect(await fsp.readdir(snapDir)).toEqual([snapshotFileName(10, 1)]);
    expect(r.warnings.join('\n')).toMatch(/temporary snapshot file/);
    await r.close();
  });

  it('falls back to an older snapshot when the newest is corrupt and the WAL bridges the gap', async () => {
    const dir = await tempDir();
    const s = await open(dir, { trailingEntries: 100 });
    await s.save({ entries: ents(1, 30, 1), hardState: { term: 1, vote: 1, commit: 30 } }, { sync: true });
    await s.createSnapshot(10, CONF, bytes('at 10'));
    await s.createSnapshot(20, CONF, bytes('at 20'));
    await s.close();
    await flipByte(path.join(dir, 'snap', snapshotFileName(20, 1)), 30);
    const r = await open(dir, { trailingEntries: 100 });
    expect(r.storage.snapshot().metadata.index).toBe(10);
    expect(new TextDecoder().decode(r.storage.snapshot().data)).toBe('at 10');
    expect(r.storage.entries(11, 31)).toEqual(ents(11, 30, 1));
    expect(r.warnings.join('\n')).toMatch(/checksum mismatch; using the older snapshot at index 10/);
    expect((await fsp.readdir(path.join(dir, 'snap'))).sort()).toEqual([
      snapshotFileName(10, 1),
      `${snapshotFileName(20, 1)}.corrupt`,
    ]);
    // Entries up to 20 were snapshotted once (the WAL says so): they still may not be rewritten.
    await expect(r.save({ entries: ents(15, 16, 2) }, { sync: true })).rejects.toThrow(
      /at or below the snapshot index 20/,
    );
    await r.createSnapshot(25, CONF, bytes('at 25'));
    await r.close();
    const again = await open(dir, { trailingEntries: 100 });
    expect(again.storage.snapshot().metadata.index).toBe(25);
    expect(again.warnings).toEqual([]);
    await again.close();
  });

  it('refuses to start when the newest snapshot is corrupt and nothing can replace it', async () => {
    const dir = await tempDir();
    const s = await open(dir);
    await s.save({ entries: ents(1, 5, 1), hardState: { term: 1, vote: 1, commit: 5 } }, { sync: true });
    await s.createSnapshot(3, CONF, bytes('at 3'));
    const leaderSnap = { metadata: { index: 50, term: 2, conf: CONF }, data: bytes('leader') };
    await s.save(
      { snapshot: leaderSnap, entries: [], hardState: { term: 2, vote: 0, commit: 50 } },
      { sync: true },
    );
    await s.close();
    const file = path.join(dir, 'snap', snapshotFileName(50, 2));
    await flipByte(file, 40);
    const err = await open(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SnapshotCorruptionError);
    expect((err as Error).message).toContain(file);
    expect((err as Error).message).toMatch(/refusing to start/);
    // The lock was released (LOCK stays, its record marked closed) and nothing was moved.
    expect(await fsp.readFile(path.join(dir, 'LOCK'), 'utf8')).toMatch(/\nclosed=true\n$/);
    expect(await fsp.readdir(path.join(dir, 'snap'))).toContain(snapshotFileName(50, 2));
  });

  it('refuses when the oldest WAL segment was removed by hand (entries missing before the WAL)', async () => {
    const dir = await tempDir();
    const s = await open(dir, { segmentBytes: 1024 });
    for (let i = 1; i <= 60; i++) await s.save({ entries: [ent(i, 1, 40)] }, { sync: false });
    await s.close();
    const names = (await fsp.readdir(path.join(dir, 'wal'))).sort();
    await fsp.rm(path.join(dir, 'wal', names[0]!));
    await expect(open(dir)).rejects.toThrow(WalCorruptionError);
    await expect(open(dir)).rejects.toThrow(/but there is no snapshot before it/);
  });

  it('locks the directory against a second open', async () => {
    const dir = await tempDir();
    const s = await open(dir);
    await expect(open(dir)).rejects.toBeInstanceOf(StorageLockedError);
    await s.close();
    const r = await open(dir);
    await r.close();
  });

  it('rejects bad options and unusable directories clearly', async () => {
    const dir = await tempDir();
    await expect(open(dir, { segmentBytes: 10 })).rejects.toThrow(
      'segmentBytes = 10; allowed: an integer from 1024 to 1073741824',
    );
    await expect(open(dir, { trailingEntries: -1 })).rejects.toThrow(/trailingEntries = -1; allowed/);
    await expect(open(dir, { keepSnapshots: 0 })).rejects.toThrow(
      /keepSnapshots = 0; allowed: an integer from 1 to 100/,
    );
    await expect(open(dir, { bootstrapConf: { voters: [0], learners: [] } })).rejects.toBeInstanceOf(
      StorageConfigError,
    );
    const file = path.join(dir, 'plain-file');
    await fsp.writeFile(file, 'x');
    await expect(open(file)).rejects.toThrow(
      /cannot use data dir .*plain-file: it \(or a parent\) is not a directory/,
    );
    await expect(open(path.join(file, 'sub'))).rejects.toBeInstanceOf(StorageConfigError);
    const s = await open(path.join(dir, 'data'));
    await s.close();
    await expect(
      DurableStorage.open(path.join(dir, 'data'), { bootstrapConf: { voters: [1, 2], learners: [] } }),
    ).rejects.toThrow(
      /was bootstrapped with voters \[1,2,3\] learners \[\]; open\(\) was given voters \[1,2\]/,
    );
  });

  it.skipIf(process.getuid?.() === 0)('reports a directory that is not writable', async () => {
    const dir = await tempDir();
    await fsp.chmod(dir, 0o500);
    try {
      await expect(open(dir)).rejects.toThrow(/is not writable/);
    } finally {
      await fsp.chmod(dir, 0o700);
    }
  });

  it('refuses saves that would leave a gap or rewrite snapshotted entries', async () => {
    const dir = await tempDir();
    const s = await open(dir);
    await s.save({ entries: ents(1, 5, 1), hardState: { term: 1, vote: 1, commit: 4 } }, { sync: true });
    await expect(s.save({ entries: ents(7, 8, 1) }, { sync: true })).rejects.toThrow(
      'entries start at 7 but the log ends at 5 (gap)',
    );
    await s.createSnapshot(4, CONF, bytes('x'));
    await expect(s.save({ entries: ents(3, 6, 2) }, { sync: true })).rejects.toBeInstanceOf(
      StorageUsageError,
    );
    await expect(
      s.save({ entries: [], hardState: { term: 1, vote: 1, commit: 6 } }, { sync: true }),
    ).rejects.toThrow('hard state commit 6 is beyond the last index 5');
    await expect(s.createSnapshot(5, CONF, bytes('x'))).rejects.toThrow(/commit index 4/);
    await expect(s.createSnapshot(9, CONF, bytes('x'))).rejects.toThrow(/durable log ends at 5/);
    await expect(s.createSnapshot(2, CONF, bytes('x'))).rejects.toThrow(/older than the current snapshot/);
    await s.createSnapshot(4, CONF, bytes('same index: no-op'));
    expect(new TextDecoder().decode(s.storage.snapshot().data)).toBe('x');
    await s.close();
  });

  it('shares fdatasyncs between concurrent saves (group commit) and keeps their order', async () => {
    const dir = await tempDir();
    const s = await open(dir);
    const writers = 32;
    const perWriter = 20;
    let next = 1;
    // Each writer saves one entry at a time; indexes are assigned in call order, so saves stay in sequence.
    await Promise.all(
      Array.from({ length: writers }, async () => {
        for (let k = 0; k < perWriter; k++) {
          const i = next++;
          await s.save({ entries: [ent(i, 1, 64)] }, { sync: true });
          expect(s.storage.lastIndex()).toBeGreaterThanOrEqual(i);
        }
      }),
    );
    const st = s.stats();
    const saves = writers * perWriter;
    expect(st.appends).toBe(saves);
    expect(st.syncs).toBeLessThan(saves / 4);
    console.log(
      `group commit, ${writers} writers: ${saves} saves → ${st.syncs} fdatasyncs (${(saves / st.syncs).toFixed(1)} saves per sync, max ${st.maxAppendsPerSync})`,
    );
    await s.close();
    const r = await open(dir);
    expect(r.storage.entries(1, saves + 1)).toEqual(ents(1, saves, 1, 64));
    await r.close();
  });

  it('raises a recovered commit index to the snapshot index', async () => {
    const dir = await tempDir();
    const s = await open(dir);
    const leaderSnap = { metadata: { index: 9, term: 2, conf: CONF }, data: bytes('s') };
    // A leader snapshot saved without a hard state (as if the hard state record was torn off).
    await s.save({ snapshot: leaderSnap, entries: [] }, { sync: true });
    await s.close();
    const r = await open(dir);
    expect(r.hardState().commit).toBe(9);
    await r.close();
  });

  it('runs the documented example', async () => {
    const lines: string[] = [];
    await runExample(await tempDir(), (l) => lines.push(l));
    expect(lines[0]).toBe('live: first 3, last 3, snapshot at 3');
    expect(lines).toContain('wal/: 0000000000000001-0000000000000001.wal');
    expect(lines).toContain('snap/: 0000000000000003-0000000000000001.snap');
    expect(lines).toContain('reopened: hard state {"term":1,"vote":1,"commit":3}, first 3, last 3');
  });
});
