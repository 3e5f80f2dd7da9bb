// Regression (review of the cluster identity, findings 2 and 3): on the etcd store the UUID was applied to the node's
// state before etcd held it (a write whose answer was lost left a UUID nobody else would ever name, never retried),
// and a Raft snapshot could wipe it. Now: created once in etcd (create-if-absent), named only once etcd answered.
import type { Etcd3 } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { EtcdClusterIdentity, MalformedClusterUidError } from './etcd-cluster-identity.js';

/** Just enough of etcd3's transaction builder: `if(key, 'Create', '==', 0).then(put).else(get).commit()`. */
class FakeEtcd {
  readonly kv = new Map<string, string>();
  /** The next commits throw; `applied` says whether the write took effect anyway (an answer lost). */
  failures: Array<{ applied: boolean }> = [];
  client(): Etcd3 {
    return {
      if: (key: string) => {
        let value = '';
        const b = {
          // biome-ignore lint/suspicious/noThenProperty: etcd3's transaction builder is called `then`
          then: (put: { value: string }) => {
            value = put.value;
            return b;
          },
          else: () => b,
          commit: async () => {
            const f = this.failures.shift();
            const absent = !this.kv.has(key);
            if (absent && (f === undefined || f.applied)) this.kv.set(key, value);
            if (f) throw new Error('deadline exceeded');
            if (absent) return { succeeded: true, responses: [] };
            return {
              succeeded: false,
              responses: [{ response_range: { kvs: [{ value: Buffer.from(this.kv.get(key) as string) }] } }],
            };
          },
        };
        return b;
      },
      put: (_k: string) => ({ value: (v: string) => ({ value: v }) }),
      get: (_k: string) => ({}),
    } as unknown as Etcd3;
  }
}

async function known(id: EtcdClusterIdentity): Promise<string> {
  for (let i = 0; i < 200; i++) {
    if (id.uid !== undefined) return id.uid;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error('never known');
}

const X = '11111111-2222-4333-8444-555555555555';
const Y = '66666666-7777-4888-9999-aaaaaaaaaaaa';

describe('EtcdClusterIdentity', () => {
  it('a write whose answer was lost names nothing until etcd answers; then every node names what etcd holds', async () => {
    const etcd = new FakeEtcd();
    etcd.failures.push({ applied: false }, { applied: false });
    const a = new EtcdClusterIdentity(etcd.client(), 'floe/cluster-uid', { mint: () => X, retryMs: 1 });
    a.start();
    expect(a.uid).toBeUndefined();
    const b = new EtcdClusterIdentity(etcd.client(), 'floe/cluster-uid', { mint: () => Y, retryMs: 1 });
    b.start();
    const [ua, ub] = [await known(a), await known(b)];
    expect(ua).toBe(ub);
    expect(etcd.kv.get('floe/cluster-uid')).toBe(ua);
    a.close();
    b.close();
  });

  it('a write applied whose answer was lost: the retry reads the UUID back instead of minting another', async () => {
    const etcd = new FakeEtcd();
    etcd.failures.push({ applied: true });
    let n = 0;
    const a = new EtcdClusterIdentity(etcd.client(), 'k', { mint: () => (n++ === 0 ? X : Y), retryMs: 1 });
    a.start();
    expect(await known(a)).toBe(X);
    a.close();
  });

  it('a hand-written key that holds no UUID is reported once, naming the key and what to do, and read again once fixed', async () => {
    const etcd = new FakeEtcd();
    etcd.kv.set('floe/cluster-uid', 'not-a-uuid');
    const errors: Array<[string, unknown]> = [];
    let attempts = 0;
    const client = etcd.client();
    const counting = {
      ...client,
      if: (key: string) => {
        attempts++;
        return client.if(key, 'Create', '==', 0);
      },
    } as unknown as Etcd3;
    const a = new EtcdClusterIdentity(counting, 'floe/cluster-uid', {
      mint: () => X,
      retryMs: 1,
      onError: (what, err) => errors.push([what, err]),
    });
    a.start();
    for (let i = 0; i < 1000 && attempts < 5; i++) await new Promise((r) => setTimeout(r, 2));
    expect(attempts).toBeGreaterThanOrEqual(5);
    expect(a.uid).toBeUndefined();
    expect(errors).toHaveLength(1);
    expect(errors[0]![0]).toBe('cluster identity: malformed etcd key');
    expect(errors[0]![1]).toBeInstanceOf(MalformedClusterUidError);
    expect((errors[0]![1] as Error).message).toMatch(
      /^etcd key floe\/cluster-uid holds "not-a-uuid", not a cluster UUID: .*delete the key/,
    );
    etcd.kv.set('floe/cluster-uid', Y);
    expect(await known(a)).toBe(Y);
    a.close();
  });
});
