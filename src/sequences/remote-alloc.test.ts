import { describe, expect, it } from 'vitest';
import { CLUSTER_UID_HEADER } from '../client/cluster-pin.js';
import { httpRemoteAlloc, RemoteAllocError } from './remote-alloc.js';

const A = '0b6f5a8e-6a43-4d8c-9a4e-2f1d3c5b7a90';
const B = 'f3c1d2e4-1111-4222-8333-444455556666';
const cmd = { key: 'orders', count: 10, owner: 'node-2', requestId: 'r1', exact: false };

/** A leader whose answer is a segment, naming cluster `named` in its header. */
function allocFrom(named: string | undefined, own: string | undefined) {
  return httpRemoteAlloc({
    secret: 's',
    leaderHttpAddr: () => '127.0.0.1:7380',
    clusterUid: () => own,
    fetch: async () => ({
      status: 200,
      headers: { get: (n: string) => (n === CLUSTER_UID_HEADER ? (named ?? null) : null) },
      json: async () => ({ ok: true, key: 'orders', start: '1', end: '11' }),
    }),
  });
}

describe('httpRemoteAlloc checks the leader names this node’s cluster (review 2 of the cluster identity, finding 5)', () => {
  it('takes a segment from a leader of its own cluster', async () => {
    await expect(allocFrom(A, A)(cmd as never)).resolves.toMatchObject({ ok: true, end: '11' });
  });

  it("refuses a segment from another cluster's node, one naming none, and any before this node knows its own", async () => {
    await expect(allocFrom(B, A)(cmd as never)).rejects.toThrow(RemoteAllocError);
    await expect(allocFrom(B, A)(cmd as never)).rejects.toThrow(/names cluster f3c1d2e4.*answer refused/);
    await expect(allocFrom(undefined, A)(cmd as never)).rejects.toThrow(/names cluster none/);
    await expect(allocFrom(A, undefined)(cmd as never)).rejects.toThrow(
      /does not know its cluster's UUID yet: no segment asked for/,
    );
  });
});
