// Found by an adversarial review of the pipelined-INCR fast paths (97ed4d2, 5971b85): a delete whose proposal timed
// out (outcome unknown) and was applied later left the key's strict serving state behind; incrByNow and
// incrRepeatedNow served from it without looking at the replicated state, where incrBy refuses (not_found) or takes
// the node-mode path. Both tests fail before the fix.
import { describe, expect, it } from 'vitest';
import { unpack } from '../node/envelope.js';
import { ProposalTimeoutError } from '../node/errors.js';
import { SequenceStateMachine } from '../state/sequences/index.js';
import { type SequenceNode, SequenceService } from './sequence-service.js';

class Node implements SequenceNode {
  leader = true;
  currentTerm = 2;
  index = 0;
  /** The next delete times out (outcome unknown) and is applied a moment later, as a slow log would. */
  deleteTimesOut = false;
  constructor(readonly state: SequenceStateMachine) {}
  async propose(command: Uint8Array): Promise<unknown> {
    await Promise.resolve();
    const op = (unpack(command) as { op?: string }).op;
    const apply = () =>
      this.state.apply(command, { index: ++this.index, term: this.currentTerm, leaderTimeMs: 0 });
    if (op === 'delete' && this.deleteTimesOut) {
      this.deleteTimesOut = false;
      setImmediate(apply); // committed and applied after the client was told "outcome unknown"
      throw new ProposalTimeoutError(5000);
    }
    return apply();
  }
  async linearizableRead(): Promise<void> {
    await Promise.resolve();
  }
  isLeader = () => this.leader;
  term = () => this.currentTerm;
  onRoleChange() {
    return () => {};
  }
  notLeaderError = () => new Error('not the leader');
}

async function setup() {
  const state = new SequenceStateMachine();
  const node = new Node(state);
  let now = 0;
  const svc = new SequenceService({
    node,
    state,
    owner: 'node-1',
    monotonic: () => now,
    segmentLifetimeMs: 0,
  });
  await svc.create('orders', { step: 10 });
  await svc.create('other', { step: 10 });
  return { state, node, svc, advance: (ms: number) => (now += ms) };
}

/** A ReadIndex round that starts after `at` and confirms (another client's INCR on another key). */
async function roundAfter(svc: SequenceService, at: number): Promise<void> {
  await svc.incrBy('other', 1n, { arrivedAt: at });
}

describe('a delete whose outcome was unknown, applied later', () => {
  it('the inline path answers INCR on a deleted key; incrBy (the slow path) refuses it', async () => {
    const { svc, node, state, advance } = await setup();
    expect(await svc.incrBy('orders', 1n, { arrivedAt: advance(1) })).toBe(1n);
    node.deleteTimesOut = true;
    await expect(svc.delete('orders')).rejects.toBeInstanceOf(ProposalTimeoutError);
    await new Promise((r) => setImmediate(r));
    expect(state.get('orders')).toBeUndefined(); // the delete was applied
    const at = advance(1);
    await roundAfter(svc, at);
    // Slow path: refused, the key does not exist.
    await expect(svc.incrBy('orders', 1n, { arrivedAt: at })).rejects.toMatchObject({
      refusal: { code: 'not_found' },
    });
    // Fast paths (a pipelined INCR, copies): they refuse too (undefined / []: the slow path then answers).
    expect(svc.incrByNow('orders', 1n, at)).toBeUndefined();
    expect(svc.incrRepeatedNow('orders', 1n, 3, at)).toEqual([]);
  });

  it('recreated in node mode: a pipelined INCR steps back below the node-mode values this node already gave', async () => {
    const { svc, node, advance } = await setup();
    expect(await svc.incrBy('orders', 1n, { arrivedAt: advance(1) })).toBe(1n);
    node.deleteTimesOut = true;
    await expect(svc.delete('orders')).rejects.toBeInstanceOf(ProposalTimeoutError);
    await new Promise((r) => setImmediate(r));
    await svc.create('orders', { step: 10, mode: 'node' });
    const at = advance(1);
    const nodeValue = await svc.incrBy('orders', 1n, { arrivedAt: at }); // node mode: above the tombstone
    expect(nodeValue).toBeGreaterThan(10n);
    await roundAfter(svc, at);
    const next = svc.incrByNow('orders', 1n, at) ?? (await svc.incrBy('orders', 1n, { arrivedAt: at }));
    // node mode promises values increasing per node: the next one must be above nodeValue.
    expect(next).toBeGreaterThan(nodeValue);
  });
});
