// The timer seam (issue 10 prep): with virtual timers and a virtual clock, the production runtime
// takes no step on its own. Ticks, Ready turns and timeouts happen only when the test runs them,
// which is what a deterministic simulator needs.
import { describe, expect, it } from 'vitest';
import type { Entry, HardState, Snapshot } from '../raft/types.js';
import { encodeKvCommand, type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { ProposalTimeoutError } from './errors.js';
import { MemoryNetwork, MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import type { NodeClock } from './seams.js';
import { VirtualTimers } from './test-doubles.js';

/** A storage whose saves never finish (a stuck disk). */
class StuckStorage extends MemoryNodeStorage {
  stuck = false;
  override save(batch: { hardState?: HardState; entries: Entry[]; snapshot?: Snapshot }): Promise<void> {
    if (this.stuck) return new Promise(() => {});
    return super.save(batch);
  }
}

function node(ids: number[], vt: VirtualTimers, storage = new StuckStorage({ voters: ids, learners: [] })) {
  const clock: NodeClock = { monotonicMs: () => vt.now, wallMs: () => 1_800_000_000_000 + vt.now };
  const transport = new MemoryNetwork().endpoint(1);
  const kv = new KvStateMachine();
  const n = new FloeNode<KvResult>({
    id: 1,
    storage,
    transport,
    stateMachine: kv,
    initialMembers: ids.map((id) => ({ id, peerAddr: `mem:${id}` })),
    tickMs: 10,
    electionTicks: 10,
    random: () => 0,
    clock,
    timers: vt,
    incarnation: new Uint8Array(8),
    proposalTimeoutMs: 1_000,
  });
  transport.bind(n);
  return { n, kv, storage };
}

describe('FloeNode with injected timers', () => {
  it('a single node elects itself and applies a proposal only as virtual immediates run', async () => {
    const vt = new VirtualTimers();
    const { n, kv } = node([1], vt);
    n.start();
    expect(n.isLeader).toBe(false); // nothing ran yet
    await vt.settle();
    expect(n.isLeader).toBe(true);
    const put = n.propose(encodeKvCommand({ op: 'put', key: 'k', value: 'v' }));
    await vt.settle();
    expect(await put).toMatchObject({ ok: true, value: 'v' });
    expect(kv.get('k')).toBe('v');
    await n.stop('test over');
  });

  it('ticks come from the virtual interval and the virtual clock', async () => {
    const vt = new VirtualTimers();
    const { n } = node([1, 2, 3], vt);
    n.start();
    await vt.settle();
    expect(n.status().role).toBe('follower');
    await vt.advance(10 * 10 * 2 + 10); // past the longest randomized election timeout
    expect(n.status().role).toBe('preCandidate');
    await n.stop('test over');
    expect(vt.pendingTimers).toBe(0);
  });

  it('a lost data-dir lock (NodeStorage.checkLock rejects) stops the node from its tick, about once a second (lock review F3)', async () => {
    const vt = new VirtualTimers();
    const storage = new (class extends StuckStorage {
      checks = 0;
      lost = false;
      checkLock(): Promise<void> {
        this.checks++;
        return this.lost
          ? Promise.reject(new Error('LOCK no longer names the locked file'))
          : Promise.resolve();
      }
    })({ voters: [1], learners: [] });
    const { n } = node([1], vt, storage);
    n.start();
    await vt.settle();
    await vt.advance(999);
    expect(storage.checks).toBe(0); // no check before a second has passed, and no timer of its own
    await vt.advance(1);
    expect(storage.checks).toBe(1);
    await vt.advance(1000);
    expect(storage.checks).toBe(2);
    expect(n.stopped).toBeUndefined();
    storage.lost = true;
    await vt.advance(1000);
    await vt.settle();
    expect(n.stopped).toMatch(/fatal: storage lock check: LOCK no longer names the locked file/);
  });

  it('a proposal times out on the virtual timer, not on a real one', async () => {
    const vt = new VirtualTimers();
    const { n, storage } = node([1], vt);
    n.start();
    await vt.settle();
    storage.stuck = true;
    const put = n.propose(encodeKvCommand({ op: 'put', key: 'k', value: 'v' })).catch((e: unknown) => e);
    await vt.settle();
    await vt.advance(999);
    let settled = false;
    void put.then(() => {
      settled = true;
    });
    await vt.settle();
    expect(settled).toBe(false);
    await vt.advance(1);
    expect(await put).toBeInstanceOf(ProposalTimeoutError);
  });
});
