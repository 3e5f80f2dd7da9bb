import { pack, unpack } from '../node/envelope.js';
import type { ApplyContext, StateMachine } from '../node/state-machine.js';
import { AUTH_NAMESPACE, AuthStateMachine } from './auth/index.js';
import { CLUSTER_NAMESPACE, ClusterIdentityStateMachine } from './cluster/cluster-identity.js';
import { type KvResult, KvStateMachine } from './kv-state-machine.js';
import { LEASE_NAMESPACE, LeaseStateMachine } from './leases/index.js';
import { SEQUENCE_NAMESPACE, SequenceStateMachine } from './sequences/index.js';
import { SNOWFLAKE_NAMESPACE, SnowflakeKeysStateMachine } from './snowflakes/snowflake-keys.js';

/**
 * Floe's replicated state: one log, several sections. A command's msgpack map names its section
 * with `ns` ('lease', 'auth', 'seq', 'snowflake', 'cluster'); commands without one are key-value/counter commands. Each section
 * snapshots and restores itself; the composite snapshot holds all of them.
 */
export class FloeStateMachine implements StateMachine<unknown> {
  readonly kv = new KvStateMachine();
  readonly leases = new LeaseStateMachine();
  readonly auth = new AuthStateMachine();
  readonly sequences = new SequenceStateMachine();
  readonly snowflakes = new SnowflakeKeysStateMachine();
  /** The cluster's UUID (minted by the first leader; on every HTTP answer). */
  readonly cluster = new ClusterIdentityStateMachine();

  apply(command: Uint8Array, ctx: ApplyContext): unknown {
    let value: unknown;
    try {
      value = unpack<unknown>(command);
    } catch {
      return { ok: false, error: 'command is not valid msgpack' } satisfies KvResult;
    }
    const ns = (value as { ns?: unknown } | null)?.ns;
    if (ns === LEASE_NAMESPACE) return this.leases.applyUnpacked(value, ctx);
    if (ns === AUTH_NAMESPACE) return this.auth.applyUnpacked(value, ctx);
    if (ns === SEQUENCE_NAMESPACE) return this.sequences.applyUnpacked(value, ctx);
    if (ns === SNOWFLAKE_NAMESPACE) return this.snowflakes.applyUnpacked(value, ctx);
    if (ns === CLUSTER_NAMESPACE) return this.cluster.applyUnpacked(value, ctx);
    return this.kv.apply(command, ctx);
  }

  snapshot(): Uint8Array {
    // The cluster's UUID rides along once minted (a field older versions ignore; absent, the bytes are as before).
    const uid = this.cluster.uid;
    const base = {
      kv: this.kv.snapshot(),
      leases: this.leases.snapshot(),
      auth: this.auth.snapshot(),
      ...(uid === undefined ? {} : { cluster: this.cluster.snapshot() }),
    };
    // Without sequences the snapshot stays version 1, byte for byte (older nodes read it; seeds replay).
    const noSeqs = this.sequences.size === 0 && !this.sequences.hasTombstones;
    if (noSeqs && this.snowflakes.size === 0) return pack({ v: 1, ...base });
    return pack({
      v: 2,
      ...base,
      ...(noSeqs ? {} : { seqs: this.sequences.snapshot() }),
      ...(this.snowflakes.size === 0 ? {} : { snow: this.snowflakes.snapshot() }),
    });
  }

  restore(data: Uint8Array): void {
    // Version 2 added sequences and snowflake keys; a version-1 snapshot (before them) restores with none.
    const s = unpack<{
      v: number;
      kv: Uint8Array;
      leases: Uint8Array;
      auth: Uint8Array;
      seqs?: Uint8Array;
      snow?: Uint8Array;
      cluster?: Uint8Array;
    }>(data);
    if (s.v !== 1 && s.v !== 2)
      throw new Error(`snapshot format ${s.v} is not supported by this Floe version`);
    this.kv.restore(s.kv);
    this.leases.restore(s.leases);
    this.auth.restore(s.auth);
    if (s.seqs) this.sequences.restore(s.seqs);
    else this.sequences.restore(new SequenceStateMachine().snapshot());
    this.snowflakes.restore(s.snow ?? new SnowflakeKeysStateMachine().snapshot());
    this.cluster.restore(s.cluster ?? new ClusterIdentityStateMachine().snapshot());
  }
}
