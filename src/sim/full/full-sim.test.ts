import { describe, expect, it } from 'vitest';
import { runFullSim } from './run.js';

describe('full-stack simulation', () => {
  it('is deterministic: one seed gives the same trace hash and counts, whatever ran before it', async () => {
    const a = await runFullSim({ seed: 42, profile: 'chaos' });
    const other = await runFullSim({ seed: 43, profile: 'chaos' });
    const b = await runFullSim({ seed: 42, profile: 'chaos' });
    expect(a.traceLines).toBeGreaterThan(100);
    expect(b.traceHash).toBe(a.traceHash);
    expect(b.stats).toEqual(a.stats);
    expect(other.traceHash).not.toBe(a.traceHash);
  });

  it('is deterministic with the sequence workload and mixed-up replies, which pass every oracle', async () => {
    // The first seed from 7 on whose run mixes replies up (seed 7 did until stop 22's changes moved its run).
    let seed = 7;
    let a = await runFullSim({ seed, profile: 'net', seqClients: 2 });
    while (a.stats.mixedUpReplies === 0 && seed < 27)
      a = await runFullSim({ seed: ++seed, profile: 'net', seqClients: 2 });
    const b = await runFullSim({ seed, profile: 'net', seqClients: 2 });
    expect(b.traceHash).toBe(a.traceHash);
    expect(b.stats).toEqual(a.stats);
    expect(a.failure).toBeUndefined();
    expect(a.stats.seq.values).toBeGreaterThan(100);
    expect(a.stats.mixedUpReplies).toBeGreaterThan(0);
  });

  it('runs the production node, storage, lease service, HTTP API and SDK with no failure when nothing fails', async () => {
    const r = await runFullSim({ seed: 1, profile: 'quiet' });
    expect(r.failure).toBeUndefined();
    expect(r.stats.acknowledgedWrites).toBeGreaterThan(10);
    expect(r.stats.oracle.ids).toBeGreaterThan(1000);
    expect(r.stats.oracle.reusedWorkers).toBeGreaterThan(0);
    expect(r.stats.unattributedTimers).toBe(0);
    expect(r.stats.unsettledEvents).toBe(0);
  });

  it('injects the faults its seed drew (swarm: each seed its own mix)', async () => {
    const a = await runFullSim({ seed: 5, profile: 'swarm', seconds: 3 });
    const b = await runFullSim({ seed: 6, profile: 'swarm', seconds: 3 });
    expect(Object.keys(a.config.weights)).not.toEqual(Object.keys(b.config.weights));
    expect(Object.values(a.stats.faults.injected).reduce((x, y) => x + (y ?? 0), 0)).toBeGreaterThan(0);
  });

  // Swarm seeds 334353 and 339791 failed lease-overlap on d69b478: while a host was cut off (clientRestartCutOff),
  // another fault killed the process that had resumed from the cache around the fault's backward wall step, and the
  // next process resumed from a record written before the step. A wall step back across a restart is outside the
  // failure model (docs/client.md, "Clocks"); the harness no longer composes it. Both fail with faults.ts before it.
  it('a host cut off from the cluster is restarted only by its own fault (no resume across its backward wall step)', {
    timeout: 120_000,
  }, async () => {
    for (const seed of [334353, 339791]) {
      // 483619 draws RESP lease clients since they exist: 0 keeps its recorded run (the resume across a step back).
      const r = await runFullSim({ seed, profile: 'swarm', respLeaseClients: 0 });
      expect(r.failure, `seed ${seed}: ${r.failure?.detail}`).toBeUndefined();
    }
  });

  // Swarm seed 400777 failed lease-overlap on 27aa1dd: a client's retried acquire applied just before the leader's
  // expiry of its lease, in one batch; the answer said "granted", and 160 ms later the worker ID went to another
  // client while the first one used it for a fresh TTL. Fixed in LeaseService.acquire (an answer whose lease is no
  // longer live is lease_expired) and the SDK (lease_expired on an acquire: acquire again). Fails before the fix.
  it('a retried acquire answered after its lease expired in the same batch is not a second holder (seed 400777)', {
    timeout: 120_000,
  }, async () => {
    const r = await runFullSim({ seed: 400777, profile: 'swarm' });
    expect(r.failure, r.failure?.detail).toBeUndefined();
  });

  // Swarm seed 451036 failed liveness on f2b28f9 (harness): over the production transport, a 200 ms election timeout
  // (tick 20 ms) and background loss (TCP retransmissions of 200 ms and more) kept a 2-voter cluster electing after the
  // heal; each new leader gave every lease a full TTL, so leases whose grants never reached their clients held the
  // 4-ID pool. After the heal such seeds get a network with no loss, and no connection resets.
  it('a healed cluster whose election timeout is under two TCP retransmissions is not kept electing (seed 451036)', {
    timeout: 120_000,
  }, async () => {
    // respLeaseClients 0: the seed draws RESP lease clients since they exist; the pin keeps its recorded run.
    const r = await runFullSim({ seed: 451036, profile: 'swarm', respLeaseClients: 0 });
    expect(r.failure, r.failure?.detail).toBeUndefined();
  });

  // Swarm seed 461379 failed liveness on 439b64f (harness): SDK clients drew generator options the SDK refuses for
  // their TTL (backwardsToleranceMs 1,000, maxLeadMs 2,000), kept their leases without generating, and held the pool.
  it('SDK clients draw only generator options the SDK accepts, and hand back a lease they cannot use (seed 461379)', {
    timeout: 120_000,
  }, async () => {
    // It draws production defaults since they exist (10 s leases, where the SDK accepts those options): off keeps its run.
    const r = await runFullSim({ seed: 461379, profile: 'swarm', respLeaseClients: 0, defaults: 'off' });
    expect(r.failure, r.failure?.detail).toBeUndefined();
    expect(r.stats.clients.issued).toBeGreaterThan(0);
  });

  // Swarm seed 483645 failed linearizability on a406fed: the network duplicated a read a follower forwarded; the
  // leader, back from a machine suspend in its old term, took a late ack of the heartbeat it had sent for the first
  // copy as confirming the second, and answered every read queued before it with a stale value (FS-14, src/raft).
  // Swarm seed 483619 failed lease-overlap on a406fed: a process resumed its cached lease across a backward wall step
  // (documented as outside P1 for at most the step; the oracle now exempts exactly that).
  it('a duplicated forwarded read is never confirmed by an old ack (483645); a resume across a wall step back (483619)', {
    timeout: 120_000,
  }, async () => {
    for (const seed of [483645, 483619]) {
      // 483619 draws RESP lease clients since they exist: 0 keeps its recorded run (the resume across a step back).
      const r = await runFullSim({ seed, profile: 'swarm', respLeaseClients: 0 });
      expect(r.failure, `seed ${seed}: ${r.failure?.detail}`).toBeUndefined();
    }
  });

  // Swarm seed 1015218 failed liveness on d7ac67b (FS-19): every member three SDK clients were configured with had
  // been replaced, and the balancer in front of the cluster landed mostly on processes started to join and never
  // added (their `addMember` was dropped during a leadership transfer), answering 503 not_leader with nothing else.
  // Fixed in production: the SDK learns the leader from redirects (the members such an answer lists are for operators).
  it('a client whose configured members were all replaced finds the leader behind a balancer of non-members (1015218)', {
    timeout: 120_000,
  }, async () => {
    const r = await runFullSim({ seed: 1015218, profile: 'swarm' });
    expect(r.config.productionDefaults).toBeTruthy();
    expect(r.failure, r.failure?.detail).toBeUndefined();
  });

  // Swarm seed 1410929 failed liveness on 13bb44d (harness): with n3's data corrupt (a flip at rest) and n2 down after
  // an fsync EIO, the membership fault removed n2, not n3, leaving voters {n1, n3}: no healthy quorum, yet not
  // exempted (the restarted n1 had not applied the removal). The fault now removes a corrupt member first.
  it('the membership fault removes the member with corrupt data before one that failed otherwise (1410929)', {
    timeout: 120_000,
  }, async () => {
    const r = await runFullSim({ seed: 1410929, profile: 'swarm' });
    expect(r.failure, r.failure?.detail).toBeUndefined();
  });

  // FS-20 in production: with the harness's order before its fix (a member that failed otherwise first), n1 asks to
  // remove n2 while n3's data is corrupt. The leader's strict reconfiguration check now refuses it (voters {n1, n3}
  // would have one active member of the two a quorum needs): nothing is proposed and the cluster stays live. Forced
  // past the check, the removal commits and leaves voters {n1, n3} with n3 corrupt: no healthy quorum, no leader.
  // On 13bb44d that run failed liveness (the restarted n1 had not applied the removal, so the liveness exemption did
  // not see it); since the SDK moves on from a refused connection at once (FS-21) the clients' writes moved the
  // removal's log index (118, was 112) and n1 has applied it by the end, so the run is exempted, naming the cause.
  it('the leader refuses to remove a healthy voter while another is corrupt, and the cluster stays live (FS-20, 1410929)', {
    timeout: 120_000,
  }, async () => {
    const lines: string[] = [];
    // This seed draws --leader-lease since the simulator draws it (stop 33), which moves its membership steps: the
    // run before it is kept with the lease off. Since stop 34 every member keeps the followers' side of leader leases,
    // which moved its run again (no other seed of 3,500 searched runs this scenario): the switch
    // `lease-promise-opt-in` keeps the run it had. With no member using a lease the promise protects nothing here;
    // what the test checks (the removal check, the liveness exemption) does not depend on it.
    const refused = await runFullSim({
      seed: 1410929,
      profile: 'swarm',
      leaderLease: false,
      bugs: ['lease-promise-opt-in'],
      removal: { failedFirst: true },
      verbose: (l) => lines.push(l),
    });
    expect(refused.failure, refused.failure?.detail).toBeUndefined();
    expect(refused.stats.faults.unsafeRemovalsRefused).toBe(1);
    expect(lines.some((l) => /fault: n1 removes n2$/.test(l))).toBe(true);
    expect(
      lines.some((l) =>
        /fault: remove n2: UnsafeRemovalError: removing voter 2 would leave voters \[1, 3\], of which 1 is known active/.test(
          l,
        ),
      ),
    ).toBe(true);
    const forcedLines: string[] = [];
    const forced = await runFullSim({
      seed: 1410929,
      profile: 'swarm',
      leaderLease: false,
      bugs: ['lease-promise-opt-in'],
      removal: { failedFirst: true, force: true },
      verbose: (l) => forcedLines.push(l),
    });
    expect(forced.failure, forced.failure?.detail).toBeUndefined();
    expect(forced.livenessExempt).toBe(true);
    expect(forced.stats.faults.unsafeRemovalsRefused).toBe(0);
    expect(forcedLines.some((l) => /fault: n1 removes n2 \(force\)$/.test(l))).toBe(true);
    expect(
      forcedLines.some((l) =>
        /liveness not required: voters \[1,3\] with corrupt data on n3 leave no healthy quorum/.test(l),
      ),
    ).toBe(true);
  });

  // Swarm seed 1440006 failed liveness on 19de8ce (FS-21, src/client): a client started with the three initial members
  // (all removed and down) and the balancer waited a backoff step after each refused connection, so it reached the
  // balancer once every 3-4 s, where it mostly landed on a process never added (503 not_ready): svc-10 issued no ID
  // for 30 s after healing. A refused connection now costs no wait; the client backs off once per round.
  it('a client whose configured members are all gone reaches the balancer every round (FS-21, 1440006)', {
    timeout: 120_000,
  }, async () => {
    const r = await runFullSim({ seed: 1440006, profile: 'swarm' });
    expect(r.config.productionDefaults).toBeTruthy();
    expect(r.failure, r.failure?.detail).toBeUndefined();
  });
});
