import type { NodeId } from '../raft/types.js';
import { pack, unpack } from './envelope.js';

export interface MemberInfo {
  id: NodeId;
  /** Raft peer traffic. */
  peerAddr: string;
  /** Client-facing listeners, published by the member itself once it leads (or given when added). */
  httpAddr?: string;
  respAddr?: string;
}

export type SysCommand = { op: 'publish'; id: NodeId; httpAddr?: string; respAddr?: string };

/** Addresses of members, replicated with the log so every node can point clients at the leader. */
export class MemberDirectory {
  private readonly members = new Map<NodeId, MemberInfo>();

  constructor(initial: Iterable<MemberInfo> = []) {
    for (const m of initial) this.members.set(m.id, { ...m });
  }

  get(id: NodeId): MemberInfo | undefined {
    return this.members.get(id);
  }

  all(): MemberInfo[] {
    return [...this.members.values()].sort((a, b) => a.id - b.id);
  }

  upsert(info: MemberInfo): void {
    const prev = this.members.get(info.id);
    this.members.set(info.id, { ...prev, ...info });
  }

  remove(id: NodeId): void {
    this.members.delete(id);
  }

  applySys(cmd: SysCommand): void {
    if (cmd.op === 'publish') {
      const prev = this.members.get(cmd.id);
      if (!prev) return; // published by a member that has since been removed
      this.members.set(cmd.id, { ...prev, httpAddr: cmd.httpAddr, respAddr: cmd.respAddr });
    }
  }

  encode(): Uint8Array {
    return pack(this.all());
  }

  static decode(data: Uint8Array): MemberDirectory {
    return new MemberDirectory(unpack<MemberInfo[]>(data));
  }
}

/** What a conf change carries in its opaque context: the new member's addresses. */
export function encodeMemberContext(info: Omit<MemberInfo, 'id'>): Uint8Array {
  return pack(info);
}

export function decodeMemberContext(data: Uint8Array | undefined): Omit<MemberInfo, 'id'> | undefined {
  if (!data || data.length === 0) return undefined;
  return unpack<Omit<MemberInfo, 'id'>>(data);
}
