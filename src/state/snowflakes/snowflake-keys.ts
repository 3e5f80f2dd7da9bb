import { PRESET_NAMES } from '../../id/index.js';
import { pack, unpack } from '../../node/envelope.js';
import type { ApplyContext, StateMachine } from '../../node/state-machine.js';
import { checkKey } from '../sequences/codec.js';

/**
 * Server-side Snowflake keys (issue 11, March's "timestamp type"): which layout a key's IDs use and
 * the TTL of the worker-ID leases nodes take for it. The key is also the lease app whose pool the
 * nodes lease their worker IDs from (its size follows the layout).
 *
 * Commands: `{ns: 'snowflake', op: 'create', key, layout, ttlMs}` (a repeat with the same settings
 * answers `created: false`; other settings are refused with `exists`) and `{op: 'delete', key}`.
 */
export const SNOWFLAKE_NAMESPACE = 'snowflake';
export const MIN_SNOWFLAKE_TTL_MS = 1_000;
export const MAX_SNOWFLAKE_TTL_MS = 3_600_000;
export const DEFAULT_SNOWFLAKE_TTL_MS = 10_000;

export interface SnowflakeKeyInfo {
  key: string;
  layout: string;
  ttlMs: number;
}

export type SnowflakeKeyCommand =
  | { op: 'create'; key: string; layout: string; ttlMs: number }
  | { op: 'delete'; key: string };

export type SnowflakeKeyResult =
  | { ok: true; op: 'create'; key: string; created: boolean; info: SnowflakeKeyInfo }
  | { ok: true; op: 'delete'; key: string }
  | { ok: false; code: 'bad_command' | 'invalid_argument' | 'not_found' | 'exists'; message: string };

export function encodeSnowflakeKeyCommand(cmd: SnowflakeKeyCommand): Uint8Array {
  return pack({ ns: SNOWFLAKE_NAMESPACE, ...cmd });
}

/** Checks a command completely (servers run it before proposing, apply runs it again). */
export function parseSnowflakeKeyCommand(
  v: unknown,
): SnowflakeKeyCommand | Extract<SnowflakeKeyResult, { ok: false }> {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return { ok: false, code: 'bad_command', message: 'snowflake command must be a map' };
  const c = v as Record<string, unknown>;
  const keyProblem = checkKey(c.key);
  if (keyProblem) return { ok: false, code: 'invalid_argument', message: keyProblem };
  const key = c.key as string;
  if (c.op === 'delete') return { op: 'delete', key };
  if (c.op !== 'create')
    return { ok: false, code: 'bad_command', message: `unknown snowflake op ${String(c.op)}` };
  if (typeof c.layout !== 'string' || !(PRESET_NAMES as readonly string[]).includes(c.layout))
    return {
      ok: false,
      code: 'invalid_argument',
      message: `layout must be one of ${PRESET_NAMES.join(', ')}, got ${JSON.stringify(String(c.layout)).slice(0, 40)}`,
    };
  if (
    typeof c.ttlMs !== 'number' ||
    !Number.isSafeInteger(c.ttlMs) ||
    c.ttlMs < MIN_SNOWFLAKE_TTL_MS ||
    c.ttlMs > MAX_SNOWFLAKE_TTL_MS
  )
    return {
      ok: false,
      code: 'invalid_argument',
      message: `ttlMs must be an integer in [${MIN_SNOWFLAKE_TTL_MS}, ${MAX_SNOWFLAKE_TTL_MS}]`,
    };
  return { op: 'create', key, layout: c.layout, ttlMs: c.ttlMs };
}

/** The replicated snowflake-key table. Deterministic; `apply` never throws. */
export class SnowflakeKeysStateMachine implements StateMachine<SnowflakeKeyResult> {
  private readonly keys = new Map<string, SnowflakeKeyInfo>();

  apply(command: Uint8Array, ctx: ApplyContext): SnowflakeKeyResult {
    let v: unknown;
    try {
      v = unpack<unknown>(command);
    } catch {
      return { ok: false, code: 'bad_command', message: 'snowflake command is not valid msgpack' };
    }
    return this.applyUnpacked(v, ctx);
  }

  applyUnpacked(value: unknown, _ctx: ApplyContext): SnowflakeKeyResult {
    const cmd = parseSnowflakeKeyCommand(value);
    if ('ok' in cmd) return cmd;
    if (cmd.op === 'delete') {
      if (!this.keys.delete(cmd.key))
        return { ok: false, code: 'not_found', message: `no snowflake key ${JSON.stringify(cmd.key)}` };
      return { ok: true, op: 'delete', key: cmd.key };
    }
    const info: SnowflakeKeyInfo = { key: cmd.key, layout: cmd.layout, ttlMs: cmd.ttlMs };
    const existing = this.keys.get(cmd.key);
    if (existing) {
      if (existing.layout === info.layout && existing.ttlMs === info.ttlMs)
        return { ok: true, op: 'create', key: cmd.key, created: false, info: existing };
      return {
        ok: false,
        code: 'exists',
        message: `snowflake key ${JSON.stringify(cmd.key)} exists with another layout or TTL`,
      };
    }
    this.keys.set(cmd.key, info);
    return { ok: true, op: 'create', key: cmd.key, created: true, info };
  }

  get(key: string): SnowflakeKeyInfo | undefined {
    return this.keys.get(key);
  }

  list(): SnowflakeKeyInfo[] {
    return [...this.keys.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  get size(): number {
    return this.keys.size;
  }

  snapshot(): Uint8Array {
    return pack({ v: 1, keys: [...this.keys.values()].map((k) => [k.key, k.layout, k.ttlMs]) });
  }

  restore(data: Uint8Array): void {
    const d = unpack<{ v: number; keys: [string, string, number][] }>(data);
    if (d.v !== 1)
      throw new Error(`snowflake-key snapshot format ${d.v} is not supported by this Floe version`);
    this.keys.clear();
    for (const [key, layout, ttlMs] of d.keys) this.keys.set(key, { key, layout, ttlMs });
  }
}
