import { pack, unpack } from '../../node/envelope.js';
import type { ApplyContext, StateMachine } from '../../node/state-machine.js';

/**
 * The cluster's identity: a UUID minted once, by the first leader, and replicated like any other state, so that a
 * client can tell one Floe cluster from another (every HTTP answer carries it; the SDK pins it). Without it, a client
 * whose endpoints or balancer reach another cluster is granted a worker ID there that this cluster may have granted
 * to someone else (review of FS-19). `clusterId` (the peer handshake's name) cannot do this: it defaults to `floe`.
 *
 * Command: `{ns: 'cluster', op: 'init', uid}`. The first one applied wins, on every replica (apply is in log order);
 * later ones answer the winner and change nothing. Never re-minted: a snapshot carries it, a restore never drops nor
 * replaces a UUID this replica knows.
 */
export const CLUSTER_NAMESPACE = 'cluster';

/** Lower-case RFC 9562 text form, as `crypto.randomUUID()` writes it. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isClusterUid(v: unknown): v is string {
  return typeof v === 'string' && UUID.test(v);
}

export type ClusterIdentityResult =
  | { ok: true; op: 'init'; uid: string; minted: boolean }
  | { ok: false; code: 'bad_command' | 'invalid_argument'; message: string };

export function encodeClusterInit(uid: string): Uint8Array {
  return pack({ ns: CLUSTER_NAMESPACE, op: 'init', uid });
}

export class ClusterIdentityStateMachine implements StateMachine<ClusterIdentityResult> {
  private current: string | undefined;
  private readonly listeners = new Set<(uid: string) => void>();

  /** The cluster's UUID once the first `init` has been applied here; undefined before. */
  get uid(): string | undefined {
    return this.current;
  }

  /** Called once, when this replica first learns the UUID (apply or restore). */
  onKnown(cb: (uid: string) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  apply(command: Uint8Array, ctx: ApplyContext): ClusterIdentityResult {
    let v: unknown;
    try {
      v = unpack<unknown>(command);
    } catch {
      return { ok: false, code: 'bad_command', message: 'cluster command is not valid msgpack' };
    }
    return this.applyUnpacked(v, ctx);
  }

  applyUnpacked(value: unknown, _ctx: ApplyContext): ClusterIdentityResult {
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      return { ok: false, code: 'bad_command', message: 'cluster command must be a map' };
    const c = value as Record<string, unknown>;
    if (c.op !== 'init')
      return { ok: false, code: 'bad_command', message: `unknown cluster op ${String(c.op)}` };
    if (!isClusterUid(c.uid))
      return { ok: false, code: 'invalid_argument', message: 'uid must be a lower-case UUID' };
    if (this.current !== undefined) return { ok: true, op: 'init', uid: this.current, minted: false };
    this.set(c.uid);
    return { ok: true, op: 'init', uid: c.uid, minted: true };
  }

  snapshot(): Uint8Array {
    return pack({ v: 1, uid: this.current ?? null });
  }

  restore(data: Uint8Array): void {
    const d = unpack<{ v: number; uid: string | null }>(data);
    if (d.v !== 1) throw new Error(`cluster snapshot format ${d.v} is not supported by this Floe version`);
    if (d.uid !== null && !isClusterUid(d.uid)) throw new Error('cluster snapshot holds a malformed uid');
    // Never forgotten, never replaced: a snapshot without it comes from a version without the identity (restores
    // only move forward, so one of this version at or past the `init` holds it), and a different one is not this
    // cluster's (review of the cluster identity, finding 4). Both keep what this replica knows.
    if (d.uid === null || this.current !== undefined) return;
    this.set(d.uid);
  }

  private set(uid: string): void {
    this.current = uid;
    for (const cb of [...this.listeners]) cb(uid);
  }
}
