// Hostile clients inside the simulation (issue 10): strangers on the peer transport's port (peer-strangers.ts) and
// hostile RESP clients (resp-hostile.ts).
// With a test-only switch put back, a pinned seed of the `hostile` profile fails on the stranger oracle, and the
// same seed passes without it.
import { describe, expect, it } from 'vitest';
import { runFullSim } from './run.js';

describe('hostile clients', () => {
  it('a listener that skips the AUTH proof check lets a stranger reach Raft (hostile seed 1)', {
    timeout: 120_000,
  }, async () => {
    const opts = { seed: 1, profile: 'hostile', peerStrangers: true, respHostile: false };
    const bad = await runFullSim({ ...opts, bugs: ['transport-skip-proof'] });
    expect(bad.failure?.kind).toBe('peer-stranger');
    expect(bad.failure?.detail).toMatch(/delivered a stranger's heartbeat/);
    const good = await runFullSim(opts);
    expect(good.failure).toBeUndefined();
    expect(good.stats.peerStrangers?.connections).toBeGreaterThan(0);
    expect(good.stats.peerStrangers?.accepted).toBe(0);
  });

  it('a listener without maxPendingHandshakes lets slow handshakes pile up (hostile seed 1)', {
    timeout: 120_000,
  }, async () => {
    const bad = await runFullSim({
      seed: 1,
      profile: 'hostile',
      peerStrangers: true,
      respHostile: false,
      bugs: ['transport-no-pending-limit'],
    });
    expect(bad.failure?.kind).toBe('peer-stranger');
    expect(bad.failure?.detail).toMatch(/pending handshakes \(maxPendingHandshakes 4\)/);
  });

  it('a RESP connection that never arms requestTimeoutMs keeps a slowloris client for ever (hostile seed 2)', {
    timeout: 120_000,
  }, async () => {
    const opts = { seed: 2, profile: 'hostile', peerStrangers: false, respHostile: true };
    const bad = await runFullSim({ ...opts, bugs: ['resp-no-request-timeout'] });
    expect(bad.failure?.kind).toBe('resp-hostile');
    expect(bad.failure?.detail).toMatch(/unterminated .* did not close the connection/);
    const good = await runFullSim(opts);
    expect(good.failure).toBeUndefined();
    expect(good.stats.respHostile?.errorsClosed).toBeGreaterThan(0);
    expect(good.stats.respHostile?.pipelinedReplies).toBeGreaterThan(0);
  });

  // FS-18 (fixed): the request timer ran only while bytes were buffered, so a request that stopped right after a CRLF
  // was never timed out (34 of hostile 1–100 failed, first 6, before the fix in client-connection.ts). The old
  // harness workaround is off by default now; the seed passes with hostile requests ending at every boundary.
  it('FS-18 (fixed): a request left unfinished right after a CRLF is timed out (hostile seed 6)', {
    timeout: 120_000,
  }, async () => {
    const opts = { seed: 6, profile: 'hostile', peerStrangers: false, respHostile: true };
    const r = await runFullSim({ ...opts, workarounds: [] });
    expect(r.failure).toBeUndefined();
    expect(r.stats.respHostile?.errorsClosed).toBeGreaterThan(0);
  });
});
