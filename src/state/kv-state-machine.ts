import { pack, unpack } from '../node/envelope.js';
import type { ApplyContext, StateMachine } from '../node/state-machine.js';

/**
 * A small replicated key-value and counter store: the first application state machine the node
 * runtime carries. Counters are the basis of Floe's sequences (strictly increasing across the
 * cluster); plain values hold small metadata and drive the cluster tests and benchmarks.
 */
export type KvCommand =
  | { op: 'put'; key: string; value: string }
  | { op: 'cas'; key: string; expect: string | null; value: string }
  | { op: 'del'; key: string }
  | { op: 'incr'; key: string; by: string };

export type KvResult =
  | { ok: true; value: string | null; revision: number }
  | { ok: false; error: string; value?: string | null };

/** Largest counter value: int64, as Redis INCR. */
const MAX_COUNTER = (1n << 63n) - 1n;
const MAX_KEY_BYTES = 1024;
const MAX_VALUE_BYTES = 64 * 1024;

export class KvStateMachine implements StateMachine<KvResult> {
  private readonly values = new Map<string, string>();
  private readonly counters = new Map<string, bigint>();
  private revision = 0;

  apply(command: Uint8Array, ctx: ApplyContext): KvResult {
    let cmd: KvCommand;
    try {
      cmd = unpack<KvCommand>(command);
    } catch {
      return { ok: false, error: 'command is not valid msgpack' };
    }
    if (typeof cmd !== 'object' || cmd === null || typeof cmd.key !== 'string') {
      return { ok: false, error: 'command must be an object with a string key' };
    }
    if (Buffer.byteLength(cmd.key) > MAX_KEY_BYTES)
      return { ok: false, error: `key longer than ${MAX_KEY_BYTES} bytes` };
    this.revision = ctx.index;
    switch (cmd.op) {
      case 'put':
        if (typeof cmd.value !== 'string') return { ok: false, error: 'put needs a string value' };
        if (Buffer.byteLength(cmd.value) > MAX_VALUE_BYTES)
          return { ok: false, error: `value longer than ${MAX_VALUE_BYTES} bytes` };
        this.values.set(cmd.key, cmd.value);
        return { ok: true, value: cmd.value, revision: ctx.index };
      case 'cas': {
        const cur = this.values.get(cmd.key) ?? null;
        if (cur !== cmd.expect) return { ok: false, error: 'compare failed', value: cur };
        this.values.set(cmd.key, cmd.value);
        return { ok: true, value: cmd.value, revision: ctx.index };
      }
      case 'del':
        this.values.delete(cmd.key);
        return { ok: true, value: null, revision: ctx.index };
      case 'incr': {
        let by: bigint;
        try {
          by = BigInt(cmd.by);
        } catch {
          return { ok: false, error: 'increment is not an integer' };
        }
        const next = (this.counters.get(cmd.key) ?? 0n) + by;
        if (next > MAX_COUNTER || next < -MAX_COUNTER - 1n)
          return { ok: false, error: 'increment or decrement would overflow' };
        this.counters.set(cmd.key, next);
        return { ok: true, value: next.toString(), revision: ctx.index };
      }
      default:
        return { ok: false, error: `unknown op ${String((cmd as { op: unknown }).op)}` };
    }
  }

  get(key: string): string | null {
    return this.values.get(key) ?? null;
  }

  counter(key: string): string {
    return (this.counters.get(key) ?? 0n).toString();
  }

  snapshot(): Uint8Array {
    return pack({
      v: [...this.values],
      c: [...this.counters].map(([k, n]) => [k, n.toString()]),
      r: this.revision,
    });
  }

  restore(data: Uint8Array): void {
    const s = unpack<{ v: [string, string][]; c: [string, string][]; r: number }>(data);
    this.values.clear();
    this.counters.clear();
    for (const [k, v] of s.v) this.values.set(k, v);
    for (const [k, n] of s.c) this.counters.set(k, BigInt(n));
    this.revision = s.r;
  }
}

export function encodeKvCommand(cmd: KvCommand): Uint8Array {
  return pack(cmd);
}
