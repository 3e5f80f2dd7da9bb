// Helpers shared by the lease tests (not part of the public API).
import type { ApplyContext } from '../../node/state-machine.js';
import { encodeLeaseCommand } from './codec.js';
import { LeaseStateMachine } from './lease-state-machine.js';
import type { AcquireOk, LeaseCommand, LeaseError, LeaseResult } from './types.js';

export interface AcquireExtra {
  ttlMs?: number;
  requestId?: string;
  boundMs?: number;
  incarnation?: string;
  layout?: string;
}

/** A replica fed by a fake log: every command gets the next index and a leader time 1 s later. */
export class FakeLog {
  index = 0;
  timeMs = 1_700_000_000_000;
  constructor(readonly sm = new LeaseStateMachine()) {}

  ctx(): ApplyContext {
    this.index++;
    this.timeMs += 1000;
    return { index: this.index, term: 1, leaderTimeMs: this.timeMs };
  }

  run(cmd: LeaseCommand): LeaseResult {
    return this.sm.apply(encodeLeaseCommand(cmd), this.ctx());
  }

  acquire(app: string, nodeId: string, extra: AcquireExtra = {}) {
    return this.run({
      op: 'acquire',
      app,
      nodeId,
      ttlMs: extra.ttlMs ?? 10_000,
      requestId: extra.requestId ?? `req-${nodeId}`,
      ...(extra.boundMs === undefined ? {} : { boundMs: extra.boundMs }),
      ...(extra.incarnation === undefined ? {} : { incarnation: extra.incarnation }),
      ...(extra.layout === undefined ? {} : { layout: extra.layout }),
    });
  }

  /** Acquire that must succeed. */
  grant(app: string, nodeId: string, extra: AcquireExtra = {}) {
    const r = this.acquire(app, nodeId, extra);
    if (!r.ok || r.op !== 'acquire') throw new Error(`acquire failed: ${JSON.stringify(r)}`);
    return r as AcquireOk;
  }
}

export function expectError(r: LeaseResult): LeaseError {
  if (r.ok) throw new Error(`expected an error, got ${JSON.stringify(r)}`);
  return r;
}
