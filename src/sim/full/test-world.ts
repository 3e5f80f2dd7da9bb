// A bare World for unit tests of the simulator's parts: no run around it, failures collected instead of ending one.
import { Prng } from '../prng.js';
import { Scheduler } from './scheduler.js';
import type { FailureKind, World } from './world.js';

export type TestWorld = World & { failures: Array<{ kind: FailureKind; detail: string }> };

export function testWorld(sched = new Scheduler()): TestWorld {
  const failures: Array<{ kind: FailureKind; detail: string }> = [];
  const root = new Prng(1);
  let pid = 0;
  return {
    sched,
    seed: 1,
    rng: (l) => root.fork(l),
    trace: () => {},
    nextPid: () => ++pid,
    register: () => {},
    isPidAlive: () => false,
    processByPid: () => undefined,
    fail: (kind, detail) => failures.push({ kind, detail }),
    bugs: new Set(),
    failures,
  };
}
