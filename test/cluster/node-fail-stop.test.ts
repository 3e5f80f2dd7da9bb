// Issue 9 item 6 with a real process: a node that finds durability lost stops (fail-stop) with
// its reason in the log and a non-zero exit code, instead of logging and carrying on.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PeerTransport } from '../../src/transport/index.js';
import { Cluster, until } from './harness.js';

let cluster: Cluster | undefined;
let impostor: PeerTransport | undefined;

afterEach(async () => {
  await impostor?.close();
  impostor = undefined;
  await cluster?.stopAll();
  cluster?.cleanup();
  cluster = undefined;
});

describe('fail-stop in floe serve (real processes)', () => {
  it('a peer reporting a commit index beyond the log stops the node with its reason and exit code 1', async () => {
    const secret = 'floe-test-cluster-secret-0123456789';
    cluster = await Cluster.create({ size: 3, secret });
    const node = cluster.node(1);
    node.start();
    const exited = once(node.proc!, 'exit') as Promise<[number | null, string | null]>;
    // Member 2, as node 1 knows it, claims entries are committed that node 1's log does not hold:
    // what a member sees when its own log lost acknowledged entries.
    const peer2 = cluster.node(2).spec;
    impostor = await PeerTransport.start({
      nodeId: 2,
      clusterId: 'floe',
      secret,
      listen: { host: '127.0.0.1', port: peer2.peerPort },
      peers: new Map([[1, `127.0.0.1:${node.spec.advertisedPeerPort}`]]),
      onMessage: () => {},
    });
    let code: number | null | undefined;
    void exited.then(([c]) => {
      code = c;
    });
    await until('node 1 to stop', async () => {
      impostor!.send([
        { type: 'heartbeat', from: 2, to: 1, term: 5, commit: 1_000, context: new Uint8Array() },
      ]);
      return code !== undefined ? true : undefined;
    });
    expect(code).toBe(1);
    const log = readFileSync(join(cluster.root, 'node-1.log'), 'utf8');
    expect(log).toMatch(
      /fatal: step of a heartbeat message from node 2: raft: commit 1000 is beyond the last index/,
    );
  }, 60_000);
});
