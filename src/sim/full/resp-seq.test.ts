// The sequence clients that speak RESP (the production ClientConnection over the simulated TCP link) and
// use the SDK's FloeSequence: they run, deterministically, and a reply that does not answer its request
// is caught.
import { describe, expect, it } from 'vitest';
import { drawConfig } from './config.js';
import { encodeCommand, ReplyParser } from './resp-client.js';
import { runFullSim } from './run.js';

describe('RESP reply parser', () => {
  it('parses every RESP2 reply type, split at any byte', () => {
    const wire = Buffer.from(
      ':42\r\n+OK\r\n-MOVED 1 n2:6379\r\n$3\r\nabc\r\n$-1\r\n*2\r\n:7\r\n:12\r\n*-1\r\n',
    );
    for (let cut = 0; cut <= wire.length; cut++) {
      const p = new ReplyParser();
      const got: unknown[] = [];
      for (const part of [wire.subarray(0, cut), wire.subarray(cut)]) {
        p.push(part);
        for (let r = p.next(); r !== undefined; r = p.next()) got.push(r);
      }
      expect(got).toEqual([
        { type: 'int', value: 42n },
        { type: 'simple', value: 'OK' },
        { type: 'error', value: 'MOVED 1 n2:6379' },
        { type: 'bulk', value: 'abc' },
        { type: 'bulk', value: null },
        {
          type: 'array',
          value: [
            { type: 'int', value: 7n },
            { type: 'int', value: 12n },
          ],
        },
        { type: 'array', value: null },
      ]);
      expect(p.buffered).toBe(0);
    }
  });

  it('refuses bytes that are no reply', () => {
    const p = new ReplyParser();
    p.push(Buffer.from('?what\r\n'));
    expect(p.next()).toBeInstanceOf(Error);
  });

  it('encodes a command as a RESP array of bulk strings', () => {
    expect(encodeCommand(['INCRBY', 'seq-strict', '3']).toString()).toBe(
      '*3\r\n$6\r\nINCRBY\r\n$10\r\nseq-strict\r\n$1\r\n3\r\n',
    );
  });
});

describe('sequence clients over RESP and FloeSequence in the full simulator', () => {
  it('client kinds: off without sequence clients, all three with 3 clients', () => {
    expect(drawConfig(3, 'swarm').seq).toMatchObject({ clients: 0, kinds: [] });
    const kinds = drawConfig(6000, 'swarm', { seqClients: 3 }).seq.kinds;
    expect([...kinds].sort()).toEqual(['http', 'resp', 'sdk']);
    for (let seed = 1; seed <= 50; seed++)
      expect(drawConfig(seed, 'swarm', { seqClients: 1 }).seq.kinds[0]).not.toBe('sdk');
  });

  it('a seed with 3 sequence clients issues values over RESP and through FloeSequence, the same way twice', {
    timeout: 120_000,
  }, async () => {
    const a = await runFullSim({ seed: 6003, seqClients: 3 });
    expect(a.failure).toBeUndefined();
    expect(a.stats.seq.respOk).toBeGreaterThan(10);
    expect(a.stats.seq.respMoved).toBeGreaterThan(0);
    expect(a.stats.seq.sdkValues).toBeGreaterThan(10);
    expect(a.stats.unattributedTimers).toBe(0);
    const b = await runFullSim({ seed: 6003, seqClients: 3 });
    expect(b.traceHash).toBe(a.traceHash);
    expect(b.stats.seq).toEqual(a.stats.seq);
  });

  it('teeth: RESP replies mixed up between requests are caught, never taken as values', {
    timeout: 120_000,
  }, async () => {
    const r = await runFullSim({ seed: 6000, seqClients: 3, bugs: ['resp-reply-mixup'] });
    expect(r.failure?.kind).toMatch(/^(duplicate-id|reply-mismatch|sequence-order)$/);
    expect((await runFullSim({ seed: 6000, seqClients: 3 })).failure).toBeUndefined();
  });

  it('sequence clients crash mid-call and restart (RESP connections and FloeSequence buffers die with them), with no duplicate or step back', {
    timeout: 240_000,
  }, async () => {
    let crashes = 0;
    for (const seed of [6000, 6001, 6002]) {
      const r = await runFullSim({ seed, profile: 'clients', seqClients: 3 });
      expect(r.failure).toBeUndefined();
      crashes += r.stats.seq.crashes;
    }
    expect(crashes).toBeGreaterThan(2);
  });
});
