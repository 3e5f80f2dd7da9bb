import { describe, expect, it } from 'vitest';
import { pack, unpack } from './envelope.js';
import { decodeMemberContext, encodeMemberContext, MemberDirectory } from './members.js';

describe('MemberDirectory', () => {
  it('records a member’s generation from the entry that added it, and keeps it on promotion', () => {
    const d = new MemberDirectory([{ id: 1, peerAddr: 'a:1' }]);
    expect(d.get(1)?.since).toBeUndefined(); // an initial member: not dated
    d.upsert({ id: 4, peerAddr: 'a:4' }, 12); // addLearner at 12
    d.upsert({ id: 4, peerAddr: 'a:4', httpAddr: 'h:4' }, 15); // promoted at 15
    expect(d.get(4)).toEqual({ id: 4, peerAddr: 'a:4', httpAddr: 'h:4', since: 12 });
    // A joiner's directory names it (from its configuration) before it applies its own add: the caller says it joins.
    const joiner = new MemberDirectory([{ id: 5, peerAddr: 'a:5' }]);
    joiner.upsert({ id: 5, peerAddr: 'a:5' }, 17, true);
    expect(joiner.get(5)?.since).toBe(17);
    joiner.upsert({ id: 5, peerAddr: 'a:5' }, 19, false); // then promoted
    expect(joiner.get(5)?.since).toBe(17);
  });

  it('remembers a removed ID with the index of its removal, and a later removal replaces an earlier one', () => {
    const d = new MemberDirectory([{ id: 1, peerAddr: 'a:1' }]);
    d.upsert({ id: 4, peerAddr: 'a:4' }, 12);
    d.remove(4, 20);
    expect(d.get(4)).toBeUndefined();
    expect(d.removedAt(4)).toBe(20);
    d.upsert({ id: 4, peerAddr: 'a:4' }, 30); // only an older version re-adds (FS-24); the tombstone stays
    d.remove(4, 40);
    d.remove(4, 35); // never moves back
    expect(d.allRemoved()).toEqual([{ id: 4, removedAt: 40 }]);
    expect(d.removedAt(1)).toBeUndefined();
  });

  it('round-trips members and tombstones, and reads a snapshot written before tombstones existed', () => {
    const d = new MemberDirectory([{ id: 1, peerAddr: 'a:1' }]);
    d.upsert({ id: 2, peerAddr: 'a:2' }, 3);
    d.remove(7, 9);
    const back = MemberDirectory.decode(d.encode(), d.encodeRemoved());
    expect(back.all()).toEqual(d.all());
    expect(back.allRemoved()).toEqual([{ id: 7, removedAt: 9 }]);

    const old = MemberDirectory.decode(pack([{ id: 1, peerAddr: 'a:1' }]));
    expect(old.all()).toEqual([{ id: 1, peerAddr: 'a:1' }]);
    expect(old.allRemoved()).toEqual([]);
  });

  it('keeps the members encoding an older version reads: the tombstones travel separately', () => {
    const d = new MemberDirectory([{ id: 1, peerAddr: 'a:1' }]);
    d.remove(7, 9);
    // What an older version does with the members part of a snapshot (node.ts before FS-24).
    const asOld = new MemberDirectory(unpack<{ id: number; peerAddr: string }[]>(d.encode()));
    expect(asOld.all()).toEqual([{ id: 1, peerAddr: 'a:1' }]);
    // And with a snapshot's elements: it takes the first two and ignores the tombstones after them.
    const [sys, app] = unpack<[Uint8Array, Uint8Array]>(
      pack([d.encode(), new Uint8Array([1]), d.encodeRemoved()]),
    );
    expect(MemberDirectory.decode(sys).all()).toEqual(d.all());
    expect([...app]).toEqual([1]);
  });

  it('never puts a generation into a conf change’s context, nor takes one from it', () => {
    const ctx = encodeMemberContext({ peerAddr: 'a:4', since: 12 } as never);
    expect(decodeMemberContext(ctx)).toEqual({ peerAddr: 'a:4' });
    expect(decodeMemberContext(pack({ peerAddr: 'a:4', since: 99 }))).toEqual({ peerAddr: 'a:4' });
  });
});
