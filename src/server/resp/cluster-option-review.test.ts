import { afterEach, describe, expect, it } from 'vitest';
import { FakeCluster } from './fake-backend.js';
import { startRespServer } from './server.js';
import { RawClient, RespErr } from './test-support.js';

// Review of 2a85b5b (RESP `CLUSTER uuid` option): scenarios where the claim "bad CLUSTER values get clear errors;
// option parsing stays correct for every other option (repeated options)" does not hold. Each test fails on 2a85b5b.

const OURS = '0b6f5a8e-6a43-4d8c-9a4e-2f1d3c5b7a90';
const THEIRS = '7d1e2c3b-0000-4a4a-8b8b-123456789abc';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

async function leaderOf(uid: string | undefined): Promise<{ c: RawClient; cluster: FakeCluster }> {
  const cluster = new FakeCluster();
  cluster.clusterUid = uid;
  const server = await startRespServer({ backend: cluster.backend(1) });
  cleanups.push(() => server.close());
  cluster.setMember(1, `127.0.0.1:${server.address.port}`);
  cluster.setLeader(1);
  const c = await RawClient.connect(server.address.port);
  cleanups.push(() => c.close());
  return { c, cluster };
}

const message = (r: unknown): string => (r instanceof RespErr ? r.message : `not an error: ${String(r)}`);

describe('review 2a85b5b: RESP CLUSTER option values and parsing', () => {
  // A client that reads the UUID from a file (`floe cluster uid > uid.txt`, then readFileSync) sends it with its
  // trailing newline. Over HTTP the same value works (Node strips a header value's surrounding whitespace). Over RESP
  // the node answers that it "belongs to cluster X; the request is meant for X " (the newline printed as a space):
  // it tells an operator that the client reached the WRONG cluster when it reached the right one with a malformed
  // value. Expected: accepted after trimming, or `-ERR invalid CLUSTER: ...` (a clear error), never cluster_mismatch.
  it('a CLUSTER value with a trailing newline (read from a uid file) is not answered cluster_mismatch by its own cluster', async () => {
    const { c, cluster } = await leaderOf(OURS);
    const r = await c.call('WORKER.ACQUIRE', 'orders', 'host-a', 'CLUSTER', `${OURS}\n`);
    expect(message(r)).not.toMatch(/cluster_mismatch/);
    // Either granted (trimmed) or refused as invalid before the backend is called.
    if (r instanceof RespErr) {
      expect(r.message).toMatch(/^ERR invalid CLUSTER/);
      expect(cluster.calls).toEqual([]);
    }
  });

  // A value that is not a UUID at all (a cluster *name* such as `prod`, a truncated paste) is not "another cluster":
  // the claim promises a clear error for a bad CLUSTER value, and the error table's cluster_mismatch means "it reached
  // the wrong cluster" (the simulator even counts it as a node misreporting its identity). Only empty and >64-byte
  // values are refused as invalid; everything else is reported as a mismatch.
  it('a CLUSTER value that is not a UUID (a cluster name, a truncated paste) is ERR invalid CLUSTER, not cluster_mismatch', async () => {
    const { c, cluster } = await leaderOf(OURS);
    for (const bad of ['prod', OURS.slice(0, 35), `{${OURS}}`]) {
      const r = await c.call('WORKER.ACQUIRE', 'orders', 'host-a', 'CLUSTER', bad);
      expect(message(r), JSON.stringify(bad)).toMatch(/^ERR invalid CLUSTER/);
    }
    expect(cluster.calls).toEqual([]);
  });

  // docs/resp.md: "Options repeat with the last value winning". WORKER.* and SNOWFLAKE.NEXT take the last CLUSTER;
  // SEQ.ALLOC alone answers `-ERR syntax error` (it accepts exactly `key n CLUSTER uuid`). A client library that
  // appends `CLUSTER uuid` to every Floe command it sends breaks SEQ.ALLOC only.
  it('SEQ.ALLOC with the CLUSTER option repeated takes the last value, as every other option does', async () => {
    const { c } = await leaderOf(OURS);
    // The fake backend serves no sequences: an answer past parsing and the check is "sequences are not served".
    const worker = await c.call('WORKER.ACQUIRE', 'orders', 'host-a', 'CLUSTER', THEIRS, 'CLUSTER', OURS);
    expect(message(worker)).toMatch(/^not an error/);
    const sf = await c.call('SNOWFLAKE.NEXT', 'orders', 'CLUSTER', THEIRS, 'CLUSTER', OURS);
    expect(message(sf)).not.toMatch(/syntax error|cluster_mismatch/);
    const seq = await c.call('SEQ.ALLOC', 'orders', '10', 'CLUSTER', THEIRS, 'CLUSTER', OURS);
    expect(message(seq)).not.toBe('ERR syntax error');
    expect(message(seq)).not.toMatch(/cluster_mismatch/);
  });
});
