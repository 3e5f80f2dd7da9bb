// Raft core throughput: a 3-node cluster in one process, MemoryStorage, no disk, no network.
// Messages are delivered synchronously in a loop; each iteration proposes a batch of 64-byte entries.
// Figure: entries committed (and applied on the leader) per second of process CPU time.
//
//   npm run bench:raft-core            (default ~12 s)
//   BENCH_SECONDS=5 npm run bench:raft-core

import { MemoryStorage, type Message, type NodeId, RawNode } from '../src/raft/index.js';

const TARGET = 200_000;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 12);
const BATCH = Number(process.env.BENCH_BATCH ?? 512);
const PAYLOAD = 64;
const KEEP = 10_000; // trailing window kept after compaction

function rng(seed: number): (n: number) => number {
  let s = seed;
  return (n) => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s % n;
  };
}

interface Member {
  node: RawNode;
  storage: MemoryStorage;
  applied: number;
}

const ids: NodeId[] = [1, 2, 3];
const members = new Map<NodeId, Member>();
for (const id of ids) {
  const storage = new MemoryStorage({ voters: ids, learners: [] });
  const node = new RawNode({ id, electionTicks: 10, heartbeatTicks: 1, random: rng(id) }, storage);
  members.set(id, { node, storage, applied: 0 });
}

let queue: Message[] = [];

function drain(m: Member): void {
  while (m.node.hasReady()) {
    const rd = m.node.ready();
    if (rd.hardState) m.storage.setHardState(rd.hardState);
    if (rd.entries.length > 0) m.storage.append(rd.entries);
    for (const msg of rd.messages) queue.push(msg);
    const last = rd.committedEntries[rd.committedEntries.length - 1];
    if (last !== undefined) m.applied = last.index;
    m.node.advance(rd);
  }
}

function pump(): void {
  for (;;) {
    for (const m of members.values()) drain(m);
    if (queue.length === 0) return;
    const q = queue;
    queue = [];
    for (const msg of q) members.get(msg.to)?.node.step(msg);
  }
}

function compact(m: Member): void {
  const at = m.applied - KEEP;
  if (at <= m.storage.snapshot().metadata.index) return;
  m.storage.createSnapshot(at, { voters: ids, learners: [] }, new Uint8Array(0));
  m.storage.compact(at);
}

const leader = members.get(1) as Member;
leader.node.campaign();
pump();
if (leader.node.status().role !== 'leader') throw new Error('bench: node 1 did not become leader');

const payload = new Uint8Array(PAYLOAD).fill(7);
const batch: Uint8Array[] = new Array(BATCH).fill(payload);
const startApplied = leader.applied;
const cpu0 = process.cpuUsage();
const wall0 = performance.now();
let iterations = 0;
for (;;) {
  leader.node.proposeBatch(batch);
  pump();
  iterations++;
  if ((iterations & 63) === 0) {
    for (const m of members.values()) compact(m);
    // One tick now and then, as a real node would (heartbeats, check-quorum).
    for (const m of members.values()) m.node.tick();
    pump();
    if (performance.now() - wall0 > SECONDS * 1000) break;
  }
}
const cpu = process.cpuUsage(cpu0);
const cpuSeconds = (cpu.user + cpu.system) / 1e6;
const committed = leader.applied - startApplied;
for (const id of ids) {
  const m = members.get(id) as Member;
  if (m.applied < leader.applied - BATCH * 2) throw new Error(`bench: node ${id} fell behind (${m.applied})`);
}
const perSecond = committed / cpuSeconds;
console.log(`raft-core: 3 nodes in one process, MemoryStorage, ${PAYLOAD}-byte entries, batch ${BATCH}`);
console.log(
  `  committed ${committed} entries in ${cpuSeconds.toFixed(2)} s CPU (${((performance.now() - wall0) / 1000).toFixed(2)} s wall)`,
);
console.log(
  `  ${Math.round(perSecond).toLocaleString('en-US')} entries/s CPU; target >= ${TARGET.toLocaleString('en-US')}/s; ratio ${(perSecond / TARGET).toFixed(2)}x`,
);
