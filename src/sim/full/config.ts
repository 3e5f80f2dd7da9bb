// Profiles and swarm testing: a profile names the faults a run may use; each seed then draws its
// own configuration from that profile (which faults are on, how often, how hard, network quality,
// clock rates, lease tuning and the ID layout), so a sweep covers many different mixes instead of
// one average one (Groce et al., "Swarm testing", ISSTA 2012).

import { defineLayout, type Layout, resolveLayout } from '../../id/index.js';
import { Prng } from '../prng.js';
import { type NetConditions, QUIET_NET } from './network.js';
import type { NodeSettings } from './node-host.js';
import type { PeerTransportConfig } from './peer-net.js';
import type { PeerStrangerConfig } from './peer-strangers.js';
import { PRODUCTION, sdkDefaultRequestTimeoutMs } from './production-defaults.js';
import type { RespHostileConfig } from './resp-hostile.js';

export type FaultKind =
  /** Symmetric, one-way or partial partitions between nodes. */
  | 'partition'
  /** Some clients cannot reach some nodes (either way). */
  | 'clientPartition'
  /** Drops, duplicates, reordering, corrupted frames and delay spikes for a while. */
  | 'netNoise'
  /** A node process dies (the page cache survives) and restarts later on the same disk. */
  | 'nodeCrash'
  /** A node machine loses power: unsynced writes lost or torn at any byte; restarts later. */
  | 'nodePowerLoss'
  /** A node process stops (SIGSTOP) and resumes: its ticks catch up. */
  | 'nodePause'
  /** A node machine suspends: its monotonic clock stops, its wall clock does not. */
  | 'nodeSuspend'
  /** A node's fsyncs fail with EIO for a while: it must stop; it is restarted later. */
  | 'diskEio'
  /** A node's disk gets slow (fsync latency × 5..50). */
  | 'diskSlow'
  /** A bit flips at rest in a down node's WAL or snapshot file before it restarts. */
  | 'bitFlip'
  /** A machine's wall clock steps forwards or backwards. */
  | 'clockJump'
  /** A machine's clock rate changes (within the profile's drift bound). */
  | 'clockRate'
  /** A client process dies; a new one starts later on the same host. */
  | 'clientCrash'
  /** A replacement client process starts while the old one still runs; the old one dies later. */
  | 'clientReplace'
  /** A client process stops (SIGSTOP / a long GC pause) and resumes. */
  | 'clientPause'
  /** A client machine suspends (monotonic clock stops, wall clock runs on). */
  | 'clientSuspend'
  /**
   * A client machine loses power: its processes die, its lease cache keeps only what was fsynced, the next write torn;
   * it boots again (a new boot ID) and a process starts later.
   */
  | 'clientPowerLoss'
  /** The leader hands leadership to another voter. */
  | 'leaderTransfer'
  /**
   * Membership: a voter is removed, or a new machine is added (learner, caught up, promoted), or a
   * learner left behind is promoted: one step per fault, so the cluster keeps its size over time.
   */
  | 'membership'
  /**
   * Replies mixed up between clients for a while (a proxy or a reused keep-alive connection that desyncs): an SDK
   * client's lease call gets the answer of another client's call of the same kind, which was executed as sent.
   */
  | 'replyMixup'
  /**
   * A client host loses every link to the cluster (both ways: a route or firewall change on its side), and its
   * service is restarted while the cut lasts (a supervisor, a liveness probe that needs the network), so the
   * replacement finds the cluster unreachable and may resume its lease from the cache; the host's wall clock is
   * stepped (NTP) once the replacement runs; the cut lasts past a TTL, so the cluster expires the lease meanwhile.
   */
  | 'clientRestartCutOff'
  /**
   * A crash loop (only in the `restarts` profile): a node process dies again shortly after it starts serving — once
   * it leads and takes the leader's load (an OOM kill, a fatal bug on a request path) or, if it does not lead, soon
   * after it starts — and its supervisor starts it again at once (systemd `Restart=always`, a short `RestartSec`);
   * after 1–4 rounds it stays up. The leader is the usual victim.
   */
  | 'nodeRestartLoop'
  /**
   * `coarse` profile only: a client host loses every link to the cluster (both ways) for longer than a TTL while its
   * service runs on: its renewals fail, its generator must stop before the cluster expires the lease and grants the
   * worker ID to a host that waits for one.
   */
  | 'clientCutOff'
  /**
   * `coarse` profile only: as `clientRestartCutOff` (a host cut off, its service restarted, the replacement resumes
   * from its cache), then the machine is reset (power loss: a hypervisor's isolation response, a watchdog) and boots
   * again while still cut off, and its service resumes from whatever cache survived. No wall-clock step.
   */
  | 'clientPowerLossCutOff'
  /**
   * For a while, a node's disk flips one bit in some of the writes to its WAL segments (records, hard states,
   * segment headers) and snapshot files: corruption on the write path (firmware, DMA, a misdirected write), which
   * the node does not see while it runs (it never reads back what it wrote) and finds at its next start.
   */
  | 'writeBitFlip'
  /**
   * For a while (0.2-3 s), some directed links between nodes stall and then deliver everything they held, in order
   * (a congested switch port, a TCP connection whose receiver stops reading, a middlebox that buffers): one link, or
   * every link out of or into one node (the leader's in half the stalls). Nothing is lost; a message for a process
   * that died meanwhile goes with the connection it travelled on.
   */
  | 'linkStall'
  /**
   * A node machine loses power while an fdatasync of its WAL is in flight (the write it covers torn at any byte): a
   * loaded server is mid-write most of the time, the simulated one seldom, so a power loss at a random moment hardly
   * ever tears a log record. Restarted later, as after `nodePowerLoss`.
   */
  | 'nodePowerLossMidWrite'
  /**
   * For a while, some of an SDK client's acquire answers come from another Floe cluster (an endpoint, a balancer pool
   * or a DNS name that reaches it by mistake): a grant there, of a worker ID another client of this cluster holds,
   * echoing the request, with the other cluster's UUID in `floe-cluster`. The request itself ran here as sent.
   */
  | 'foreignCluster';

export const FAULT_KINDS: readonly FaultKind[] = [
  'partition',
  'clientPartition',
  'netNoise',
  'nodeCrash',
  'nodePowerLoss',
  'nodePause',
  'nodeSuspend',
  'diskEio',
  'diskSlow',
  'bitFlip',
  'clockJump',
  'clockRate',
  'clientCrash',
  'clientReplace',
  'clientPause',
  'clientSuspend',
  'clientPowerLoss',
  'leaderTransfer',
  'membership',
  'replyMixup',
  'clientRestartCutOff',
  'writeBitFlip',
  'foreignCluster',
];

/**
 * Faults added after sweeps were on record: their weights come from a stream of their own, so every seed keeps the
 * configuration it had before they existed (a recorded seed still replays its recorded run, plus these faults).
 */
const LATE_FAULTS: readonly FaultKind[] = ['clientPowerLoss'];
/** Faults added later still (a stream of their own again, so the draws of the first late stream stay as they were). */
const LATE2_FAULTS: readonly FaultKind[] = ['replyMixup'];
/** And later again (`config-late3`): every seed without them keeps its configuration and its run. */
const LATE3_FAULTS: readonly FaultKind[] = ['clientRestartCutOff'];
/**
 * Faults of the `restarts` profile only (`config-late5`, in drawConfig), not in FAULT_KINDS: no other profile can draw them, so every
 * other profile keeps its configuration and its run.
 */
const RESTART_FAULTS: readonly FaultKind[] = ['nodeRestartLoop'];
/**
 * Faults of the `coarse` profile only (not in FAULT_KINDS, so no other profile has them), weighted from a stream of
 * their own (`config-late5`, in drawCoarse: the two profiles never meet, so they share the stream name).
 */
export const COARSE_FAULTS: readonly FaultKind[] = ['clientCutOff', 'clientPowerLossCutOff'];
/** And later again (`config-late5`, drawn in drawConfig after every other stream; in disk, swarm, chaos, drift10). */
const LATE5_FAULTS: readonly FaultKind[] = ['writeBitFlip'];
/**
 * And later again (`config-late6-stall`, drawn after every other stream): link stalls in net, swarm and restarts;
 * power loss mid-write in disk, swarm and restarts.
 */
const LATE6_FAULTS: readonly FaultKind[] = ['linkStall', 'nodePowerLossMidWrite'];
/** And later again (`config-late8-foreign`, drawn after every other stream): answers of another cluster. */
const LATE8_FAULTS: readonly FaultKind[] = ['foreignCluster'];
const isLate = (f: FaultKind) =>
  LATE8_FAULTS.includes(f) ||
  LATE6_FAULTS.includes(f) ||
  LATE5_FAULTS.includes(f) ||
  LATE_FAULTS.includes(f) ||
  LATE2_FAULTS.includes(f) ||
  LATE3_FAULTS.includes(f) ||
  RESTART_FAULTS.includes(f) ||
  COARSE_FAULTS.includes(f);

export interface Profile {
  name: string;
  summary: string;
  /** Faults this profile may use. */
  faults: readonly FaultKind[];
  /** Each seed turns each fault on with probability 1/2 and draws its weight (else: all on, equal weight). */
  swarm: boolean;
  /** Largest |rate - 1| of any machine's clocks. */
  clockDrift: number;
  /** Network quality: 0 a clean LAN, 1 the worst the profile allows. */
  netNoise: number;
  /** Cluster sizes a seed draws from (`config-late5`) when `--nodes` is not given (absent: 3). */
  clusterSizes?: readonly number[];
  /**
   * Leases drawn from `config-late5` (the `coarse` profile): coarse layouts (1 s ticks in 3/4 of the seeds), TTLs of
   * 3-10 s, safety margins down to the SDK's minimum (TTL/100 + 50 ms), pools of 2-8 worker IDs, the lease cache.
   */
  coarseLeases?: boolean;
}

const ALL = FAULT_KINDS;
const NET: FaultKind[] = [
  'partition',
  'clientPartition',
  'netNoise',
  'replyMixup',
  'linkStall',
  'foreignCluster',
];
const NODES: FaultKind[] = [
  'nodeCrash',
  'nodePowerLoss',
  'nodePause',
  'nodeSuspend',
  'leaderTransfer',
  'membership',
];
const DISK: FaultKind[] = [
  'diskEio',
  'diskSlow',
  'bitFlip',
  'nodePowerLoss',
  'nodeCrash',
  'writeBitFlip',
  'nodePowerLossMidWrite',
];
const CLIENTS: FaultKind[] = [
  'clientCrash',
  'clientReplace',
  'clientPause',
  'clientSuspend',
  'clockJump',
  'clientPowerLoss',
  'clientRestartCutOff',
];

/** The `restarts` profile: a crash loop always on (see drawConfig), with what a restarting node meets. */
const RESTARTS: FaultKind[] = [
  'nodeRestartLoop',
  'nodeCrash',
  'nodePowerLoss',
  'diskSlow',
  'netNoise',
  'linkStall',
  'nodePowerLossMidWrite',
];

/**
 * The `stalls` profile: three nodes whose links stall and then deliver what they held, under crash loops and crashes
 * (what a late ReadIndex answer needs to meet the next process of the node that asked: issue 9 item 1b).
 */
const STALLS: FaultKind[] = ['linkStall', 'nodeRestartLoop', 'nodeCrash', 'netNoise'];

export const PROFILES: Record<string, Profile> = {
  quiet: {
    name: 'quiet',
    summary: 'no faults, equal clocks: the baseline',
    faults: [],
    swarm: false,
    clockDrift: 0,
    netNoise: 0,
  },
  net: {
    name: 'net',
    summary: 'network faults only',
    faults: NET,
    swarm: true,
    clockDrift: 0.05,
    netNoise: 1,
  },
  nodes: {
    name: 'nodes',
    summary: 'node crashes, power loss, pauses, suspends, leadership transfers, membership changes',
    faults: NODES,
    swarm: true,
    clockDrift: 0.05,
    netNoise: 0.3,
  },
  disk: {
    name: 'disk',
    summary: 'fsync EIO, slow disks, bit flips at rest and in written data, power loss with torn writes',
    faults: DISK,
    swarm: true,
    clockDrift: 0.05,
    netNoise: 0.3,
  },
  clients: {
    name: 'clients',
    summary: 'client crashes, replacements, pauses, suspends and wall-clock steps',
    faults: CLIENTS,
    swarm: true,
    clockDrift: 0.05,
    netNoise: 0.3,
  },
  swarm: {
    name: 'swarm',
    summary: 'every fault; each seed draws its own subset and rates (default)',
    // Link stalls and power loss mid-write too (not in FAULT_KINDS: `chaos` and `drift10` keep their runs).
    faults: [...ALL, 'linkStall', 'nodePowerLossMidWrite'],
    swarm: true,
    clockDrift: 0.05,
    netNoise: 1,
  },
  hostile: {
    name: 'hostile',
    summary:
      'swarm, with strangers on the peer port (production transport) and hostile RESP clients in every seed',
    faults: [...ALL, 'linkStall', 'nodePowerLossMidWrite'],
    swarm: true,
    clockDrift: 0.05,
    netNoise: 1,
  },
  chaos: {
    name: 'chaos',
    summary: 'every fault at once, equal weights',
    faults: ALL,
    swarm: false,
    clockDrift: 0.05,
    netNoise: 1,
  },
  coarse: {
    name: 'coarse',
    summary:
      'coarse layouts (1 s ticks), small safety margins on NTP-grade clocks (±0.5%), client hosts cut off, and reset while cut off',
    faults: [...CLIENTS, ...NET, 'nodeCrash', 'nodePause', 'leaderTransfer', 'clockRate', ...COARSE_FAULTS],
    swarm: true,
    clockDrift: 0.005,
    netNoise: 0.3,
    coarseLeases: true,
  },
  drift10: {
    name: 'drift10',
    summary:
      'swarm with clocks at ±10% (pairwise rate gaps past the documented 10%: lease overlaps may appear)',
    faults: ALL,
    swarm: true,
    clockDrift: 0.1,
    netNoise: 1,
  },
  restarts: {
    name: 'restarts',
    summary:
      'crash loops (a node dies again soon after it starts leading, restarted at once), crashes, power loss, slow disks; one node or three',
    faults: RESTARTS,
    swarm: true,
    clockDrift: 0.05,
    netNoise: 0.3,
    clusterSizes: [1, 3],
  },
  stalls: {
    name: 'stalls',
    summary:
      'links that stall for 0.2-3 s and then deliver what they held, with crash loops and crashes (three nodes)',
    faults: STALLS,
    swarm: true,
    clockDrift: 0.05,
    netNoise: 0.3,
  },
};

export const PROFILE_NAMES = Object.keys(PROFILES);

export function profileByName(name: string): Profile {
  const p = PROFILES[name];
  if (!p) throw new RangeError(`unknown profile "${name}"; expected one of: ${PROFILE_NAMES.join(', ')}`);
  return p;
}

export interface LeaseWorkloadConfig {
  app: string;
  ttlMs: number;
  layout: Layout;
  poolBits: number;
  requestTimeoutMs: number;
  burst: [number, number];
  gapMs: [number, number];
  releaseChance: number;
  /** Hosts that share their nodeId with another host (two processes, one nodeId). */
  sharedNodeIds: number;
  /** Clients keep their lease in a cache file with its lock (`cachePath`) on their machine's disk. */
  cache: boolean;
  /**
   * The SDK gets a monotonic clock of each process's own (like `performance.now()`: it starts near 0 in every process)
   * instead of the machine's: a cached monotonic deadline of a previous process does not compare with it.
   */
  processMonotonic: boolean;
  /** The SDK's `acquireTimeoutMs` (undefined: its default, TTL + 2 s). */
  acquireTimeoutMs?: number;
  /** The SDK's `safetyMarginMs` (undefined: its default, TTL/10 + 100 ms; drawn only in the `coarse` profile). */
  safetyMarginMs?: number;
  /**
   * The clients name no tuning (production-defaults seeds): no `requestTimeoutMs` and no `ttlMs` (the SDK's defaults;
   * `requestTimeoutMs` and `ttlMs` above then hold what the SDK resolves them to, for the harness's own timing).
   */
  sdkDefaults?: boolean;
}

/** How a sequence client calls: the HTTP routes, RESP (INCR/INCRBY/SEQ.ALLOC), or the SDK's FloeSequence. */
export type SeqClientKind = 'http' | 'resp' | 'sdk';

export interface SeqWorkloadConfig {
  /** Sequence client processes (0: no sequence workload in this seed). */
  clients: number;
  /**
   * How each client calls (one per client). Client i is `http`, `resp`, `sdk` in turn from an offset of 0 or 1, so
   * the first is never `sdk` (the liveness check after healing needs a strict INCRBY) and 3 clients use all three.
   */
  kinds: SeqClientKind[];
  /** The sequences' segment step (small, so segments roll over often). */
  step: number;
  /** Values per INCRBY / per segment allocation [1, max]. */
  maxCount: number;
  /** ms between two calls of one client [min, max]. */
  thinkMs: [number, number];
}

/** How a snowflake client calls: the HTTP routes (JSON and Leaf's text route), or RESP `SNOWFLAKE.NEXT`. */
export type SnowflakeClientKind = 'http' | 'resp';

/** One server-side Snowflake key of the workload. */
export interface SnowflakeKeyConfig {
  key: string;
  /** A preset name (the only layouts a key may have). */
  layout: 'floe' | 'twitter' | 'sonyflake';
  ttlMs: number;
}

export interface SnowflakeWorkloadConfig {
  /** Snowflake client processes (0: no server-side Snowflake in this seed; nodes then do not run the service). */
  clients: number;
  /** How each client calls (client i is `http`, `resp` in turn from an offset of 0 or 1). */
  kinds: SnowflakeClientKind[];
  keys: SnowflakeKeyConfig[];
  /** IDs per call [1, max]. */
  maxCount: number;
  /** ms between two calls of one client [min, max]. */
  thinkMs: [number, number];
  /** Nodes keep their leases in a cache directory on their disk (production: `<dataDir>/snowflake-leases`). */
  cache: boolean;
  /**
   * After creating the keys, the operator shrinks the pools of `sf-floe` and `sf-sony` to this many bits (`PUT
   * /v1/apps/:key/pool`), so the nodes share a few worker IDs and hand them over as leases expire (undefined: the
   * layout's full pool, where each node keeps its own worker ID).
   */
  poolBits?: number;
}

/** RESP lease clients (resp-lease-workload.ts): raw holders of the lease clients' app over WORKER.* commands. */
export interface RespLeaseWorkloadConfig {
  /** Client processes (0: none in this seed). */
  clients: number;
  /** IDs per burst [min, max] and ms between bursts [min, max]. */
  burst: [number, number];
  gapMs: [number, number];
  releaseChance: number;
  /** How far ahead each BOUND promises (ms). */
  boundWindowMs: number;
  /** A RESP command's own timeout (ms). */
  requestTimeoutMs: number;
}

export interface SimConfig {
  seed: number;
  profile: string;
  nodes: number;
  kvClients: number;
  leaseClients: number;
  seconds: number;
  healSeconds: number;
  node: NodeSettings;
  lease: LeaseWorkloadConfig;
  seq: SeqWorkloadConfig;
  snowflake: SnowflakeWorkloadConfig;
  respLease: RespLeaseWorkloadConfig;
  clockDrift: number;
  /** Background network conditions of the run. */
  net: NetConditions;
  /** Relative weight of each fault in force (absent or 0: off). */
  weights: Partial<Record<FaultKind, number>>;
  /** Simulated ms between two fault decisions [min, max]. */
  faultGapMs: [number, number];
  /** Most nodes down, paused, suspended or halted at once. */
  maxImpairedNodes: number;
  /** How long an outage lasts, ms [min, max]. */
  outageMs: [number, number];
  /** Raft traffic through the production PeerTransport over simulated TCP (peer-net.ts), and its settings. */
  transport: PeerTransportConfig;
  /**
   * Key-value clients append a complete, checksummed WAL frame of ASCII bytes to every value they write
   * (`frame-shaped.ts`: binary-minded or hostile clients), so a power loss tearing such a record leaves a valid frame
   * after the tear. Drawn from `config-late6-frames` in profiles with power loss (absent: plain values).
   */
  kvFrameValues?: boolean;
  /** Key-value clients' think time between operations, ms (absent: 30-400; busy clients: 5-60). */
  kvThinkMs?: [number, number];
  /** Strangers connecting to the nodes' peer ports (peer-strangers.ts); absent: none. Stream `config-hostile`. */
  peerStrangers?: PeerStrangerConfig;
  /** Hostile RESP clients (resp-hostile.ts); absent: none. Stream `config-hostile`. */
  respHostile?: RespHostileConfig;
  /**
   * The seed runs what users run (`config-late7-defaults`, drawProductionDefaults): nodes as `floe serve` builds them
   * with its defaults, SDK clients with the SDK's; `containerHosts`: the first this many lease client hosts run each
   * process in a PID namespace of its own (a container per process), so their cache locks cannot check a holder's
   * PID. Absent: the drawn tuning.
   */
  productionDefaults?: { containerHosts: number };
  /**
   * The SDK clients (lease hosts without a per-process clock, and the nodes' own Snowflake clients) read their
   * machine's CLOCK_MONOTONIC of the current boot, declared system-wide (`monotonicIsSystemWide`), as the SDK's
   * built-in clock is; a node's power loss reboots its machine. Stream `config-late7-sysmono` (`drawMachineMonotonic`).
   */
  machineMonotonic?: boolean;
  /**
   * The nodes run with `floe serve --leader-lease` (decision 0009): the core's leader lease on, and strict sequence
   * values served from it with no ReadIndex round. Drawn in half the seeds with sequence clients, from a stream of its
   * own (`config-late8-lease`): a seed that does not draw it keeps its configuration, its run and its trace hash.
   */
  leaderLease?: boolean;
  /**
   * A rolling enable of `--leader-lease` (decision 0009, stop 34): these members of the initial cluster run without
   * the flag, the others with it. Drawn in half the leader-lease seeds, from a stream of its own
   * (`config-late9-rolling`); each draws 1 to nodes − 1 members. The flagless members neither use a lease nor need
   * to: they keep the followers' side of every leader's lease all the same (the switch `lease-promise-opt-in` takes
   * that away). Members added later run with the flag.
   */
  leaseRolling?: number[];
  /**
   * Tests only (never drawn): how the membership fault removes a voter. `failedFirst`: the order before FS-20's
   * harness fix (a member that failed otherwise before one with corrupt data); `force`: `removeMember(id, { force:
   * true })`, skipping the node's strict reconfiguration check. Absent: corrupt data first, the check on.
   */
  removal?: { failedFirst?: boolean; force?: boolean };
}

export interface ConfigOverrides {
  nodes?: number;
  kvClients?: number;
  leaseClients?: number;
  /** Sequence clients (default: 2 in about a third of the seeds, else 0). */
  seqClients?: number;
  /** Server-side Snowflake clients (default: 2 or 3 in about a third of the seeds, else 0). */
  snowflakeClients?: number;
  /** RESP lease clients (default: 1-3 in about a quarter of the swarm seeds, else 0). */
  respLeaseClients?: number;
  seconds?: number;
  healSeconds?: number;
  storage?: 'durable' | 'memory';
  /** Raft traffic: the simulator's NodeTransport ('sim'), the production PeerTransport, or drawn per seed (default). */
  peerTransport?: 'sim' | 'production' | 'drawn';
  /** Half-open connections at a node's power loss (default: drawn in half the seeds, `config-late7-halfopen`). */
  halfOpen?: boolean;
  /** Frame-shaped key-value values (default: drawn in some seeds of profiles with power loss). */
  kvFrameValues?: boolean;
  /** Strangers on the peer transport (default: every `hostile` seed, no other); forces the production transport. */
  peerStrangers?: boolean;
  /** Hostile RESP clients (default: every `hostile` seed, no other). */
  respHostile?: boolean;
  /** Production defaults (drawProductionDefaults): in every seed, in none, or drawn (default: about 1 in 6). */
  defaults?: 'on' | 'off' | 'drawn';
  /** Force the machine's system-wide monotonic clock on (true) or off (false); absent: drawn. */
  machineMonotonic?: boolean;
  /** Force `--leader-lease` on every node (true) or off (false); absent: drawn (`drawLeaderLease`). */
  leaderLease?: boolean;
  /** Force a rolling enable (some members without `--leader-lease`) on or off in leader-lease seeds; absent: drawn. */
  leaseRolling?: boolean;
  /** Tests only: the membership fault's removal policy (SimConfig.removal); absent: the default. */
  removal?: { failedFirst?: boolean; force?: boolean };
}

export const COARSE_LAYOUT: Layout = defineLayout({
  name: 'sim-coarse',
  epochMs: Date.UTC(2026, 0, 1),
  unitMs: 50,
  timestampBits: 40,
  datacenterBits: 0,
  workerBits: 19,
  sequenceBits: 4,
});

/** The SDK's default layout. */
export const FLOE_LAYOUT: Layout = resolveLayout('floe');

/**
 * Seconds, as Baidu's uid-generator counts (its preset's 2016 epoch ran out in 2024; users set their own): a tick as
 * long as a third of a 3 s lease. Only the `coarse` profile draws it.
 */
export const SECONDS_LAYOUT: Layout = defineLayout({
  name: 'sim-seconds',
  epochMs: Date.UTC(2026, 0, 1),
  unitMs: 1000,
  timestampBits: 34,
  datacenterBits: 0,
  workerBits: 17,
  sequenceBits: 12,
});

/** Drawn from a stream of its own, after every other draw, so adding it moved no other seed's configuration. */
function seqClientKinds(seed: number, clients: number): SeqClientKind[] {
  const order: SeqClientKind[] = ['http', 'resp', 'sdk'];
  const offset = new Prng(seed).fork('config-seq-kinds').int(2);
  return Array.from({ length: clients }, (_, i) => order[(offset + i) % 3] as SeqClientKind);
}

/**
 * The server-side Snowflake workload, from a stream of its own (`config-late4`), drawn after everything else: every
 * seed keeps the configuration it had before it existed, and a seed without snowflake clients runs exactly as before.
 * Layouts: `floe` (1 ms ticks, 12-bit sequence), `sonyflake` (10 ms ticks, 8-bit sequence: batches overflow a tick and
 * borrow ahead) and `twitter` (5 datacenter bits above 5 worker bits).
 */
function drawSnowflake(seed: number, override: number | undefined): SnowflakeWorkloadConfig {
  const r = new Prng(seed).fork('config-late4');
  const drawn = r.chance(1 / 3) ? r.range(2, 3) : 0;
  const clients = override ?? drawn;
  const offset = r.int(2);
  const kinds = Array.from(
    { length: clients },
    (_, i) => (['http', 'resp'] as const)[(offset + i) % 2] as SnowflakeClientKind,
  );
  const ttl = () => r.pick([1000, 2000, 3000, 5000]);
  const keys: SnowflakeKeyConfig[] = [
    { key: 'sf-floe', layout: 'floe', ttlMs: ttl() },
    { key: 'sf-sony', layout: 'sonyflake', ttlMs: ttl() },
  ];
  if (r.chance(0.5)) keys.push({ key: 'sf-twitter', layout: 'twitter', ttlMs: ttl() });
  return {
    clients,
    kinds,
    keys,
    maxCount: r.pick([1, 20, 300, 2000]),
    thinkMs: [5, r.range(30, 200)],
    cache: r.chance(0.5),
    ...(r.chance(0.5) ? { poolBits: r.range(1, 2) } : {}),
  };
}

/**
 * The RESP lease workload, from a stream of its own (`config-resp-lease`), drawn after everything else: every seed
 * keeps the configuration it had before it existed, and a seed without RESP lease clients runs exactly as before. Only
 * swarm seeds draw clients (about a quarter of them); any profile gets them with `--resp-lease-clients N`.
 * The TTL is the run's lease TTL; the request timeout stays below a third of it, so that a renewal lost on the way
 * leaves time for the next one.
 */
export function drawRespLease(
  seed: number,
  profile: string,
  ttlMs: number,
  override: number | undefined,
): RespLeaseWorkloadConfig {
  const r = new Prng(seed).fork('config-resp-lease');
  const drawn = r.chance(1 / 4) ? r.range(1, 3) : 0;
  return {
    clients: override ?? (profile === 'swarm' ? drawn : 0),
    burst: [1, r.range(5, 60)],
    gapMs: [5, r.range(20, 300)],
    releaseChance: r.pick([0.02, 0.1, 0.2]),
    boundWindowMs: r.pick([2 * ttlMs, 5 * ttlMs, 30_000]),
    requestTimeoutMs: Math.min(r.pick([200, 500, 1000]), Math.floor(ttlMs / 3)),
  };
}

/** The configuration of one seed: a pure function of (seed, profile, overrides). */
export function drawConfig(seed: number, profileName: string, o: ConfigOverrides = {}): SimConfig {
  const p = profileByName(profileName);
  const rng = new Prng(seed).fork('config');
  // The cluster size, from a stream of its own in profiles that draw it (every other profile: 3, as before).
  const late5 = new Prng(seed).fork('config-late5');
  const nodes = o.nodes ?? (p.clusterSizes ? late5.pick(p.clusterSizes) : 3);
  const weights: Partial<Record<FaultKind, number>> = {};
  for (const f of p.faults) {
    if (isLate(f)) continue;
    if (p.swarm) {
      if (rng.chance(0.5)) weights[f] = rng.range(1, 10);
    } else {
      weights[f] = 5;
    }
  }
  if (p.swarm && p.faults.length > 0 && Object.keys(weights).length === 0) {
    weights[
      rng.pick(
        p.faults.filter(
          (f) =>
            !LATE2_FAULTS.includes(f) &&
            !LATE3_FAULTS.includes(f) &&
            !LATE5_FAULTS.includes(f) &&
            !LATE6_FAULTS.includes(f) &&
            !LATE8_FAULTS.includes(f) &&
            !RESTART_FAULTS.includes(f) &&
            !COARSE_FAULTS.includes(f),
        ),
      )
    ] = 5;
  }
  const late = new Prng(seed).fork('config-late');
  for (const f of p.faults) {
    if (!LATE_FAULTS.includes(f)) continue;
    if (!p.swarm) weights[f] = 5;
    else if (late.chance(0.5)) weights[f] = late.range(1, 10);
  }
  const late2 = new Prng(seed).fork('config-late2');
  for (const f of p.faults) {
    if (!LATE2_FAULTS.includes(f)) continue;
    if (!p.swarm) weights[f] = 5;
    else if (late2.chance(0.5)) weights[f] = late2.range(1, 10);
  }
  const seqClients = late2.chance(1 / 3) ? 2 : 0;
  // Always on in the profiles that have them (they are what the profile is for), with a drawn weight.
  for (const f of p.faults) if (RESTART_FAULTS.includes(f)) weights[f] = p.swarm ? late5.range(3, 10) : 5;
  const late3 = new Prng(seed).fork('config-late3');
  for (const f of p.faults) {
    if (!LATE3_FAULTS.includes(f)) continue;
    if (!p.swarm) weights[f] = 5;
    else if (late3.chance(0.5)) weights[f] = late3.range(1, 10);
  }
  // With a restart while cut off, how long its services wait for the cluster before they resume from the cache: the
  // SDK's default (TTL + 2 s), or a short wait, as a service that must come up quickly configures. Drawn only in
  // those seeds, so every other seed runs as before.
  // The fault matters with a lease cache (else there is nothing to resume), and most with the SDK on a per-process
  // monotonic clock (a cached monotonic deadline then means nothing to the replacement): its seeds have the cache,
  // and a per-process clock in about two thirds of them.
  // Bit flips in written data (`config-late5`): drawn after every other stream, so a seed that does not draw it keeps
  // its configuration and its run.
  const flipRng = new Prng(seed).fork('config-late5'); // fresh: the restarts profile's draws above never meet it
  for (const f of p.faults) {
    if (!LATE5_FAULTS.includes(f)) continue;
    if (!p.swarm) weights[f] = 5;
    else if (flipRng.chance(0.5)) weights[f] = flipRng.range(1, 10);
  }
  // Link stalls and power loss mid-write (`config-late6-stall`): a seed that draws neither keeps its configuration
  // and its run.
  // In a quarter of the swarm seeds each (so most recorded swarm seeds keep their runs), half of the others.
  const stallRng = new Prng(seed).fork('config-late6-stall');
  for (const f of p.faults) {
    if (!LATE6_FAULTS.includes(f)) continue;
    if (!p.swarm) weights[f] = 5;
    else if (p.name === 'stalls')
      weights[f] = stallRng.range(3, 10); // what the profile is for: always on
    else if (stallRng.chance(p.name === 'swarm' ? 1 / 4 : 1 / 2)) weights[f] = stallRng.range(1, 10);
  }
  // Answers of another cluster (`config-late8-foreign`): in a quarter of the swarm seeds, half of the net ones.
  const foreignRng = new Prng(seed).fork('config-late8-foreign');
  for (const f of p.faults) {
    if (!LATE8_FAULTS.includes(f)) continue;
    if (!p.swarm) weights[f] = 5;
    else if (foreignRng.chance(p.name === 'swarm' ? 1 / 4 : 1 / 2)) weights[f] = foreignRng.range(1, 10);
  }
  const cutOff = weights.clientRestartCutOff !== undefined;
  const acquireTimeoutMs = cutOff && late3.chance(3 / 4) ? late3.pick([100, 250, 500, 1000]) : undefined;
  const noise = p.netNoise * rng.float();
  const net: NetConditions = {
    ...QUIET_NET,
    delayUs: [100 + rng.int(500), 1_000 + rng.int(1 + Math.floor(10_000 * noise))],
    drop: noise * 0.05 * rng.float(),
    duplicate: noise * 0.05 * rng.float(),
    reorder: noise * 0.2 * rng.float(),
    corrupt: noise * 0.01 * rng.float(),
    spike: noise * 0.05 * rng.float(),
    spikeUs: [5_000, 5_000 + Math.floor(200_000 * noise)],
  };
  const tickMs = rng.pick([20, 50, 50, 100]);
  const ttlMs = rng.pick([1000, 2000, 2000, 3000, 5000]);
  const faulty = Object.keys(weights).length > 0;
  const cfg: SimConfig = {
    seed,
    profile: p.name,
    nodes,
    kvClients: o.kvClients ?? 3,
    leaseClients: o.leaseClients ?? 10,
    seconds: o.seconds ?? 10,
    healSeconds: o.healSeconds ?? 15,
    node: {
      tickMs,
      electionTicks: rng.range(8, 15),
      heartbeatTicks: 1,
      snapshotEvery: rng.pick([30, 100, 300, 1000]),
      trailingEntries: rng.pick([0, 10, 50, 500]),
      proposalTimeoutMs: rng.pick([1000, 3000, 5000]),
      storage: o.storage ?? 'durable',
      syncUs: [100 + rng.int(400), 500 + rng.int(5_000)],
      leaseTtlMs: ttlMs,
    },
    lease: {
      app: 'svc',
      ttlMs,
      layout: rng.chance(0.25) ? COARSE_LAYOUT : FLOE_LAYOUT,
      poolBits: rng.range(2, 4),
      requestTimeoutMs: rng.pick([200, 500, 1000]),
      burst: [1, rng.range(5, 60)],
      gapMs: [5, rng.range(20, 300)],
      releaseChance: rng.pick([0, 0.02, 0.1]),
      sharedNodeIds: rng.chance(0.3) ? 1 : 0,
      // Both drawn first in every seed (the streams stay as they were), then raised in the fault's seeds.
      cache: late.chance(0.5) || cutOff,
      processMonotonic: late2.chance(0.3) || (cutOff && late3.chance(0.5)),
      ...(acquireTimeoutMs === undefined ? {} : { acquireTimeoutMs }),
    },
    seq: {
      clients: o.seqClients ?? seqClients,
      kinds: seqClientKinds(seed, o.seqClients ?? seqClients),
      step: late2.pick([3, 10, 50]),
      maxCount: late2.pick([1, 3, 20]),
      thinkMs: [5, late2.range(30, 200)],
    },
    snowflake: drawSnowflake(seed, o.snowflakeClients),
    respLease: drawRespLease(seed, p.name, ttlMs, o.respLeaseClients),
    clockDrift: p.clockDrift,
    net,
    weights,
    faultGapMs: faulty ? [20, rng.range(100, 1_500)] : [1_000, 1_000],
    maxImpairedNodes: rng.range(1, nodes),
    outageMs: [10, rng.range(200, 4_000)],
    transport: drawTransport(seed, o.peerTransport ?? 'drawn', o.halfOpen),
  };
  const frameValues = o.kvFrameValues ?? drawFrameValues(seed, p);
  if (frameValues) cfg.kvFrameValues = true;
  // Busy key-value clients with frame-shaped values (more records in flight when the power goes), and in `stalls`
  // (more reads on followers, whose ReadIndex answers a stall can hold).
  if (frameValues || p.name === 'stalls') cfg.kvThinkMs = [5, 60];
  drawHostile(seed, p.name, o, cfg);
  const out = drawProductionDefaults(seed, o, p.coarseLeases ? drawCoarse(seed, p, cfg) : cfg);
  if (o.machineMonotonic ?? drawMachineMonotonic(seed)) out.machineMonotonic = true;
  if (o.leaderLease ?? drawLeaderLease(seed, out)) out.leaderLease = true;
  if (out.leaderLease) {
    const rolling = drawLeaseRolling(seed, out.nodes, o.leaseRolling);
    if (rolling) out.leaseRolling = rolling;
  }
  if (o.removal) out.removal = { ...o.removal };
  return out;
}

/**
 * What users run (`config-late7-defaults`, a stream of its own drawn over the finished configuration: a seed that
 * does not draw it keeps its configuration and its run). In about 1 in 6 seeds of every profile (`--defaults on|off`
 * forces it): the nodes built as `floe serve` builds them (its DEFAULTS: 50 ms ticks, 10 election ticks, a snapshot
 * every 10,000 entries with 5,000 trailing, 64 MiB WAL segments, the LeaseService's default TTL, the production peer
 * transport unless `--peer-transport sim`, its default snapshot chunk), the SDK clients naming no tuning (10 s TTL,
 * 2 s request timeout, default margins and acquire timeouts, the default layout, the SDK's own monotonic clock),
 * server-side Snowflake keys at their default TTL, and in half of them 1-3 client hosts whose processes each run in
 * a PID namespace of their own. Leases of 10 s need time to expire and change hands: 20 or 30 s of faults (unless
 * `--seconds`), and 30 s to heal (unless `--heal-seconds`: a crashed holder's lock then looks alive until its
 * heartbeat is max(2 TTL, TTL + 10 s) old).
 */
function drawProductionDefaults(seed: number, o: ConfigOverrides, cfg: SimConfig): SimConfig {
  const r = new Prng(seed).fork('config-late7-defaults');
  const drawn = r.chance(1 / 6);
  const containerHosts = r.chance(1 / 2) ? r.range(1, 3) : 0;
  const seconds = r.pick([20, 30]);
  if (!(o.defaults === 'on' || (o.defaults !== 'off' && drawn))) return cfg;
  const serve = PRODUCTION.serve;
  const ttlMs = PRODUCTION.leaseTtlMs;
  const { acquireTimeoutMs: _a, safetyMarginMs: _m, ...lease } = cfg.lease;
  return {
    ...cfg,
    seconds: o.seconds ?? seconds,
    healSeconds: o.healSeconds ?? 30,
    node: {
      ...cfg.node,
      production: true,
      tickMs: serve.tickMs,
      electionTicks: serve.electionTicks,
      snapshotEvery: serve.snapshotEvery,
      trailingEntries: serve.snapshotTrailing,
      leaseTtlMs: ttlMs,
    },
    lease: {
      ...lease,
      ttlMs,
      layout: FLOE_LAYOUT,
      requestTimeoutMs: sdkDefaultRequestTimeoutMs(),
      processMonotonic: false,
      cache: cfg.lease.cache || containerHosts > 0,
      sdkDefaults: true,
    },
    snowflake: {
      ...cfg.snowflake,
      keys: cfg.snowflake.keys.map((k) => ({ ...k, ttlMs: PRODUCTION.snowflakeTtlMs })),
    },
    transport: {
      ...cfg.transport,
      production: o.peerTransport !== 'sim',
      snapshotChunkBytes: PRODUCTION.snapshotChunkBytes,
    },
    productionDefaults: { containerHosts: Math.min(containerHosts, cfg.leaseClients) },
  };
}

/**
 * `floe serve --leader-lease` on every node (`SimConfig.leaderLease`): in half the seeds with sequence clients (where
 * strict values are served from the lease), from a stream of its own (`config-late8-lease`).
 */
export function drawLeaderLease(seed: number, cfg: SimConfig): boolean {
  return cfg.seq.clients > 0 && new Prng(seed).fork('config-late8-lease').chance(1 / 2);
}

/**
 * A rolling enable of `--leader-lease` (`SimConfig.leaseRolling`): in half the leader-lease seeds (`force` decides
 * when given), 1 to nodes − 1 of the initial members (ids 1..nodes) run without the flag. Stream `config-late9-rolling`.
 */
export function drawLeaseRolling(seed: number, nodes: number, force?: boolean): number[] | undefined {
  const r = new Prng(seed).fork('config-late9-rolling');
  const drawn = r.chance(1 / 2);
  const ids = Array.from({ length: nodes }, (_, i) => i + 1);
  const without = r.range(1, Math.max(1, nodes - 1));
  const off: number[] = [];
  while (off.length < without && ids.length > 1) off.push(ids.splice(r.int(ids.length), 1)[0]!);
  if (!(force ?? drawn) || nodes < 2) return undefined;
  return off.sort((a, b) => a - b);
}

/**
 * The SDK on its machine's CLOCK_MONOTONIC, declared system-wide (`SimConfig.machineMonotonic`): what users run by
 * default, and what the node's own Snowflake client runs. In half the seeds of every profile, from a stream of its own
 * (`config-late7-sysmono`): a seed that does not draw it keeps its configuration, its run and its trace hash.
 */
export function drawMachineMonotonic(seed: number): boolean {
  return new Prng(seed).fork('config-late7-sysmono').chance(1 / 2);
}

/**
 * The `coarse` profile's leases and its own faults, from a stream of their own (`config-late5`), drawn over a
 * configuration drawn as every profile draws it (no other profile reaches this).
 * - Layouts: seconds (1 s ticks) in three quarters of the seeds, else `sonyflake` (10 ms), the simulator's 50 ms one or `floe`.
 *   With a tick, the SDK stops generating one tick before its deadline (the fast path runs to the end of the tick of
 *   its last check); TTLs of 3 s and more leave room for it (the SDK refuses a tick of TTL - margin - renewal period or
 *   more; with 2 s and 1 s ticks the generator stops 700 ms after each acknowledged send, finding FS-5).
 * - Safety margins anywhere in what the SDK allows down to its minimum, TTL/100 + 50 ms: with clocks at ±0.5% (a
 *   rate gap of 1%, still twenty times NTP's worst slew) the margin covers the rate gap the SDK's argument needs
 *   (decision 0002: ρ·TTL < margin).
 * - Pools of 1-3 bits, so hosts wait for worker IDs and take one as soon as the cluster expires it.
 * - The lease cache in three quarters of the seeds, a short `acquireTimeoutMs` in three quarters.
 */
function drawCoarse(seed: number, p: Profile, cfg: SimConfig): SimConfig {
  const r = new Prng(seed).fork('config-late5');
  const weights = { ...cfg.weights };
  for (const f of p.faults) {
    if (!COARSE_FAULTS.includes(f)) continue;
    // A host cut off while it runs is what the profile is about: in every seed (the reset in half).
    if (!p.swarm) weights[f] = 5;
    else if (f === 'clientCutOff' || r.chance(0.5)) weights[f] = r.range(1, 10);
  }
  const ttlMs = r.pick([3000, 4000, 5000, 10_000]);
  const layout = r.chance(3 / 4)
    ? SECONDS_LAYOUT
    : r.pick([resolveLayout('sonyflake'), COARSE_LAYOUT, FLOE_LAYOUT]);
  const minMargin = Math.ceil(ttlMs / 100) + 50;
  const safetyMarginMs = r.pick([
    minMargin,
    minMargin,
    Math.ceil(ttlMs / 20) + 50,
    Math.floor(ttlMs / 10) + 100,
  ]);
  const acquireTimeoutMs = r.chance(3 / 4) ? r.pick([100, 250, 500, 1000]) : undefined;
  const { acquireTimeoutMs: _drawn, ...lease } = cfg.lease;
  return {
    ...cfg,
    weights,
    faultGapMs: Object.keys(weights).length > 0 ? [20, r.range(100, 1_500)] : cfg.faultGapMs,
    node: { ...cfg.node, leaseTtlMs: ttlMs },
    lease: {
      ...lease,
      ttlMs,
      layout,
      safetyMarginMs,
      poolBits: r.range(1, 3),
      cache: r.chance(3 / 4),
      processMonotonic: r.chance(0.5),
      ...(acquireTimeoutMs === undefined ? {} : { acquireTimeoutMs }),
    },
  };
}

/**
 * Frame-shaped key-value values (`config-late6-frames`, a stream of its own: a seed that does not draw them runs as before):
 * in half the seeds of `disk` and `restarts`, a quarter of the other profiles with power loss.
 */
function drawFrameValues(seed: number, p: Profile): boolean {
  if (!p.faults.includes('nodePowerLoss')) return false;
  const share = p.name === 'disk' || p.name === 'restarts' ? 1 / 2 : 1 / 4;
  return new Prng(seed).fork('config-late6-frames').chance(share);
}

/** From a stream of its own (`config-late4-transport`), so every other draw of a seed stays as it was. */
function drawTransport(
  seed: number,
  mode: 'sim' | 'production' | 'drawn',
  halfOpen?: boolean,
): PeerTransportConfig {
  const r = new Prng(seed).fork('config-late4-transport');
  const drawn = r.chance(0.5);
  return {
    production: mode === 'drawn' ? drawn : mode === 'production',
    sndBufBytes: r.pick([2 * 1024, 16 * 1024, 208 * 1024]),
    resetChance: r.pick([0, 0, 0.0005, 0.005]),
    snapshotChunkBytes: r.pick([1024, 4096, 1024 * 1024]),
    // A stream of its own, so every other draw (and every seed's run without a power loss) stays as it was.
    halfOpenOnPowerLoss: halfOpen ?? new Prng(seed).fork('config-late7-halfopen').chance(0.5),
  };
}

/**
 * Hostile clients (issue 10), from a stream of their own (`config-hostile`): both in every seed of the `hostile`
 * profile (the swarm's faults and draws plus these), in no other profile unless forced by the overrides, so every
 * seed of the other profiles keeps its configuration and its run (pinned seeds of other tests included). Peer
 * strangers need the production transport, which they force unless `peerTransport: 'sim'` was asked for (then none).
 */
function drawHostile(seed: number, profile: string, o: ConfigOverrides, cfg: SimConfig): void {
  const r = new Prng(seed).fork('config-hostile');
  const always = profile === 'hostile';
  const peer = (o.peerStrangers ?? always) && o.peerTransport !== 'sim';
  const resp = o.respHostile ?? always;
  const pending = r.pick([2, 4, 8, 64]);
  const gap: [number, number] = [20, r.range(100, 1_000)];
  const respGap: [number, number] = [20, r.range(100, 1_000)];
  const requestTimeoutMs = r.pick([300, 1000, 3000]);
  if (peer) {
    cfg.transport = { ...cfg.transport, production: true, maxPendingHandshakes: pending };
    cfg.peerStrangers = { maxPendingHandshakes: pending, gapMs: gap };
  }
  if (resp) {
    cfg.respHostile = { gapMs: respGap, requestTimeoutMs };
    // Well-behaved RESP clients on the same nodes: two sequence clients, one of them `resp` (seqClientKinds).
    if (cfg.seq.clients < 2 && o.seqClients === undefined)
      cfg.seq = { ...cfg.seq, clients: 2, kinds: seqClientKinds(seed, 2) };
  }
}
