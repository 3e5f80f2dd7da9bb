// RESP between simulated clients and nodes: the production connection code of the RESP server
// (ClientConnection, dispatch, the command table, and the node's services behind respBackendOf, wired as
// src/node/start.ts wires them) driven over a simulated TCP connection instead of a net.Socket.
//
// A connection is a pair of SimSockets (the RespSocket seam of client-connection.ts). Bytes travel as
// events of the receiving process, in order per direction (TCP), after the run's network delay (a lost
// segment is retransmitted: it only arrives later). The connection is reset — both ends see 'error' and
// 'close' — when a client link of the pair is cut (`HttpRouter.blocked`, the clientPartition fault) or
// when the node process dies (its kernel closes its sockets). A connect to a node that is down is
// refused (ECONNREFUSED). Nothing here uses a real socket or a real timer: the server's own timers
// (request, stall and close-grace timeouts) are global setTimeout calls that the run routes to the node
// process (global-timers.ts); its `arrivedAt` stamps come from the node process's monotonic clock, the
// one its SequenceService reads.
//
// Not modelled: the listener of server.ts (maxClients, per-address limits, TLS), send buffers (a write
// is taken whole, so 'drain' and output backpressure never happen), idle timeouts (off by default).

import { respBackendOf } from '../../server/floe-services.js';
import { ClientConnection, type RespSocket } from '../../server/resp/client-connection.js';
import { type ServerState, type Session, zeroServerCounters } from '../../server/resp/command.js';
import { ALL_COMMANDS, buildCommandTable } from '../../server/resp/commands/index.js';
import { type RespLimits, resolveLimits } from '../../server/resp/limits.js';
import { parseHostPort } from '../../server/resp/node-id.js';
import { readTopology } from '../../server/resp/topology.js';
import { mergeDefined, serveLimits } from '../../server/serve-limits.js';
import type { Prng } from '../prng.js';
import type { HttpRouter } from './http-router.js';
import type { NetConditions } from './network.js';
import type { NodeHost } from './node-host.js';
import type { SimProcess } from './process.js';
import type { World } from './world.js';

/** The RESP port of node `id` in the simulation (members advertise it when RESP clients run). */
export const respAddrOf = (id: number): string => `n${id}:6379`;

export interface RespNetStats {
  connects: number;
  refused: number;
  resets: number;
  /** Segments (writes) carried. */
  segments: number;
}

type Segment = { kind: 'data'; bytes: Buffer } | { kind: 'fin' } | { kind: 'rst'; why: string };

type Listener = (...args: never[]) => void;

/** One end of a simulated TCP connection, owned by one process. */
export class SimSocket implements RespSocket {
  peer: SimSocket | undefined;
  readonly writableLength = 0;
  writable = true;
  destroyed = false;
  private peerEnded = false;
  private paused = false;
  private readonly queued: Segment[] = [];
  private readonly listeners = new Map<string, Listener[]>();

  constructor(
    private readonly link: Link,
    readonly proc: SimProcess,
    readonly localAddress: string,
    readonly localPort: number,
    readonly remoteAddress: string,
    readonly remotePort: number,
  ) {}

  on(event: 'data', listener: (chunk: Buffer) => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: 'drain' | 'timeout' | 'end' | 'close', listener: () => void): this;
  on(event: string, listener: Listener): this {
    const l = this.listeners.get(event) ?? [];
    l.push(listener);
    this.listeners.set(event, l);
    return this;
  }

  private emit(event: string, ...args: unknown[]): void {
    for (const l of this.listeners.get(event) ?? []) (l as (...a: unknown[]) => void)(...args);
  }

  setNoDelay(): this {
    return this;
  }

  setTimeout(ms: number): this {
    if (ms > 0) this.link.world.fail('harness', `RESP idle timeouts (${ms} ms) are not simulated`);
    return this;
  }

  write(data: Uint8Array): boolean {
    if (!this.writable || this.destroyed) return false;
    this.link.send(this, { kind: 'data', bytes: Buffer.from(data) });
    return true;
  }

  /** Half-close: a FIN after what was written. */
  end(): this {
    if (!this.writable || this.destroyed) return this;
    this.writable = false;
    this.link.send(this, { kind: 'fin' });
    if (this.peerEnded) this.closed();
    return this;
  }

  /** Close now: the peer sees a FIN (its unread data, if any, is lost with this end). */
  destroy(): this {
    if (this.destroyed) return this;
    if (this.writable) this.link.send(this, { kind: 'fin' });
    this.closed();
    return this;
  }

  pause(): this {
    this.paused = true;
    return this;
  }

  resume(): this {
    if (!this.paused) return this;
    this.paused = false;
    // As a real socket, what was held back arrives on a later turn, not inside resume().
    if (this.queued.length > 0)
      this.link.world.sched.after(0, this.proc, 'resp-resume', () => this.drainQueued());
    return this;
  }

  /** A segment from the peer arrives (an event of this end's process). */
  receive(seg: Segment): void {
    if (this.destroyed) return;
    if (seg.kind === 'rst') {
      this.emit('error', Object.assign(new Error(`read ECONNRESET (${seg.why})`), { code: 'ECONNRESET' }));
      this.closed();
      return;
    }
    if (this.paused || this.queued.length > 0) {
      this.queued.push(seg);
      return;
    }
    this.deliver(seg);
  }

  private drainQueued(): void {
    while (!this.paused && !this.destroyed && this.queued.length > 0)
      this.deliver(this.queued.shift() as Segment);
  }

  private deliver(seg: Segment): void {
    if (seg.kind === 'data') {
      this.emit('data', seg.bytes);
      return;
    }
    if (seg.kind === 'fin' && !this.peerEnded) {
      this.peerEnded = true;
      this.emit('end');
      if (!this.writable) this.closed();
    }
  }

  private closed(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.writable = false;
    this.queued.length = 0;
    // Node emits 'close' on a later tick, never inside destroy().
    process.nextTick(() => this.emit('close'));
  }
}

/** One connection between a client process and a node process. */
class Link {
  client!: SimSocket;
  server: SimSocket | undefined;
  private readonly lastAt = { up: 0, down: 0 };
  private reset = false;

  constructor(
    readonly world: World,
    private readonly net: RespNet,
    readonly clientName: string,
    readonly nodeId: number,
  ) {}

  /** Whether the client's link to (`up`) or from (`down`) the node is cut. */
  cut(dir: 'up' | 'down'): boolean {
    return this.net.router.blocked.has(
      dir === 'up' ? `${this.clientName}->${this.nodeId}` : `${this.nodeId}->${this.clientName}`,
    );
  }

  send(from: SimSocket, seg: Segment): void {
    if (this.reset) return;
    const dir = from === this.client ? 'up' : 'down';
    const to = dir === 'up' ? this.server : this.client;
    if (!to) return;
    if (this.cut(dir)) {
      this.resetBoth('link cut');
      return;
    }
    this.net.stats.segments++;
    if (seg.kind === 'data' && dir === 'down') seg = this.net.mixup(this.clientName, seg);
    const at = Math.max(from.proc.effectiveUs + this.net.delayUs(), this.lastAt[dir]);
    this.lastAt[dir] = at;
    this.world.sched.at(at, to.proc, `resp ${seg.kind} ${dir}`, () => to.receive(seg));
  }

  /** Both ends see a reset, each after a network delay (the end that dies never sees it). */
  resetBoth(why: string): void {
    if (this.reset) return;
    this.reset = true;
    this.net.stats.resets++;
    this.world.trace(`resp ${this.clientName}<->n${this.nodeId} reset: ${why}`);
    for (const end of [this.client, this.server]) {
      if (!end || end.destroyed || !end.proc.alive) continue;
      this.world.sched.after(this.net.delayUs(), end.proc, 'resp-rst', () =>
        end.receive({ kind: 'rst', why }),
      );
    }
  }
}

/** The RESP side of one node process: the production ServerState and its sessions. */
class SimRespServer {
  readonly state: ServerState;
  private readonly sessions = new Map<number, ClientConnection>();
  private nextId = 1;

  private readonly staleArrival: boolean;

  constructor(
    world: World,
    host: NodeHost,
    readonly proc: SimProcess,
    rng: Prng,
    limitsOverride?: Partial<RespLimits>,
  ) {
    this.staleArrival = world.bugs.has('resp-stale-arrival');
    // The services the node's HTTP app runs over (the cluster's UUID included), as src/node/start.ts wires both.
    const backend = respBackendOf(host.services!);
    const counters = zeroServerCounters();
    const self = parseHostPort(respAddrOf(host.id))!;
    const trace = (level: string) => (obj: object, msg?: string) =>
      world.trace(`${proc.name} resp ${level}: ${msg ?? ''} ${JSON.stringify(obj).slice(0, 200)}`);
    this.state = {
      backend,
      // As startRespServer resolves them (`floe serve`'s defaults, nothing overridden).
      limits: respLimitsFor(limitsOverride),
      options: { mode: 'cluster', sentinelName: 'floe', floeVersion: '0.0.0-sim', redisVersion: '7.0.0' },
      counters,
      startedAt: Math.floor(proc.wallMs()),
      runId: Array.from({ length: 5 }, () => rng.nextU32().toString(16).padStart(8, '0')).join(''),
      logger: { debug() {}, info: trace('info'), warn: trace('warn'), error: trace('error') },
      table: commandTable(),
      selfAddr: () => self,
      topology: () => readTopology(backend, self),
      sessions: (): Iterable<Session> => this.sessions.values(),
    };
  }

  accept(socket: SimSocket): void {
    this.state.counters.totalConnections++;
    const id = this.nextId++;
    const proc = this.proc;
    this.sessions.set(
      id,
      new ClientConnection(
        id,
        socket,
        this.state,
        {
          onPaused: () => {},
          onResumed: () => {},
          onClosed: (c) => this.sessions.delete(c.id),
        },
        {
          // Harness bug 'resp-stale-arrival': requests look as if they arrived `STALE_ARRIVAL_MS` (a minute) earlier, so a
          // ReadIndex round that started before a request arrived may answer it (what decision 0004 forbids).
          monotonicMs: this.staleArrival ? () => proc.monoMs() - STALE_ARRIVAL_MS : () => proc.monoMs(),
          wallMs: () => Math.floor(proc.wallMs()),
        },
      ),
    );
  }
}

let table: ServerState['table'] | undefined;
const commandTable = (): ServerState['table'] => {
  table ??= buildCommandTable([...ALL_COMMANDS]);
  return table;
};

const STALE_ARRIVAL_MS = 60_000;

/** The limits a simulated RESP server runs with: `floe serve`'s, with `override` on top. */
export function respLimitsFor(override?: Partial<RespLimits>): RespLimits {
  return resolveLimits(mergeDefined(serveLimits().resp, override));
}

/** Harness bugs of the RESP path (run.ts lists them with the others). */
export const RESP_HARNESS_BUGS: readonly string[] = ['resp-reply-mixup', 'resp-stale-arrival'];

/** Connections from client processes to the nodes' RESP ports. */
export class RespNet {
  readonly stats: RespNetStats = { connects: 0, refused: 0, resets: 0, segments: 0 };
  private readonly servers = new WeakMap<SimProcess, SimRespServer>();
  /** Open links per node process, reset when it dies. */
  private readonly links = new WeakMap<SimProcess, Set<Link>>();
  private readonly rng: Prng;
  private readonly mixRng: Prng;
  private nextPort = 40_000;
  /** Limits that differ from `floe serve`'s in this run (hostile RESP clients: a short requestTimeoutMs). */
  limitsOverride: Partial<RespLimits> | undefined;

  constructor(
    private readonly world: World,
    readonly router: HttpRouter,
    private readonly conditions: () => NetConditions,
    private readonly hosts: () => readonly NodeHost[],
  ) {
    this.rng = world.rng('resp-net');
    this.mixRng = world.rng('resp-mixup');
  }

  private readonly recentReplies: Array<{ client: string; bytes: Buffer }> = [];

  /**
   * Harness bug 'resp-reply-mixup': a reply segment is sometimes swapped for a recent one sent to another client, or
   * an earlier one of its own (a proxy that mixes up its connections). The client must never take such a reply as its own answer.
   */
  mixup(client: string, seg: Segment & { kind: 'data' }): Segment {
    if (!this.world.bugs.has('resp-reply-mixup')) return seg;
    // Another client's reply, or an earlier one of this client's (a desynchronised connection).
    const other = this.recentReplies.find((r) => r.client !== client) ?? this.recentReplies[1];
    this.recentReplies.unshift({ client, bytes: seg.bytes });
    if (this.recentReplies.length > 4) this.recentReplies.pop();
    if (!other || !this.mixRng.chance(0.1)) return seg;
    this.world.trace(
      `resp mixup: ${client} gets ${other.client}'s reply ${JSON.stringify(other.bytes.toString('latin1').slice(0, 60))}`,
    );
    return { kind: 'data', bytes: other.bytes };
  }

  /** One-way delay of a segment: the run's delay, spikes, and a retransmission for each loss. */
  delayUs(): number {
    const c = this.conditions();
    let d = this.rng.range(c.delayUs[0], c.delayUs[1]);
    if (c.spike > 0 && this.rng.chance(c.spike)) d += this.rng.range(c.spikeUs[0], c.spikeUs[1]);
    for (let i = 0; i < 5 && c.drop > 0 && this.rng.chance(c.drop); i++) d += 200_000; // TCP's minimum RTO
    return d;
  }

  /**
   * Opens a connection from `proc` to `addr` (`nN:6379`). Calls `done` (as an event of `proc`) with the client's
   * socket, or with an error when refused; never, when the SYN or its answer is lost (the caller's timeout ends it).
   */
  connect(proc: SimProcess, clientName: string, addr: string, done: (s: SimSocket | Error) => void): void {
    const w = this.world;
    const host = this.hosts().find((h) => respAddrOf(h.id) === addr);
    const port = this.nextPort++;
    const link = new Link(w, this, clientName, host?.id ?? 0);
    const refuse = (why: string) => {
      this.stats.refused++;
      w.sched.after(this.delayUs(), proc, 'resp-refused', () => done(new Error(`connect ${why} ${addr}`)));
    };
    if (!host) {
      refuse('ENOTFOUND');
      return;
    }
    if (link.cut('up')) return; // the SYN is lost
    w.sched.at(proc.effectiveUs + this.delayUs(), undefined, 'resp-syn', () => {
      const nodeProc = host.proc;
      if (!host.up || !nodeProc?.alive || !host.node || !host.leases || !host.sm)
        return refuse('ECONNREFUSED');
      if (nodeProc.paused || nodeProc.machine.clock.suspended) return; // the kernel would answer; keep it simple
      let server = this.servers.get(nodeProc);
      if (!server) {
        server = new SimRespServer(w, host, nodeProc, w.rng(`resp-${nodeProc.name}`), this.limitsOverride);
        this.servers.set(nodeProc, server);
        this.watch(nodeProc);
      }
      const [ch, cp] = [clientName, port];
      const srv = server;
      link.client = new SimSocket(link, proc, ch, cp, addr.split(':')[0] as string, 6379);
      link.server = new SimSocket(link, nodeProc, addr.split(':')[0] as string, 6379, ch, cp);
      link.client.peer = link.server;
      link.server.peer = link.client;
      this.links.get(nodeProc)?.add(link);
      w.sched.after(0, nodeProc, 'resp-accept', () => srv.accept(link.server as SimSocket));
      if (link.cut('down')) return; // the SYN-ACK is lost
      w.sched.after(this.delayUs(), proc, 'resp-connected', () => {
        this.stats.connects++;
        done(link.client);
      });
    });
  }

  /** When the node process dies, its kernel closes its connections: each client sees a reset. */
  private watch(nodeProc: SimProcess): void {
    const set = new Set<Link>();
    this.links.set(nodeProc, set);
    const kill = nodeProc.kill.bind(nodeProc);
    nodeProc.kill = () => {
      kill();
      for (const l of set) l.resetBoth(`${nodeProc.name} died`);
      set.clear();
    };
  }
}
