import type { NodeId } from '../raft/types.js';
import { pack, unpack } from './envelope.js';

export interface MemberInfo {
  id: NodeId;
  /** Raft peer traffic. */
  peerAddr: string;
  /** Client-facing listeners, published by the member itself once it leads (or given when added). */
  httpAddr?: string;
  respAddr?: string;
  /**
   * The log index of the conf entry that made `id` a member (an add of a non-member; a promotion or
   * demotion keeps it). Absent when not known: the configured initial members, and members restored
   * from a snapshot written before Floe recorded it.
   */
  since?: number;
}

/** A removed member: a node ID is never given to another machine (FS-24), so the directory keeps it. */
export interface RemovedMember {
  id: NodeId;
  /** The log index of the committed removal. */
  removedAt: number;
}

export type SysCommand = { op: 'publish'; id: NodeId; httpAddr?: string; respAddr?: string };

/**
 * Addresses of members, replicated with the log so every node can point clients at the leader, and
 * the IDs removed from the cluster (tombstones), so that a removed ID is never added again.
 */
export class MemberDirectory {
  private readonly members = new Map<NodeId, MemberInfo>();
  private readonly removed = new Map<NodeId, number>();

  constructor(initial: Iterable<MemberInfo> = [], removed: Iterable<RemovedMember> = []) {
    for (const m of initial) this.members.set(m.id, { ...m });
    for (const r of removed) this.removed.set(r.id, r.removedAt);
  }

  get(id: NodeId): MemberInfo | undefined {
    return this.members.get(id);
  }

  all(): MemberInfo[] {
    return [...this.members.values()].sort((a, b) => a.id - b.id);
  }

  /**
   * Records the member that the conf entry at `index` adds, promotes or demotes. Its generation
   * (`since`) is `index` when it was not a member before, and is kept otherwise. `joins` says whether
   * it was a member (the caller knows from the configuration); by default, whether the directory
   * had it. A joiner's own directory has itself from its configuration before it applies its add.
   */
  upsert(info: MemberInfo, index?: number, joins?: boolean): void {
    const prev = this.members.get(info.id);
    const since = (joins ?? prev === undefined) ? index : prev?.since;
    const next: MemberInfo = { ...prev, ...info };
    if (since === undefined) delete next.since;
    else next.since = since;
    this.members.set(info.id, next);
  }

  /** The conf entry at `index` removed `id`: it leaves the directory and is remembered as removed. */
  remove(id: NodeId, index: number): void {
    this.members.delete(id);
    const prev = this.removed.get(id);
    if (prev === undefined || index > prev) this.removed.set(id, index);
  }

  /** The index of the latest committed removal of `id` this directory knows of; undefined if none. */
  removedAt(id: NodeId): number | undefined {
    return this.removed.get(id);
  }

  /** Every removed ID, by ID. */
  allRemoved(): RemovedMember[] {
    return [...this.removed.entries()]
      .map(([id, removedAt]) => ({ id, removedAt }))
      .sort((a, b) => a.id - b.id);
  }

  applySys(cmd: SysCommand): void {
    if (cmd.op === 'publish') {
      const prev = this.members.get(cmd.id);
      if (!prev) return; // published by a member that has since been removed
      this.members.set(cmd.id, { ...prev, httpAddr: cmd.httpAddr, respAddr: cmd.respAddr });
    }
  }

  /**
   * The members, in the format every Floe version reads. The tombstones go separately
   * (`encodeRemoved`), as a trailing element of the snapshot that older versions ignore.
   */
  encode(): Uint8Array {
    return pack(this.all());
  }

  encodeRemoved(): Uint8Array {
    return pack(this.allRemoved().map((r) => [r.id, r.removedAt]));
  }

  /** `removed` is absent in snapshots written before the tombstones (and by older versions). */
  static decode(data: Uint8Array, removed?: Uint8Array): MemberDirectory {
    const tombstones = removed
      ? unpack<[NodeId, number][]>(removed).map(([id, removedAt]) => ({ id, removedAt }))
      : [];
    return new MemberDirectory(unpack<MemberInfo[]>(data), tombstones);
  }
}

/** What a conf change carries in its opaque context: the new member's addresses. */
export function encodeMemberContext(info: Omit<MemberInfo, 'id'>): Uint8Array {
  const { since: _since, ...addresses } = info as MemberInfo;
  return pack(addresses);
}

export function decodeMemberContext(data: Uint8Array | undefined): Omit<MemberInfo, 'id'> | undefined {
  if (!data || data.length === 0) return undefined;
  const { since: _since, ...addresses } = unpack<Omit<MemberInfo, 'id'>>(data);
  return addresses;
}
