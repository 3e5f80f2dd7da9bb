// The simulated network: per-message latency (which reorders messages), loss, duplication,
// latency spikes, and a set of blocked directed links (partitions, symmetric or one-way).
// It only decides fates; the simulation schedules the deliveries on its event queue.

import type { Entry, Message, NodeId } from '../raft/types.js';
import type { Prng } from './prng.js';

export interface NetworkConditions {
  /** Probability that a message is lost. Range [0, 1]. */
  dropRate: number;
  /** Probability that a message is delivered twice (each copy with its own latency). Range [0, 1]. */
  duplicateRate: number;
  /** Probability that a message suffers an extra delay of up to `spikeMaxUs`. Range [0, 1]. */
  spikeRate: number;
  /** Base one-way latency range, microseconds of virtual time. */
  minLatencyUs: number;
  maxLatencyUs: number;
  /** Upper bound of a latency spike, microseconds. */
  spikeMaxUs: number;
}

/** A clean LAN: 0.2–2 ms, nothing lost, nothing duplicated. */
export const CALM_NETWORK: NetworkConditions = {
  dropRate: 0,
  duplicateRate: 0,
  spikeRate: 0,
  minLatencyUs: 200,
  maxLatencyUs: 2_000,
  spikeMaxUs: 0,
};

export class Network {
  conditions: NetworkConditions = { ...CALM_NETWORK };
  private blocked = new Set<string>();
  /** Bumped on every topology change so the trace can name which partition was in force. */
  epoch = 0;

  constructor(private readonly rng: Prng) {}

  isBlocked(from: NodeId, to: NodeId): boolean {
    return this.blocked.has(`${from}>${to}`);
  }

  /** Replaces the set of blocked directed links. */
  setBlocked(links: Iterable<[NodeId, NodeId]>): void {
    this.blocked = new Set([...links].map(([a, b]) => `${a}>${b}`));
    this.epoch++;
  }

  heal(): void {
    this.setBlocked([]);
  }

  blockedLinks(): string[] {
    return [...this.blocked].sort();
  }

  /**
   * The delivery delays (virtual microseconds from now) for one message: [] when it is lost,
   * two values when it is duplicated. A blocked link loses the message.
   */
  fate(msg: Message): number[] {
    if (this.isBlocked(msg.from, msg.to)) return [];
    const c = this.conditions;
    if (c.dropRate > 0 && this.rng.chance(c.dropRate)) return [];
    const first = this.latency();
    if (c.duplicateRate > 0 && this.rng.chance(c.duplicateRate)) return [first, this.latency()];
    return [first];
  }

  private latency(): number {
    const c = this.conditions;
    let d = this.rng.range(c.minLatencyUs, c.maxLatencyUs);
    if (c.spikeRate > 0 && c.spikeMaxUs > 0 && this.rng.chance(c.spikeRate))
      d += this.rng.range(0, c.spikeMaxUs);
    return d;
  }
}

function cloneEntry(e: Entry): Entry {
  return e.type === 'normal'
    ? { type: 'normal', term: e.term, index: e.index, data: e.data }
    : { type: 'conf', term: e.term, index: e.index, change: { ...e.change } };
}

/**
 * A copy of a message as the receiver would decode it off the wire: no object is shared between
 * sender and receiver (payload byte arrays excepted, which nobody mutates), so one node's core
 * can never see another node's later mutations.
 */
export function cloneMessage(msg: Message): Message {
  switch (msg.type) {
    case 'app':
      return { ...msg, entries: msg.entries.map(cloneEntry) };
    case 'snap':
      return {
        ...msg,
        snapshot: {
          data: msg.snapshot.data,
          metadata: {
            ...msg.snapshot.metadata,
            conf: {
              voters: msg.snapshot.metadata.conf.voters.slice(),
              learners: msg.snapshot.metadata.conf.learners.slice(),
            },
          },
        },
      };
    default:
      return { ...msg };
  }
}
