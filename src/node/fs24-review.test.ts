// Review of FS-24's fix (1c12f18): holes in the member directory it added. Every replica must hold the same
// directory given the same log (the generation `since` is meant to key FS-23's removal verdict, decision 0008), yet
// `upsert` dates a member only when the directory has no record of it, and the directory is seeded from the node's
// configured initial cluster — which, for a joiner, lists itself (docs/node.md: --initial-cluster 1=..,2=..,3=..,4=..).
import { afterEach, describe, expect, it } from 'vitest';
import { ERROR_TABLE } from '../server/errors/table.js';
import { encodeKvCommand, type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import type { MemberInfo } from './members.js';
import { MemoryNetwork, MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import { seeded } from './test-doubles.js';

interface Member {
  id: number;
  node: FloeNode<KvResult>;
  storage: MemoryNodeStorage;
}

const running: Member[] = [];
const info = (id: number): MemberInfo => ({ id, peerAddr: `mem:${id}` });
const founders = [1, 2, 3].map(info);

/** Starts a member on `storage` (founders: bootstrap membership; joiners: empty) with `initialMembers`. */
function boot(
  net: MemoryNetwork,
  id: number,
  initialMembers: MemberInfo[],
  storage: MemoryNodeStorage,
): Member {
  const transport = net.endpoint(id);
  const node = new FloeNode<KvResult>({
    id,
    storage,
    transport,
    stateMachine: new KvStateMachine(),
    initialMembers,
    tickMs: 10,
    electionTicks: 10,
    random: seeded(id * 7919),
  });
  transport.bind(node);
  const m = { id, node, storage };
  running.push(m);
  node.start();
  return m;
}

const founder = (net: MemoryNetwork, id: number) =>
  boot(net, id, founders, new MemoryNodeStorage({ voters: [1, 2, 3], learners: [] }));

async function leaderOf(ms: Member[]): Promise<Member> {
  for (;;) {
    const l = ms.find((m) => !m.node.stopped && m.node.isLeader);
    if (l) return l;
    await Promise.race(ms.map((m) => new Promise<void>((r) => m.node.once('role', () => r()))));
  }
}

async function until(pred: () => boolean): Promise<void> {
  while (!pred()) await new Promise((r) => setTimeout(r, 5));
}

const put = (v: string) => encodeKvCommand({ op: 'put', key: 'k', value: v });

afterEach(async () => {
  await Promise.all(running.splice(0).map((m) => m.node.stop('test over')));
});

describe('FS-24 review: the member directory is the same on every replica', () => {
  it('a joiner that replays the log from the start records the same generation for itself as the members that added it', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => founder(net, id));
    const leader = await leaderOf(nodes);
    await leader.node.propose(put('a'));
    // As `floe serve --initial-cluster-state existing --initial-cluster 1=..,2=..,3=..,4=..` starts it.
    const joiner = boot(net, 4, [...founders, info(4)], new MemoryNodeStorage());
    await leader.node.addMember(info(4), 30_000);
    await leader.node.propose(put('b'));
    const commit = leader.node.status().commit;
    await until(() => joiner.node.status().appliedIndex >= commit);

    const onLeader = leader.node.status().members.find((m) => m.id === 4);
    expect(onLeader?.since).toBeGreaterThan(0); // the founders date it
    expect(joiner.node.status().members).toEqual(leader.node.status().members); // fails: the joiner has no `since`
  });

  it('a member restarted with an initial cluster that lists a member added later keeps that member’s generation', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => founder(net, id));
    const leader = await leaderOf(nodes);
    await leader.node.propose(put('a')); // the leader's no-op is applied: conf changes may go
    boot(net, 4, [...founders, info(4)], new MemoryNodeStorage());
    await leader.node.addMember(info(4), 30_000);
    await leader.node.propose(put('b'));
    const commit = leader.node.status().commit;
    const follower = nodes.find((m) => m !== leader)!;
    await until(() => follower.node.status().appliedIndex >= commit);
    const before = follower.node.status().members;
    expect(before.find((m) => m.id === 4)?.since).toBeGreaterThan(0);

    // The operator's config now lists every member (4 included); the process restarts on its data (no snapshot yet).
    await follower.node.stop('restart');
    running.splice(running.indexOf(follower), 1);
    const again = boot(net, follower.id, [...founders, info(4)], follower.storage.crash('process'));
    await until(() => again.node.status().appliedIndex >= commit);
    expect(again.node.status().members).toEqual(before); // fails: replaying the add no longer dates member 4
  });
});

describe('FS-24 review: the error reference names the new refusal', () => {
  it('the error table (docs/errors.md) says 409 invalid_membership_change also answers adding a removed node id', () => {
    // The table is what docs/errors.md and the RESP/HTTP references are checked against; FS-24 added a case to it.
    expect(ERROR_TABLE.invalid_membership_change.when).toMatch(/removed/);
  });
});
