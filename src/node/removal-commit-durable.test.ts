// FS-25 (found by the simulator's retirement of the leader's machine, nodes seed 67): with two voters, the leader
// removes the other; the removed member learns that the removal committed, applies it and stops; the leader then
// loses power before the commit index was on disk (a Ready whose only change is the commit index is written without
// fsync, as Raft allows). Back up, the leader has the removal in its log but not committed, so its configuration still
// holds the member that left, whose vote it needs for ever. In-process nodes on virtual timers and a virtual clock, a
// network with a fixed virtual delay, and storage twins that lose unsynced writes in a power loss.
import { describe, expect, it } from 'vitest';
import type { Message, NodeId } from '../raft/types.js';
import { encodeKvCommand, type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import type { NodeClock, NodeTransport, TransportSink } from './seams.js';
import { seeded, VirtualTimers } from './test-doubles.js';

const TICK_MS = 10;
const ELECTION_TICKS = 10;
const LATENCY_MS = 3;

const put = (v: string) => encodeKvCommand({ op: 'put', key: 'k', value: v });

function cluster(size: number) {
  const vt = new VirtualTimers();
  const clock: NodeClock = { monotonicMs: () => vt.now, wallMs: () => 1_800_000_000_000 + vt.now };
  const ids = Array.from({ length: size }, (_, i) => i + 1);
  const sinks = new Map<NodeId, TransportSink>();
  /** Ids whose machine is off: nothing reaches them, nothing leaves them. */
  const off = new Set<NodeId>();
  const transport = (): NodeTransport => ({
    send(messages: Message[]) {
      for (const m of messages) {
        if (off.has(m.from) || off.has(m.to)) continue;
        const to = sinks.get(m.to);
        vt.setTimeout(() => {
          // Delivered only to the process that was running when it was sent, if its machine is still on.
          if (off.has(m.to) || off.has(m.from) || sinks.get(m.to) !== to) return;
          to?.onMessage(m);
          if (m.type === 'snap') sinks.get(m.from)?.onSnapshotStatus(m.to, true);
        }, LATENCY_MS);
      }
    },
    addPeer() {},
    removePeer() {},
    async close() {},
  });
  const storages = new Map<NodeId, MemoryNodeStorage>();
  const nodes = new Map<NodeId, FloeNode<KvResult>>();
  const boot = (id: NodeId, storage: MemoryNodeStorage) => {
    const n = new FloeNode<KvResult>({
      id,
      storage,
      transport: transport(),
      stateMachine: new KvStateMachine(),
      initialMembers: ids.map((i) => ({ id: i, peerAddr: `mem:${i}` })),
      tickMs: TICK_MS,
      electionTicks: ELECTION_TICKS,
      random: seeded(id * 7919 + vt.now),
      clock,
      timers: vt,
      incarnation: new Uint8Array(8).fill(id + vt.now),
      proposalTimeoutMs: 2_000,
    });
    storages.set(id, storage);
    nodes.set(id, n);
    sinks.set(id, n);
    n.start();
    return n;
  };
  for (const id of ids) boot(id, new MemoryNodeStorage({ voters: ids, learners: [] }));

  const until = async (pred: () => boolean, ms = 5_000): Promise<boolean> => {
    for (let t = 0; t < ms && !pred(); t++) await vt.advance(1);
    return pred();
  };
  const outcome = async <T>(p: Promise<T>, ms = 5_000): Promise<{ ok: T } | { err: unknown }> => {
    let r: { ok: T } | { err: unknown } | undefined;
    p.then(
      (ok) => (r = { ok }),
      (err: unknown) => (r = { err }),
    );
    await until(() => r !== undefined, ms);
    if (r === undefined) throw new Error(`no outcome within ${ms} virtual ms`);
    return r;
  };
  /** The machine loses power: unsynced writes are lost; it boots again on what its disk kept. */
  const powerCycle = (id: NodeId): FloeNode<KvResult> => {
    off.add(id);
    const old = nodes.get(id) as FloeNode<KvResult>;
    const disk = (storages.get(id) as MemoryNodeStorage).crash('power');
    void old.stop('power lost').catch(() => {});
    off.delete(id);
    return boot(id, disk);
  };
  const leader = async (): Promise<FloeNode<KvResult>> => {
    await until(() => [...nodes.values()].some((n) => n.isLeader && !n.stopped));
    return [...nodes.values()].find((n) => n.isLeader && !n.stopped) as FloeNode<KvResult>;
  };
  return { vt, nodes, until, outcome, powerCycle, leader };
}

describe('the commit of a membership change is durable before anyone learns it (FS-25)', () => {
  it('2 voters: the leader removes the other, which stops; the leader loses power at once, and on its own it leads again', async () => {
    const c = cluster(2);
    const l = await c.leader();
    expect(await c.outcome(l.propose(put('a')))).toHaveProperty('ok');
    const other = [...c.nodes.values()].find((n) => n !== l) as FloeNode<KvResult>;
    expect(await c.outcome(l.removeMember(other.id))).toEqual({ ok: undefined });
    // The removed member learns the commit, applies its removal and stops.
    expect(await c.until(() => other.stopped !== undefined)).toBe(true);
    expect(l.status().conf.voters).toEqual([l.id]);
    // Power lost right then: only what was synced survives.
    const back = c.powerCycle(l.id);
    const leads = await c.until(
      () => back.isLeader && back.status().conf.voters.join() === String(l.id),
      20 * ELECTION_TICKS * TICK_MS,
    );
    expect(
      leads,
      `after the power loss node ${l.id} is ${back.status().role} with voters [${back.status().conf.voters}] and commit ${back.status().commit}`,
    ).toBe(true);
    expect(await c.outcome(back.propose(put('after')))).toHaveProperty('ok');
  });
});
