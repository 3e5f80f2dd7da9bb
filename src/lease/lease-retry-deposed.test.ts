// FS-13's adversarial review: a retried acquire answered by a leader that lost its term, with its own expiry of the
// lease behind the retry in the log (committed by the next leader), must not be a grant.
import { describe, expect, it } from 'vitest';
import { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import type { AcquireOk } from '../state/leases/types.js';
import { LeaseService } from './lease-service.js';
import { FakeTime, flush, InstantNode } from './test-doubles.js';

const TTL = 10_000;

function setup() {
  const time = new FakeTime();
  const sm = new LeaseStateMachine();
  const node = new InstantNode(sm, time, true);
  const svc = new LeaseService({ node, state: sm, clock: time, timers: time, defaultTtlMs: TTL });
  return { time, sm, node, svc };
}

describe('FS-13 review: a retried acquire answered by a node that stopped leading', () => {
  it("is not answered with the lease: the old leader's expiry behind it frees the worker ID, and no second holder overlaps", async () => {
    const { time, node, svc } = setup();
    await flush();
    expect(await svc.configurePool('app', 1)).toMatchObject({ ok: true }); // 2 worker IDs
    // c5 holds worker 1 (and keeps it): worker 0 is the only other one.
    const c5 = (await svc.acquire({
      app: 'app',
      nodeId: 'c5',
      requestId: 'r5',
      incarnation: 'p5',
      ttlMs: 3_600_000,
    })) as AcquireOk;
    expect(c5.ok).toBe(true);
    // c4's first attempt is granted (token T) but the answer is lost.
    const first = (await svc.acquire({
      app: 'app',
      nodeId: 'c4',
      requestId: 'r',
      incarnation: 'p',
    })) as AcquireOk;
    expect(first.ok).toBe(true);
    await time.advance(TTL - 50);
    // c4 retries (same requestId, incarnation) 50 ms before the leader's deadline: entry e2 at index i.
    node.holdProposals = true;
    const sentAt = time.monotonicMs();
    const retry = svc.acquire({ app: 'app', nodeId: 'c4', requestId: 'r', incarnation: 'p' });
    await flush();
    // The deadline passes before e2 commits: the pump proposes expire(T), entry x at index i+1.
    await time.advance(50);
    expect(node.heldCount).toBe(2);
    // The leader loses leadership (higher term seen) in the same Ready in which it learns e2 (only) is committed:
    // node.ts keeps a proposal whose own entry is durably committed pending and answers it when applied.
    node.setLeader(false);
    node.releaseHeld(1); // e2 applies alone: the lease is live, retried
    const answer = (await retry.catch((e: Error) => ({ ok: false as const, code: e.name }))) as {
      ok: boolean;
      code?: string;
      retried?: boolean;
    };
    // The new leader commits x with its no-op (x is in its log): the worker ID is free at once.
    node.releaseHeld(1);
    node.holdProposals = false;
    node.setLeader(true);
    await flush();
    await time.advance(10);
    const other = (await svc.acquire({
      app: 'app',
      nodeId: 'c3',
      requestId: 'r3',
      incarnation: 'p3',
    })) as AcquireOk;
    expect(other.ok).toBe(true);
    // c4 counts a fresh TTL from its retry's send only if the answer was a grant.
    const c4HoldsUntil = answer.ok ? sentAt + TTL - (TTL / 10 + 100) : Number.NEGATIVE_INFINITY;
    const overlapMs = other.workerId === first.workerId ? c4HoldsUntil - time.monotonicMs() : 0;
    // P1: no other holder is granted c4's worker ID while c4 holds it. Failed before the fix: the answer was a retried grant
    // (token T, worker 1) and c3 gets worker 1 at t=10 010 ms while c4 holds it until 18 850 ms (overlap 8 840 ms).
    expect({ answer: answer.ok ? 'grant' : answer.code, overlapMs: Math.max(0, overlapMs) }).toEqual({
      answer: expect.anything(),
      overlapMs: 0,
    });
  });
});
