import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { FloeNode } from '../node/node.js';
import { leaseNodeOf } from './floe-node-adapter.js';

/** Just what the adapter reads of a FloeNode: its role events and its term. */
class FakeNode extends EventEmitter {
  term = 1;
  status() {
    return { term: this.term };
  }
}

describe('leaseNodeOf', () => {
  it('reports a leadership in a later term as a new one (down, then up), so lease deadlines start anew', () => {
    const n = new FakeNode();
    const seen: boolean[] = [];
    leaseNodeOf(n as unknown as FloeNode<unknown>).onRoleChange((leading) => seen.push(leading));
    n.term = 2;
    n.emit('role', 'leader', 1);
    n.term = 4; // leader again two terms later, with no follower event in between
    n.emit('role', 'leader', 1);
    n.emit('role', 'follower', 2);
    n.emit('stopped');
    expect(seen).toEqual([true, false, true, false, false]);
  });
});
