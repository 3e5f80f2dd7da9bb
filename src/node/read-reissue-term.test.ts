// Review of FS-14's fix, node side: a follower asks its pending reads again when its leader is elected again.
import { describe, expect, it } from 'vitest';
import type { Message } from '../raft/types.js';
import { type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import type { NodeClock, NodeTransport } from './seams.js';
import { VirtualTimers } from './test-doubles.js';

describe('FloeNode: pending reads across a new term under the same leader', () => {
  it('a follower whose leader is re-elected in a later term (lead 1 -> 1) asks its pending read again', async () => {
    const vt = new VirtualTimers();
    const sent: Message[] = [];
    const transport: NodeTransport = {
      send: (ms) => sent.push(...ms),
      addPeer: () => {},
      removePeer: () => {},
      close: async () => {},
    };
    const clock: NodeClock = { monotonicMs: () => vt.now, wallMs: () => 1_800_000_000_000 + vt.now };
    const n = new FloeNode<KvResult>({
      id: 2,
      storage: new MemoryNodeStorage({ voters: [1, 2, 3], learners: [] }),
      transport,
      stateMachine: new KvStateMachine(),
      initialMembers: [1, 2, 3].map((id) => ({ id, peerAddr: `mem:${id}` })),
      tickMs: 10,
      electionTicks: 10,
      random: () => 0,
      clock,
      timers: vt,
      incarnation: new Uint8Array(8),
      proposalTimeoutMs: 1_000,
    });
    n.start();
    await vt.settle();
    const hb = (term: number): Message =>
      ({
        type: 'heartbeat',
        from: 1,
        to: 2,
        term,
        commit: 0,
        context: new Uint8Array(0),
        sentTick: 0,
      }) as Message;
    n.onMessage(hb(2));
    await vt.settle();
    expect(n.status().lead).toBe(1);
    const read = n.linearizableRead().then(
      () => 'ok',
      (e: unknown) => String(e),
    );
    await vt.settle();
    const asked = () => sent.filter((m) => m.type === 'readIndex').length;
    expect(asked()).toBe(1);
    // Node 1 loses its term (its ReadOnly is reset: the read is forgotten) and wins term 4 with node 3's vote.
    n.onMessage(hb(4));
    await vt.settle();
    expect(n.status().term).toBe(4);
    // A new leadership knows nothing of the read: it must be asked again.
    expect(asked()).toBe(2); // before: 1, and the read ended in ReadTimeoutError
    const again = sent.filter((m) => m.type === 'readIndex').at(-1) as Message & { context: Uint8Array };
    n.onMessage({
      type: 'readIndexResp',
      from: 1,
      to: 2,
      term: 4,
      index: 0,
      context: again.context,
    } as Message);
    await vt.settle();
    expect(await read).toBe('ok');
    await n.stop('test over');
  });
});
