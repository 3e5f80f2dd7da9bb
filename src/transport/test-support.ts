// Helpers shared by the transport tests and bench (not part of the public API).
import { EventEmitter } from 'node:events';
import type { Message, NodeId } from '../raft/types.js';
import type { PeerTransportOptions, TransportLogger } from './options.js';
import { PeerTransport } from './transport.js';

export const TEST_SECRET = 'test-cluster-secret-0123456789abcdef';
export const TEST_CLUSTER = 'floe-test';

const bytes = (...values: number[]) => new Uint8Array(values);

/** One message of every type in types.ts, from `from` to `to`, with every optional field set. */
export function sampleMessages(from: NodeId, to: NodeId): Message[] {
  const base = { from, to, term: 7 };
  return [
    {
      ...base,
      type: 'app',
      logIndex: 41,
      logTerm: 6,
      commit: 40,
      entries: [
        { type: 'normal', term: 7, index: 42, data: bytes(1, 2, 3) },
        { type: 'normal', term: 7, index: 43, data: new Uint8Array(0) },
        { type: 'conf', term: 7, index: 44, change: { type: 'addLearner', nodeId: 4, context: bytes(9, 9) } },
        { type: 'conf', term: 7, index: 45, change: { type: 'remove', nodeId: 5 } },
        {
          type: 'conf',
          term: 7,
          index: 46,
          change: { type: 'addVoter', nodeId: 4, resulting: { voters: [1, 2, 3, 4], learners: [] } },
        },
      ],
      sentTick: 1234,
    },
    { ...base, type: 'appResp', index: 45, reject: true, rejectHint: 30, logTermHint: 5, sentTick: 1234 },
    { ...base, type: 'vote', lastIndex: 45, lastTerm: 7, transfer: false },
    { ...base, type: 'preVote', lastIndex: 45, lastTerm: 7, transfer: true },
    { ...base, type: 'voteResp', reject: false },
    { ...base, type: 'preVoteResp', reject: true },
    { ...base, type: 'heartbeat', commit: 45, context: bytes(0xca, 0xfe), sentTick: 99 },
    { ...base, type: 'heartbeatResp', context: new Uint8Array(0), sentTick: 99 },
    {
      ...base,
      type: 'snap',
      snapshot: {
        metadata: { index: 40, term: 6, conf: { voters: [1, 2, 3], learners: [4] } },
        data: bytes(5, 6, 7),
      },
    },
    { ...base, type: 'timeoutNow' },
    { ...base, type: 'readIndex', context: bytes(1) },
    { ...base, type: 'readIndexResp', index: 45, context: bytes(2, 3) },
  ];
}

/** Deep copy with every Uint8Array (Buffer included) turned into a plain number array, for toEqual. */
export function plain(value: unknown): unknown {
  if (value instanceof Uint8Array) return { bytes: Array.from(value) };
  if (Array.isArray(value)) return value.map(plain);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

/**
 * Resolves once `predicate()` holds, re-checking whenever any emitter emits 'change'. Event-driven:
 * no polling interval. The guard timeout only turns a hang into a readable failure.
 */
export function waitFor(
  emitters: EventEmitter | EventEmitter[],
  predicate: () => boolean,
  what: string,
  guardMs = 20_000,
): Promise<void> {
  const list = Array.isArray(emitters) ? emitters : [emitters];
  return new Promise((resolve, reject) => {
    const check = () => {
      let ok = false;
      try {
        ok = predicate();
      } catch (err) {
        cleanup();
        reject(err);
        return;
      }
      if (ok) {
        cleanup();
        resolve();
      }
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`waitFor: gave up waiting for ${what}`));
    }, guardMs);
    const cleanup = () => {
      clearTimeout(timer);
      for (const e of list) e.off('change', check);
    };
    for (const e of list) e.on('change', check);
    check();
  });
}

export interface LoggedLine {
  level: 'info' | 'warn' | 'error';
  obj: object;
  msg: string;
}

/** A logger that records lines (and emits 'change'), for asserting that errors are logged. */
export class RecordingLogger extends EventEmitter implements TransportLogger {
  readonly lines: LoggedLine[] = [];
  info(obj: object, msg: string): void {
    this.record('info', obj, msg);
  }
  warn(obj: object, msg: string): void {
    this.record('warn', obj, msg);
  }
  error(obj: object, msg: string): void {
    this.record('error', obj, msg);
  }
  private record(level: LoggedLine['level'], obj: object, msg: string): void {
    this.lines.push({ level, obj, msg });
    this.emit('change');
  }
  has(level: LoggedLine['level'], text: string): boolean {
    return this.lines.some((l) => l.level === level && `${l.msg} ${JSON.stringify(l.obj)}`.includes(text));
  }
}

/** A transport plus everything its callbacks saw; `events` emits 'change' on each callback. */
export interface TestNode {
  id: NodeId;
  t: PeerTransport;
  inbox: Message[];
  unreachable: NodeId[];
  snapshotStatus: { peer: NodeId; ok: boolean }[];
  logger: RecordingLogger;
  events: EventEmitter;
  /** Everything a waitFor on this node should listen to. */
  emitters: EventEmitter[];
  addr: string;
}

export async function startNode(
  id: NodeId,
  peers: Map<NodeId, string> = new Map(),
  extra: Partial<PeerTransportOptions> = {},
): Promise<TestNode> {
  const events = new EventEmitter();
  const logger = new RecordingLogger();
  const node: Partial<TestNode> = { id, inbox: [], unreachable: [], snapshotStatus: [], logger, events };
  const t = await PeerTransport.start({
    nodeId: id,
    clusterId: TEST_CLUSTER,
    secret: TEST_SECRET,
    listen: { host: '127.0.0.1', port: 0 },
    peers,
    logger,
    onMessage: (m) => {
      node.inbox!.push(m);
      events.emit('change');
    },
    onUnreachable: (p) => {
      node.unreachable!.push(p);
      events.emit('change');
    },
    onSnapshotStatus: (peer, ok) => {
      node.snapshotStatus!.push({ peer, ok });
      events.emit('change');
    },
    ...extra,
  });
  node.t = t;
  node.emitters = [t, events, logger];
  node.addr = `127.0.0.1:${t.address.port}`;
  return node as TestNode;
}

/** Starts n transports with ids 1..n, all knowing each other, and waits until every link is up. */
export async function startCluster(
  n: number,
  extra: Partial<PeerTransportOptions> = {},
): Promise<TestNode[]> {
  const nodes: TestNode[] = [];
  for (let id = 1; id <= n; id++) nodes.push(await startNode(id, new Map(), extra));
  for (const a of nodes) for (const b of nodes) if (a !== b) a.t.addPeer(b.id, b.addr);
  await waitFor(
    nodes.flatMap((x) => x.emitters),
    () => nodes.every((a) => Object.values(a.t.stats().peers).every((p) => p.connected)),
    'every link of the cluster to connect',
  );
  return nodes;
}
