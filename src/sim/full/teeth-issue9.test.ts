// Issue 10, teeth for the issue-9 fixes that had no switch: 1b (read contexts unique across incarnations), 7b (a torn
// record holding frame-shaped bytes is cut, not refused), 6c (a step error that means lost durability halts the node)
// and 6d (an undecodable committed entry halts the node). First, one unit test per switch showing it really puts the
// old behaviour back (so a simulator that does not find it is about the simulator, not a dead switch); then the
// simulator runs for the ones it finds. Seeds are fixed, so these are deterministic.
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pack } from '../../node/envelope.js';
import { MemoryNodeStorage } from '../../node/memory-seams.js';
import { FloeNode } from '../../node/node.js';
import type { NodeClock, NodeTransport } from '../../node/seams.js';
import { VirtualTimers } from '../../node/test-doubles.js';
import type { Message } from '../../raft/types.js';
import { type KvResult, KvStateMachine } from '../../state/kv-state-machine.js';
import { WalCorruptionError } from '../../storage/errors.js';
import { encodeHardState } from '../../storage/payload.js';
import { encodeFrame, RecordType, readFrame, SEGMENT_PREAMBLE_BYTES } from '../../storage/record.js';
import { ents, removeTempDirs, tempDir } from '../../storage/test-helpers.js';
import { Wal } from '../../storage/wal.js';
import { switchBugsOn } from '../../testing/bug-switches.js';
import { runFullSim } from './run.js';

/** Runs `fn` with the switch on when `on`, and off again afterwards whatever happens. */
async function withBug<T>(name: string, on: boolean, fn: () => Promise<T>): Promise<T> {
  const off = switchBugsOn(on ? [name] : []);
  try {
    return await fn();
  } finally {
    off();
  }
}

/** Node 2 of {1, 2, 3}, a follower, on virtual timers; every message it sends is kept in `sent`. */
function follower(storage: MemoryNodeStorage, incarnation: number) {
  const vt = new VirtualTimers();
  const sent: Message[] = [];
  const transport: NodeTransport = {
    send: (ms) => sent.push(...ms),
    addPeer: () => {},
    removePeer: () => {},
    close: async () => {},
  };
  const clock: NodeClock = { monotonicMs: () => vt.now, wallMs: () => 1_800_000_000_000 + vt.now };
  const node = new FloeNode<KvResult>({
    id: 2,
    storage,
    transport,
    stateMachine: new KvStateMachine(),
    initialMembers: [1, 2, 3].map((id) => ({ id, peerAddr: `mem:${id}` })),
    tickMs: 10,
    electionTicks: 10,
    random: () => 0,
    clock,
    timers: vt,
    incarnation: new Uint8Array(8).fill(incarnation),
    proposalTimeoutMs: 1_000,
  });
  node.start();
  return { vt, sent, node };
}

function stoppedReason(node: FloeNode<KvResult>): Promise<string> {
  if (node.stopped) return Promise.resolve(node.stopped);
  return new Promise((r) => node.once('stopped', r));
}

const CONF = { voters: [1, 2, 3], learners: [] };

function heartbeat(term: number, commit: number): Message {
  return {
    type: 'heartbeat',
    from: 1,
    to: 2,
    term,
    commit,
    context: new Uint8Array(0),
    sentTick: 0,
  } as Message;
}

/** Leader 1's append of `n` no-op entries after index `after` (all in `term`), committing them. */
function append(term: number, after: number, n: number, commit = after + n) {
  const entries = Array.from({ length: n }, (_, i) => ({
    type: 'normal' as const,
    term,
    index: after + 1 + i,
    data: new Uint8Array(),
  }));
  return {
    type: 'app',
    from: 1,
    to: 2,
    term,
    logIndex: after,
    logTerm: after === 0 ? 0 : term,
    entries,
    commit,
  } as Message;
}

describe('each issue-9 switch puts the old behaviour back (unit level)', () => {
  afterEach(removeTempDirs);

  it.each([false, true])(
    'read-context-per-process (1b) %s: a late answer to the previous process read releases a new read',
    async (on) => {
      await withBug('read-context-per-process', on, async () => {
        const storage = new MemoryNodeStorage(CONF);
        // The first process of node 2 asks leader 1 for a read index, and dies before the answer comes.
        const a = follower(storage, 1);
        a.node.onMessage(heartbeat(2, 0));
        await a.vt.settle();
        void a.node.linearizableRead().catch(() => {});
        await a.vt.settle();
        const oldAsk = a.sent.find((m) => m.type === 'readIndex') as Message & { context: Uint8Array };
        expect(oldAsk).toBeDefined();
        await a.node.stop('killed');
        // Its successor asks for a read of its own; the answer to the old one arrives first.
        const b = follower(storage, 2);
        b.node.onMessage(heartbeat(2, 0));
        await b.vt.settle();
        let released = false;
        const read = b.node.linearizableRead().then(
          () => {
            released = true;
          },
          () => {},
        );
        await b.vt.settle();
        const newAsk = b.sent.find((m) => m.type === 'readIndex') as Message & { context: Uint8Array };
        expect(Buffer.from(newAsk.context).equals(Buffer.from(oldAsk.context))).toBe(on);
        b.node.onMessage({
          type: 'readIndexResp',
          from: 1,
          to: 2,
          term: 2,
          index: 0,
          context: oldAsk.context,
        } as Message);
        await b.vt.settle();
        await Promise.resolve();
        expect(released).toBe(on);
        await b.node.stop('test over');
        await read;
      });
    },
  );

  it.each([false, true])(
    'wal-torn-frame-shaped-refused (7b) %s: a torn last record holding frame-shaped bytes is refused instead of cut',
    async (on) => {
      const dir = await tempDir();
      const { wal } = await Wal.open(dir);
      await wal.append([{ type: 'entries', entries: ents(1, 2, 1) }], { sync: true });
      const inner = encodeFrame(RecordType.hardState, encodeHardState({ term: 7, vote: 7, commit: 0 }));
      const data = Buffer.concat([Buffer.alloc(40, 0xab), inner, Buffer.alloc(200, 0xcd)]);
      await wal.append([{ type: 'entries', entries: [{ type: 'normal', index: 3, term: 1, data }] }], {
        sync: true,
      });
      await wal.close();
      const [name] = await fsp.readdir(dir);
      const file = path.join(dir, name!);
      const full = await fsp.readFile(file);
      let last = SEGMENT_PREAMBLE_BYTES;
      for (let off = last; ; ) {
        const fr = readFrame(full, off);
        if (fr.kind !== 'ok') break;
        last = off;
        off = fr.next;
      }
      // A crash tore the never-acknowledged write just after the frame-shaped bytes.
      await fsp.writeFile(file, full.subarray(0, full.indexOf(inner, last) + inner.length + 10));
      const outcome = await withBug('wal-torn-frame-shaped-refused', on, () =>
        Wal.open(dir).then(
          async (r) => {
            await r.wal.close();
            return r;
          },
          (e: unknown) => e,
        ),
      );
      if (on) {
        expect(outcome).toBeInstanceOf(WalCorruptionError);
        expect(String(outcome)).toMatch(/a valid frame follows it/);
      } else {
        expect(outcome).toMatchObject({
          torn: { file: name, offset: last },
          state: { entries: ents(1, 2, 1) },
        });
      }
    },
  );

  it.each([false, true])(
    'step-error-logged (6c) %s: an append conflicting with a committed entry, and a commit beyond the log, only log',
    async (on) => {
      await withBug('step-error-logged', on, async () => {
        // A message that replaces committed entry 3 (as the runtime's own fail-stop test builds it: an append at or
        // below the commit index is otherwise answered without a look), then a commit index beyond the log.
        const conflicting = {
          type: 'app',
          from: 1,
          to: 2,
          term: 3,
          logIndex: 3,
          logTerm: 2,
          entries: [{ type: 'normal', term: 3, index: 3, data: new Uint8Array() }],
          commit: 3,
        } as Message;
        for (const bad of [conflicting, heartbeat(2, 10)]) {
          const f = follower(new MemoryNodeStorage(CONF), 1);
          f.node.onMessage(append(2, 0, 3));
          await f.vt.settle();
          expect(f.node.status().commit).toBe(3);
          f.node.onMessage(bad);
          await f.vt.settle();
          if (on) expect(f.node.stopped).toBeUndefined();
          else
            expect(await stoppedReason(f.node)).toMatch(
              /conflicts with a committed entry|beyond the last index/,
            );
          await f.node.stop('test over');
        }
      });
    },
  );

  it.each([false, true])(
    'undecodable-entry-skipped (6d) %s: a committed entry that cannot be decoded is skipped',
    async (on) => {
      await withBug('undecodable-entry-skipped', on, async () => {
        const f = follower(new MemoryNodeStorage(CONF), 1);
        f.node.onMessage(append(2, 0, 2));
        await f.vt.settle();
        f.node.onMessage({
          type: 'app',
          from: 1,
          to: 2,
          term: 2,
          logIndex: 2,
          logTerm: 2,
          entries: [{ type: 'normal', term: 2, index: 3, data: pack('not an envelope') }],
          commit: 3,
        } as Message);
        await f.vt.settle();
        if (on) {
          expect(f.node.stopped).toBeUndefined();
          expect(f.node.status().appliedIndex).toBe(3);
        } else {
          expect(await stoppedReason(f.node)).toMatch(/committed entry 3 \(term 2\) cannot be decoded/);
          expect(f.node.status().appliedIndex).toBe(2);
        }
        await f.node.stop('test over');
      });
    },
  );
});

describe('the full-stack simulator and the issue-9 switches', () => {
  // 7b needs a client value holding a checksummed frame (`kvFrameValues`: ASCII-only frames that msgpack keeps
  // verbatim) and a power loss tearing that record after the frame (`nodePowerLossMidWrite`). Found in disk seeds 2,
  // 18, 22, 44, 52 of 1-100; the same seeds pass without the switch (the torn tail is cut). Seed 10 since stop 26: both
  // FS-19's SDK changes and the kernel lock's fdatasynced LOCK record moved seed 2's run; seed 33 (the first of 1-33)
  // since the cluster identity's init entry moved every run; seed 10 again (the first of 1-10) since stop 34's lease
  // promise moved every run.
  it('7b: a torn record holding a frame-shaped value is refused with the switch, cut without it', {
    timeout: 120_000,
  }, async () => {
    // halfOpen off: the run recorded here predates half-open connections at a power loss.
    const fixed = await runFullSim({ seed: 10, profile: 'disk', halfOpen: false });
    expect(fixed.config.kvFrameValues).toBe(true);
    expect(fixed.config.weights.nodePowerLossMidWrite).toBeGreaterThan(0);
    expect(fixed.failure).toBeUndefined();
    const refused = await runFullSim({
      seed: 10,
      profile: 'disk',
      halfOpen: false,
      bugs: ['wal-torn-frame-shaped-refused'],
    });
    expect(refused.failure?.kind).toBe('process-crash');
    expect(refused.failure?.detail).toMatch(
      /could not start .*runs \d+ bytes past end of file, and a valid frame follows it/,
    );
  });

  // 6c needs durability already lost, which the failure model excludes: it shows only with a second switch that
  // loses it. Fixed, the node halts (`process-crash`, the halt citing the commit beyond its log); with the step error
  // only logged, the same seed ends otherwise: the oracles still fail it, but no longer on the cause. Seed 49, the first
  // of 1-49 since the cluster identity's init entry moved every run (21 before; 24 until power loss mid-write and
  // frame-shaped values, drawn in half the disk seeds, changed its run).
  it('6c with wal-cut-complete-frame: the follower that lost its tail no longer halts, and never catches up', {
    timeout: 120_000,
  }, async () => {
    const fixed = await runFullSim({ seed: 49, profile: 'disk', bugs: ['wal-cut-complete-frame'] });
    expect(fixed.failure?.kind).toBe('process-crash');
    expect(fixed.failure?.detail).toMatch(/commit \d+ is beyond the last index/);
    const logged = await runFullSim({
      seed: 49,
      profile: 'disk',
      bugs: ['wal-cut-complete-frame', 'step-error-logged'],
    });
    expect(logged.failure?.kind).toBe('liveness');
    expect(logged.failure?.detail).toMatch(/not caught up/);
  });

  // 1b: the read-context oracle (read-context-oracle.ts) fails a run when a ReadIndex answer reaches a process while
  // another process of the same node asked with the same context: the answer cannot be matched to its request. With
  // per-process contexts every restart repeats them; found in 11 of swarm seeds 1-20 (first 3), 9 of restarts 1-20
  // (first 3), 10 of nodes 1-20 (first 2), and 17 of stalls 1-19 (first 1). A stale read out of it is still not found
  // (docs/simulator-full.md): the oracle checks the contract, not only its rare consequence.
  it('1b: a ReadIndex answer that two processes of one node asked for is a reply mismatch', {
    timeout: 120_000,
  }, async () => {
    const fixed = await runFullSim({ seed: 3, profile: 'swarm' });
    expect(fixed.failure).toBeUndefined();
    const perProcess = await runFullSim({ seed: 3, profile: 'swarm', bugs: ['read-context-per-process'] });
    expect(perProcess.failure?.kind).toBe('reply-mismatch');
    expect(perProcess.failure?.detail).toMatch(
      /n\d#\d+ received a ReadIndex answer \(index \d+\) for context [0-9a-f]+, which processes #\d+, #\d+.* asked with/,
    );
  });

  // 6d, like 6c, needs a second switch: an undecodable committed entry needs bytes that changed after they were
  // checked, which the WAL's record checksum refuses. With `wal-skip-crc` disk seed 68 (the only one of 1-200 whose
  // flip lands in an envelope: the other 27 failing seeds decode the flipped entry and diverge) the fixed node halts
  // on entry 90 (`process-crash`); with the entry skipped it applies on and its state diverges (`raft`).
  it('6d with wal-skip-crc: the node that cannot decode a committed entry halts; skipping it diverges', {
    timeout: 120_000,
  }, async () => {
    const fixed = await runFullSim({ seed: 68, profile: 'disk', bugs: ['wal-skip-crc'] });
    expect(fixed.failure?.kind).toBe('process-crash');
    expect(fixed.failure?.detail).toMatch(/committed entry \d+ \(term \d+\) cannot be decoded/);
    const skipped = await runFullSim({
      seed: 68,
      profile: 'disk',
      bugs: ['wal-skip-crc', 'undecodable-entry-skipped'],
    });
    expect(skipped.failure?.kind).toBe('raft');
    expect(skipped.failure?.detail).toMatch(/state-machine-safety/);
  });

  it('6c with the frame checksum off and corrupt segments delivered: the halt becomes divergence (log-matching)', {
    timeout: 120_000,
  }, async () => {
    const bugs = ['peer-corrupt-delivered', 'transport-no-frame-crc'];
    // Seed 99, the first of 1-99 since stop 34's lease promise moved every run (70 before, the first of 1-70 since the
    // cluster identity's init entry moved every run; 33 before that; 9 until wire version 3 moved the corrupted bytes;
    // in net most seeds diverge before any halt: of 1-99, 53 fail as raft first, and 59 and 75 halt on the commit but
    // pass with the step error only logged).
    const o = { seed: 99, profile: 'net', peerTransport: 'production' as const };
    const fixed = await runFullSim({ ...o, bugs });
    expect(fixed.failure?.kind).toBe('process-crash');
    expect(fixed.failure?.detail).toMatch(/commit \d+ is beyond the last index/);
    const logged = await runFullSim({ ...o, bugs: [...bugs, 'step-error-logged'] });
    expect(logged.failure?.kind).toBe('raft');
    expect(logged.failure?.detail).toMatch(/log-matching/);
  });
});
