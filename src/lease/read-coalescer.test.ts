import { describe, expect, it } from 'vitest';
import { ReadCoalescer } from './read-coalescer.js';
import { flush } from './test-doubles.js';

/** A read source whose rounds the test finishes by hand. */
function manualReads() {
  const rounds: Array<{ resolve(): void; reject(e: Error): void }> = [];
  const read = () => new Promise<void>((resolve, reject) => rounds.push({ resolve, reject }));
  return { rounds, read };
}

function track(p: Promise<void>) {
  const s = { state: 'pending' as 'pending' | 'ok' | 'failed' };
  p.then(
    () => (s.state = 'ok'),
    () => (s.state = 'failed'),
  );
  return s;
}

describe('ReadCoalescer', () => {
  it('answers each caller only with a round that started after it asked', async () => {
    const { rounds, read } = manualReads();
    const c = new ReadCoalescer(read);
    const first = track(c.confirm());
    const later = Array.from({ length: 100 }, () => track(c.confirm()));
    expect(rounds.length).toBe(1); // the 100 wait for the next round
    rounds[0]!.resolve();
    await flush();
    expect(first.state).toBe('ok');
    expect(later.every((s) => s.state === 'pending')).toBe(true);
    expect(rounds.length).toBe(2); // started as soon as the first ended
    rounds[1]!.resolve();
    await flush();
    expect(later.every((s) => s.state === 'ok')).toBe(true);
    expect(c.stats).toEqual({ rounds: 2, waits: 101, reused: 0 });
  });

  it('fails the callers of a failed round, and the next caller starts a fresh one', async () => {
    const { rounds, read } = manualReads();
    const c = new ReadCoalescer(read);
    const a = track(c.confirm());
    const b = track(c.confirm());
    rounds[0]!.reject(new Error('no quorum'));
    await flush();
    expect(a.state).toBe('failed');
    rounds[1]!.reject(new Error('still no quorum'));
    await flush();
    expect(b.state).toBe('failed');
    const d = track(c.confirm());
    expect(rounds.length).toBe(3);
    rounds[2]!.resolve();
    await flush();
    expect(d.state).toBe('ok');
  });

  it('turns a synchronous throw into a failed round', async () => {
    const c = new ReadCoalescer(() => {
      throw new Error('stopped');
    });
    await expect(c.confirm()).rejects.toThrow('stopped');
    await expect(c.confirm()).rejects.toThrow('stopped');
  });
});
