import { pack, unpack } from '../node/envelope.js';
import type { ApplyContext, StateMachine } from '../node/state-machine.js';
import { AUTH_NAMESPACE, AuthStateMachine } from './auth/index.js';
import { type KvResult, KvStateMachine } from './kv-state-machine.js';
import { LEASE_NAMESPACE, LeaseStateMachine } from './leases/index.js';

/**
 * Floe's replicated state: one log, several sections. A command's msgpack map names its section
 * with `ns` ('lease', 'auth'); commands without one are key-value/counter commands. Each section
 * snapshots and restores itself; the composite snapshot holds all of them.
 */
export class FloeStateMachine implements StateMachine<unknown> {
  readonly kv = new KvStateMachine();
  readonly leases = new LeaseStateMachine();
  readonly auth = new AuthStateMachine();

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
    return this.kv.apply(command, ctx);
  }

  snapshot(): Uint8Array {
    return pack({ v: 1, kv: this.kv.snapshot(), leases: this.leases.snapshot(), auth: this.auth.snapshot() });
  }

  restore(data: Uint8Array): void {
    const s = unpack<{ v: number; kv: Uint8Array; leases: Uint8Array; auth: Uint8Array }>(data);
    if (s.v !== 1) throw new Error(`snapshot format ${s.v} is not supported by this Floe version`);
    this.kv.restore(s.kv);
    this.leases.restore(s.leases);
    this.auth.restore(s.auth);
  }
}
