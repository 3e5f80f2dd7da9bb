// The Ready/advance contract.

import { describe, expect, it } from 'vitest';
import { MemoryStorage } from './memory-storage.js';
import { RawNode } from './raw-node.js';
import { bytes, Solo, seededRandom } from './test-network.js';

const conf3 = { voters: [1, 2, 3], learners: [] };

describe('RawNode Ready/advance contract', () => {
  it('a fresh node has nothing to do', () => {
    const s = new Solo(1, conf3);
    expect(s.node.hasReady()).toBe(false);
  });

  it('ready() twice without advance() is refused, and advance() wants that same Ready', () => {
    const s = new Solo(1, { voters: [1], learners: [] });
    s.node.campaign();
    const rd = s.node.ready();
    expect(() => s.node.ready()).toThrow(/before advance/);
    expect(() => s.node.advance({ ...rd })).toThrow(/the Ready returned by the last ready/);
    s.node.advance(rd);
  });

  it('committed entries are handed out only after they were persisted by an earlier Ready', () => {
    const s = new Solo(1, { voters: [1], learners: [] });
    s.node.campaign();
    const rd1 = s.node.ready();
    // The no-op is in this Ready's entries; it is not yet committed (not yet persisted).
    expect(rd1.entries.map((e) => e.index)).toEqual([1]);
    expect(rd1.committedEntries).toEqual([]);
    expect(rd1.mustSync).toBe(true);
    s.storage.setHardState(rd1.hardState ?? s.storage.hardState());
    s.storage.append(rd1.entries);
    s.node.advance(rd1);
    const rd2 = s.node.ready();
    expect(rd2.committedEntries.map((e) => e.index)).toEqual([1]);
    expect(rd2.hardState?.commit).toBe(1);
    expect(rd2.entries).toEqual([]);
    expect(rd2.mustSync).toBe(false); // only commit changed
    s.node.advance(rd2);
    expect(s.node.hasReady()).toBe(false);
    expect(s.node.status().applied).toBe(1);
  });

  it('on a follower, entries committed in the same append are applied in the next Ready, after persistence', () => {
    const s = new Solo(1, conf3);
    s.node.step({
      type: 'app',
      from: 2,
      to: 1,
      term: 1,
      logIndex: 0,
      logTerm: 0,
      commit: 2,
      entries: [
        { type: 'normal', term: 1, index: 1, data: bytes('a') },
        { type: 'normal', term: 1, index: 2, data: bytes('b') },
      ],
    });
    const rd = s.node.ready();
    expect(rd.entries).toHaveLength(2);
    expect(rd.hardState).toMatchObject({ term: 1, commit: 2 });
    expect(rd.committedEntries).toEqual([]);
    expect(rd.messages).toEqual([expect.objectContaining({ type: 'appResp', index: 2, reject: false })]);
    s.storage.setHardState(rd.hardState ?? s.storage.hardState());
    s.storage.append(rd.entries);
    s.node.advance(rd);
    const rd2 = s.node.ready();
    expect(rd2.committedEntries.map((e) => e.index)).toEqual([1, 2]);
    s.node.advance(rd2);
  });

  it('softState reports role and leader changes once', () => {
    const s = new Solo(1, { voters: [1], learners: [] });
    s.node.campaign();
    const rd = s.node.ready();
    expect(rd.softState).toEqual({ role: 'leader', lead: 1 });
    s.storage.append(rd.entries);
    s.node.advance(rd);
    expect(s.node.ready().softState).toBeUndefined();
  });

  it('maxCommittedEntriesPerReady bounds each batch of committed entries', () => {
    const s = new Solo(1, { voters: [1], learners: [] }, { maxCommittedEntriesPerReady: 3 });
    s.node.campaign();
    s.drain();
    for (let i = 0; i < 10; i++) s.node.propose(bytes(`e${i}`));
    const sizes: number[] = [];
    while (s.node.hasReady()) {
      const rd = s.node.ready();
      s.storage.append(rd.entries);
      if (rd.committedEntries.length > 0) sizes.push(rd.committedEntries.length);
      s.node.advance(rd);
    }
    expect(sizes).toEqual([3, 3, 3, 1]);
  });

  it('messages addressed to another node are ignored', () => {
    const s = new Solo(1, conf3);
    s.node.step({ type: 'vote', from: 2, to: 3, term: 5, lastIndex: 0, lastTerm: 0, transfer: false });
    expect(s.node.hasReady()).toBe(false);
    expect(s.node.status().term).toBe(0);
  });

  it('an invalid config is refused with the field and its range', () => {
    const storage = new MemoryStorage(conf3);
    const random = seededRandom(1);
    expect(() => new RawNode({ id: 0, electionTicks: 10, heartbeatTicks: 1, random }, storage)).toThrow(
      /id must be/,
    );
    expect(() => new RawNode({ id: 1, electionTicks: 3, heartbeatTicks: 3, random }, storage)).toThrow(
      /electionTicks \(3\) must be greater than heartbeatTicks \(3\)/,
    );
    expect(
      () =>
        new RawNode({ id: 1, electionTicks: 10, heartbeatTicks: 1, random, maxInflightMessages: 0 }, storage),
    ).toThrow(/maxInflightMessages must be an integer >= 1/);
    expect(
      () =>
        new RawNode({ id: 1, electionTicks: 10, heartbeatTicks: 1, random, leaseMarginTicks: 10 }, storage),
    ).toThrow(/leaseMarginTicks must be an integer in \[0, 9\]/);
  });
});
