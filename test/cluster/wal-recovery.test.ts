// WAL recovery with real node processes (kill -9, then restart on the same data directory): a
// damaged complete record stops the node; a torn record is cut, the vote is fenced one term up, and
// the node rejoins.
import { once } from 'node:events';
import { appendFileSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeHardState } from '../../src/storage/payload.js';
import { encodeFrame, RecordType, readFrame, SEGMENT_PREAMBLE_BYTES } from '../../src/storage/record.js';
import { Cluster, type ClusterNode, type ClusterView, http, until, waitForLeader } from './harness.js';

let cluster: Cluster | undefined;

afterEach(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
  cluster = undefined;
});

async function view(node: ClusterNode): Promise<ClusterView | undefined> {
  const r = await http<ClusterView>(node.http, 'GET', '/v1/cluster', undefined, 1000);
  return r.status === 200 ? r.body : undefined;
}

async function incr(c: Cluster, times: number): Promise<void> {
  let failures = 0;
  for (let i = 0; i < times; i++) {
    const leader = await waitForLeader(c);
    const r = await http(c.node(leader).http, 'POST', '/v1/counters/c/incr', { by: 1 });
    if (r.status === 200) continue;
    // A leader change in between: retry on the new leader (bounded, so a real failure shows).
    if (++failures > 50) throw new Error(`incr keeps failing: ${r.status} ${JSON.stringify(r.body)}`);
    i--;
  }
}

/** The newest WAL segment of a node and the start offset of its last frame. */
function lastFrame(node: ClusterNode): { file: string; name: string; offset: number } {
  const dir = join(node.dataDir, 'wal');
  const name = readdirSync(dir)
    .filter((f) => f.endsWith('.wal'))
    .sort()
    .at(-1)!;
  const file = join(dir, name);
  const buf = readFileSync(file);
  let offset = SEGMENT_PREAMBLE_BYTES;
  let last = offset;
  for (;;) {
    const fr = readFrame(buf, offset);
    if (fr.kind !== 'ok') break;
    last = offset;
    offset = fr.next;
  }
  expect(offset, `${name} parses to its end`).toBe(buf.length);
  return { file, name, offset: last };
}

describe('WAL recovery (real processes)', () => {
  it('kill -9, then one flipped bit in the last fsynced record: the node refuses to start, naming the file and offset', async () => {
    cluster = await Cluster.create({ size: 1 });
    const node = cluster.nodes[0]!;
    node.start();
    await waitForLeader(cluster);
    await incr(cluster, 20);
    await node.kill9();

    const { file, name, offset } = lastFrame(node);
    const buf = readFileSync(file);
    expect(offset).toBeGreaterThan(SEGMENT_PREAMBLE_BYTES); // a record after the segment header
    buf[buf.length - 2] = buf[buf.length - 2]! ^ 0x10; // one bit, inside the last record's payload
    writeFileSync(file, buf);

    node.start();
    // Either the process exits, or (the bug) it starts and serves: do not wait for a timeout.
    let settled = false;
    const exited = once(node.proc!, 'exit').then(([code]) => ({ exited: code as number | null }));
    const served = until('the node to serve', async () => (settled ? true : view(node)), 30_000).then(
      () => ({ exited: undefined }),
      () => ({ exited: undefined }),
    );
    const outcome = await Promise.race([exited, served]);
    settled = true;
    await served;
    expect(outcome.exited, 'the node must stop, not cut a fsynced record').not.toBeUndefined();
    expect(outcome.exited).not.toBe(0);
    const log = readFileSync(join(cluster.root, 'node-1.log'), 'utf8');
    expect(log).toContain(`${name} at byte offset ${offset}`);
    expect(readFileSync(file), 'the refused open left the file as it was').toEqual(buf);
  });

  it('kill -9 with a torn tail whose payload holds frame-shaped bytes: the node cuts it, restarts fenced one term up and rejoins', async () => {
    cluster = await Cluster.create({ size: 3 });
    cluster.startAll();
    const leader = await waitForLeader(cluster);
    await incr(cluster, 30);
    const follower = cluster.nodes.find((n) => n.spec.id !== leader)!;
    const before = (await view(follower))!;
    await follower.kill9();

    // What a crash in the middle of appending a record leaves: its header and part of its payload.
    // The part that made it to disk holds a whole, valid frame (entry data can contain anything).
    const inner = encodeFrame(RecordType.hardState, encodeHardState({ term: 99, vote: 99, commit: 0 }));
    const payload = Buffer.concat([
      Buffer.from([0x91]),
      Buffer.alloc(20, 0xab),
      inner,
      Buffer.alloc(300, 0xcd),
    ]);
    const torn = encodeFrame(RecordType.entries, payload).subarray(0, 13 + 21 + inner.length + 7);
    const { file } = lastFrame(follower);
    const cutAt = readFileSync(file).length;
    appendFileSync(file, torn);

    follower.start();
    const back = await until(
      'the follower to rejoin',
      async () => {
        if (!follower.running) throw new Error(`node ${follower.spec.id} exited (code ${follower.exitCode})`);
        const v = await view(follower);
        return v && v.leader > 0 ? v : undefined;
      },
      30_000,
    );
    const log = readFileSync(join(cluster.root, `node-${follower.spec.id}.log`), 'utf8');
    expect(log).toMatch(new RegExp(`cut a torn record off the end of .* from offset ${cutAt} `));
    const fenced = /fenced from term (\d+) vote -?\d+ to term (\d+) with an unknown vote/.exec(log);
    expect(fenced, 'the warning reports the fence').not.toBeNull();
    expect(Number(fenced![2])).toBeGreaterThanOrEqual(before.term + 1);
    // The cluster moved past the fenced term, and the follower keeps up with new writes.
    expect(back.term).toBeGreaterThanOrEqual(Number(fenced![2]));
    await incr(cluster, 10);
    const lv = (await view(cluster.node(await waitForLeader(cluster))))!;
    await until('the follower to apply every write', async () => {
      const v = await view(follower);
      return v && v.applied >= lv.commit ? true : undefined;
    });
  });
});
