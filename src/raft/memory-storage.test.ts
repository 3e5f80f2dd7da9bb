import { describe, expect, it } from 'vitest';
import { MemoryStorage } from './memory-storage.js';
import { bytes } from './test-network.js';
import { CompactedError, type Entry, SnapshotOutOfDateError, UnavailableError } from './types.js';

const conf = { voters: [1, 2, 3], learners: [] };
const ents = (from: number, terms: number[]): Entry[] =>
  terms.map((term, i) => ({ type: 'normal', term, index: from + i, data: bytes(`d${from + i}`) }));

describe('MemoryStorage', () => {
  it('bootstraps with a snapshot at index 0, term 0 carrying the membership', () => {
    const s = new MemoryStorage(conf);
    expect(s.snapshot().metadata).toEqual({ index: 0, term: 0, conf });
    expect(s.initialState()).toEqual({ hardState: { term: 0, vote: 0, commit: 0 }, conf });
    expect([s.firstIndex(), s.lastIndex()]).toEqual([1, 0]);
    expect(s.term(0)).toBe(0);
  });

  it('append overwrites a conflicting suffix and refuses gaps', () => {
    const s = new MemoryStorage(conf);
    s.append(ents(1, [1, 1, 1, 1]));
    s.append(ents(3, [2]));
    expect(s.lastIndex()).toBe(3);
    expect(s.term(3)).toBe(2);
    expect(() => s.append(ents(6, [2]))).toThrow(/gap/);
  });

  it('entries, term: compacted and unavailable ranges raise named errors', () => {
    const s = new MemoryStorage(conf);
    s.append(ents(1, [1, 1, 1, 1, 1]));
    s.createSnapshot(3, conf, bytes('state'));
    s.compact(3);
    expect(s.firstIndex()).toBe(4);
    expect(s.term(3)).toBe(1);
    expect(() => s.term(2)).toThrow(CompactedError);
    expect(() => s.entries(3, 5)).toThrow(CompactedError);
    expect(() => s.entries(4, 7)).toThrow(UnavailableError);
    expect(() => s.term(6)).toThrow(UnavailableError);
    expect(s.entries(4, 6).map((e) => e.index)).toEqual([4, 5]);
  });

  it('entries honours maxBytes but always returns at least one entry', () => {
    const s = new MemoryStorage(conf);
    s.append(ents(1, [1, 1, 1])); // 2 bytes each
    expect(s.entries(1, 4, 3)).toHaveLength(1);
    expect(s.entries(1, 4, 4)).toHaveLength(2);
    expect(s.entries(1, 4, 0)).toHaveLength(1);
  });

  it('compaction must be covered by the snapshot; compacting again is a no-op', () => {
    const s = new MemoryStorage(conf);
    s.append(ents(1, [1, 1, 1, 1, 1]));
    expect(() => s.compact(2)).toThrow(/snapshot only covers up to 0/);
    s.createSnapshot(4, conf, bytes('x'));
    s.compact(2);
    s.compact(1);
    expect(s.firstIndex()).toBe(3);
  });

  it('createSnapshot refuses an index older than the current snapshot or beyond the log', () => {
    const s = new MemoryStorage(conf);
    s.append(ents(1, [1, 1, 1]));
    s.createSnapshot(2, conf, bytes('x'));
    expect(() => s.createSnapshot(1, conf, bytes('y'))).toThrow(SnapshotOutOfDateError);
    expect(() => s.createSnapshot(9, conf, bytes('y'))).toThrow(UnavailableError);
  });

  it('applySnapshot replaces the whole log; an older one is refused', () => {
    const s = new MemoryStorage(conf);
    s.append(ents(1, [1, 1, 1]));
    s.applySnapshot({ metadata: { index: 10, term: 3, conf }, data: bytes('s') });
    expect([s.firstIndex(), s.lastIndex(), s.term(10)]).toEqual([11, 10, 3]);
    expect(() => s.applySnapshot({ metadata: { index: 5, term: 3, conf }, data: bytes('s') })).toThrow(
      SnapshotOutOfDateError,
    );
    s.append(ents(11, [3, 3]));
    expect(s.lastIndex()).toBe(12);
  });

  it('clone is independent of the original', () => {
    const s = new MemoryStorage(conf);
    s.append(ents(1, [1, 1]));
    s.setHardState({ term: 1, vote: 2, commit: 1 });
    const c = s.clone();
    s.append(ents(2, [2, 2]));
    s.setHardState({ term: 2, vote: 3, commit: 2 });
    expect(c.lastIndex()).toBe(2);
    expect(c.term(2)).toBe(1);
    expect(c.hardState()).toEqual({ term: 1, vote: 2, commit: 1 });
  });
});
