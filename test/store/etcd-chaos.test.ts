// Issue 14: the chaos history checker against the etcd store, at CI size. `npm run chaos -- --store etcd` starts a
// real 3-member etcd 3.4 and three `floe serve --store etcd` nodes (needs `npm run build`), runs SDK client processes
// with chaos.ts's client faults (pauses past their TTL, kill -9 inside bursts, restarts on a lease cache, twins,
// replacements, clock offsets), and injects kill -9 and SIGSTOP of the active Floe node (one past its etcd session)
// and kill -9 of an etcd follower and of the etcd leader. Then src/check/chaos-history.ts checks every ID and lease
// recorded; every violation count must be 0.
import { describe, expect, it } from 'vitest';
import { runChaos } from '../cluster/chaos-run.js';

describe('chaos against the etcd store (real etcd, real processes)', () => {
  it('0 duplicate IDs and 0 overlapping holders under active-node and etcd-member faults', async () => {
    const r = await runChaos(
      [
        '--store',
        'etcd',
        '--seconds',
        '40',
        '--clients',
        '6',
        '--pool-bits',
        '2',
        '--seed',
        '7',
        '--rate',
        '150000',
      ],
      'chaos --store etcd (CI size)',
      ['issuedAfterPause'],
    );
    expect(r.store).toBe('etcd');
    // The run checked something: IDs, worker IDs that changed hands, the server faults of the etcd mode.
    expect(r.ids).toBeGreaterThan(100_000);
    expect(r.reusedWorkerIds).toBeGreaterThan(0);
    expect(r.handOvers).toBeGreaterThan(0);
    const kinds = Object.keys(r.faults).join(' ');
    for (const k of [
      'kill9-active',
      'pause-active',
      'kill9-etcd-member',
      'kill9-etcd-leader',
      'kill9-client',
    ])
      expect(kinds).toContain(k);
  }, 120_000);
});
