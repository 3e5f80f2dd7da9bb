// Review of FS-21: the simulated HTTP router's refused connections against what TCP does. A connect to a node whose
// process is down is refused only when the SYN and the RST both cross: across a cut client link nothing comes back
// (the SYN, or its RST, is lost) and the attempt ends by the client's timeout, as src/sim/full/peer-net.ts says of a
// SYN across a blocked link. The SDK skips its backoff after a refusal (FS-21), so a refusal the network would have
// lost makes the simulated client move on faster than a real one.
import { describe, expect, it } from 'vitest';
import type { FetchInit } from '../../client/http-transport.js';
import { HttpRouter } from './http-router.js';
import { QUIET_NET } from './network.js';
import type { NodeHost } from './node-host.js';
import { Machine, MachineClock, SimProcess } from './process.js';
import { testWorld } from './test-world.js';

const init: FetchInit = {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: '{}',
  redirect: 'manual',
  signal: new AbortController().signal,
};

describe('HttpRouter: a refused connection (FS-21 review)', () => {
  for (const dir of ['svc-1->1', '1->svc-1']) {
    it(`a request to a node that is down, across a cut client link (${dir}), is not refused: it times out`, async () => {
      const w = testWorld();
      const router = new HttpRouter(w, () => QUIET_NET);
      // A member whose process is down (its machine's kernel would answer a SYN with a RST, were it to arrive).
      router.addHost({ id: 1, httpAddr: 'n1:8080', up: false, removed: false } as unknown as NodeHost);
      const client = new SimProcess(
        w.sched,
        new Machine('svc-1', new MachineClock(w.sched, 1, 1000, Date.UTC(2026, 5, 1))),
        'svc-1#1',
        1,
      );
      router.blocked.add(dir);
      let outcome = 'pending';
      router
        .fetchFor(
          client,
          'svc-1',
          2000,
        )('http://n1:8080/v1/apps/a/workers/acquire', init)
        .then(
          () => {
            outcome = 'answered';
          },
          (e: unknown) => {
            const err = e as { name?: string; cause?: { code?: string } };
            outcome = err.cause?.code ?? err.name ?? 'error';
          },
        );
      await w.sched.runUntil(3_000_000);
      expect(outcome).toBe('TimeoutError');
    });
  }
});
