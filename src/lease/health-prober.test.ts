// Holder health, the leader's side (issue 13): failed probes refuse renewals; the lease still expires only after
// its deadline, as for a holder that crashed.
import { describe, expect, it } from 'vitest';
import { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import { checkHealthUrl } from './health-prober.js';
import { LeaseService } from './lease-service.js';
import { FakeTime, flush, InstantNode } from './test-doubles.js';

const TTL = 10_000;

function setup() {
  const time = new FakeTime();
  const sm = new LeaseStateMachine();
  const node = new InstantNode(sm, time, true);
  let healthy = true;
  const probed: string[] = [];
  const svc = new LeaseService({
    node,
    state: sm,
    clock: time,
    timers: time,
    defaultTtlMs: TTL,
    health: {
      intervalMs: 1000,
      failures: 3,
      probe: async (url) => {
        probed.push(url);
        return healthy;
      },
    },
  });
  return { time, sm, svc, probed, setHealthy: (h: boolean) => (healthy = h) };
}

describe('holder health probes on the leader', () => {
  it('refuses renewals after 3 failed probes in a row, and expires the lease only after its deadline', async () => {
    const s = setup();
    await flush();
    const a = await s.svc.acquire({
      app: 'app',
      nodeId: 'a',
      requestId: 'r',
      incarnation: 'p',
      healthUrl: 'http://10.0.0.7:8080/health',
    });
    if (!a.ok) throw new Error(a.message);
    await s.time.advance(2_500);
    expect(s.probed.length).toBeGreaterThanOrEqual(2);
    expect(await s.svc.renew({ app: 'app', workerId: a.workerId, token: a.token })).toMatchObject({
      ok: true,
    });
    const renewedAt = s.time.monotonicMs();
    s.setHealthy(false);
    await s.time.advance(3_000); // three failed rounds
    const refused = await s.svc.renew({ app: 'app', workerId: a.workerId, token: a.token });
    expect(refused).toMatchObject({ ok: false, code: 'lease_unhealthy' });
    // Round 4: a renewal with a wrong token must not reset the sick holder's health.
    expect(
      await s.svc.renew({
        app: 'app',
        workerId: a.workerId,
        token: a.token + 1,
        healthUrl: 'http://elsewhere/ok',
      }),
    ).toMatchObject({ ok: false });
    expect(await s.svc.renew({ app: 'app', workerId: a.workerId, token: a.token })).toMatchObject({
      code: 'lease_unhealthy',
    });
    expect((refused as { message: string }).message).toMatch(/failed 3 probes in a row/);
    // Not expired early: the lease lives until the deadline of its last acknowledged renewal ...
    await s.time.advance(renewedAt + TTL - 1 - s.time.monotonicMs());
    expect(s.sm.lease('app', a.workerId)?.token).toBe(a.token);
    // ... and is expired after it.
    await s.time.advance(2);
    await flush();
    expect(s.sm.lease('app', a.workerId)).toBeUndefined();
    await s.time.advance(1_000);
    expect(s.svc.health.size).toBe(0); // an ended lease is dropped at the next round
  });

  it('a probe that recovers before the third failure keeps the lease; bad URLs are refused naming healthUrl', async () => {
    const s = setup();
    await flush();
    const a = await s.svc.acquire({ app: 'app', nodeId: 'a', healthUrl: 'http://h/health' });
    if (!a.ok) throw new Error(a.message);
    s.setHealthy(false);
    await s.time.advance(2_000);
    s.setHealthy(true);
    await s.time.advance(1_000);
    expect(await s.svc.renew({ app: 'app', workerId: a.workerId, token: a.token })).toMatchObject({
      ok: true,
    });
    expect(checkHealthUrl('ftp://h/x')).toMatch(/healthUrl must use http or https/);
    expect(checkHealthUrl('x'.repeat(600))).toMatch(/healthUrl must be an http\(s\) URL of 1\.\.512/);
    expect(await s.svc.acquire({ app: 'app', nodeId: 'b', healthUrl: 'nope' })).toMatchObject({
      ok: false,
      code: 'invalid_argument',
    });
  });
});
