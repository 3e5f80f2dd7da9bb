// The machine's CLOCK_MONOTONIC of a boot (SimProcess.bootMonoMs), which the SDK gets declared system-wide in the seeds
// that draw `machineMonotonic` (stream `config-late7-sysmono`), so FloeClient.resume's trusted branch — what users run
// by default — runs inside the simulation.
import { describe, expect, it } from 'vitest';
import { drawConfig, drawMachineMonotonic } from './config.js';
import { Machine, MachineClock, SimProcess } from './process.js';
import { runFullSim } from './run.js';
import { Scheduler } from './scheduler.js';

describe('the machine monotonic clock of a boot', () => {
  it('is one clock for every process of the boot, stops in a suspend, and starts from 0 after a reboot', async () => {
    const s = new Scheduler();
    const m = new Machine('h', new MachineClock(s, 1, 5_000, 0));
    const a = new SimProcess(s, m, 'h#1', 1);
    await s.runUntil(1_000_000);
    const b = new SimProcess(s, m, 'h#2', 2);
    expect(a.bootMonoMs()).toBe(6_000);
    expect(b.bootMonoMs()).toBe(a.bootMonoMs());
    m.suspend();
    await s.runUntil(3_000_000);
    expect(b.bootMonoMs()).toBe(6_000);
    expect(b.wallMs()).toBe(3_000);
    m.resume();
    await s.runUntil(4_000_000);
    expect(b.bootMonoMs()).toBe(7_000);
    a.kill();
    b.kill();
    const boot = m.bootId;
    m.reboot();
    expect(m.bootId).not.toBe(boot);
    const c = new SimProcess(s, m, 'h#3', 3);
    expect(c.bootMonoMs()).toBe(0);
    await s.runUntil(4_500_000);
    expect(c.bootMonoMs()).toBe(500);
    expect(c.monoMs()).toBe(7_500); // the machine clock the simulator's timers run on goes on
  });

  it('is drawn from a stream of its own: a seed that does not draw it has the configuration it had', () => {
    let drawn = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const c = drawConfig(seed, 'swarm');
      expect(c.machineMonotonic === true).toBe(drawMachineMonotonic(seed));
      if (c.machineMonotonic) drawn++;
      const { machineMonotonic: _m, ...rest } = c;
      expect(drawConfig(seed, 'swarm', { machineMonotonic: false })).toEqual(rest);
    }
    expect(drawn).toBeGreaterThan(10);
    expect(drawn).toBeLessThan(30);
  });

  it('clients seed 79: replacements resume on the cached monotonic deadline (the trusted branch), and the oracles pass', {
    timeout: 120_000,
  }, async () => {
    let trusted = 0;
    const r = await runFullSim({
      seed: 79,
      profile: 'clients',
      verbose: (line) => {
        if (line.includes('resumed from cache') && line.includes('on the cached monotonic deadline'))
          trusted++;
      },
    });
    expect(r.failure).toBeUndefined();
    expect(trusted).toBeGreaterThan(0);
  });
});
