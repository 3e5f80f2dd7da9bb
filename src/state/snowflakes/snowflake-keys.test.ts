import { describe, expect, it } from 'vitest';
import { encodeSnowflakeKeyCommand, SnowflakeKeysStateMachine } from './snowflake-keys.js';

const ctx = { index: 1, term: 1, leaderTimeMs: 0 };

describe('SnowflakeKeysStateMachine', () => {
  it('creates keys with a preset layout and TTL; a repeat is harmless, other settings are refused', () => {
    const sm = new SnowflakeKeysStateMachine();
    const create = (layout: string, ttlMs = 10_000) =>
      sm.apply(encodeSnowflakeKeyCommand({ op: 'create', key: 'ids', layout, ttlMs }), ctx);
    expect(create('twitter')).toMatchObject({
      ok: true,
      created: true,
      info: { layout: 'twitter', ttlMs: 10_000 },
    });
    expect(create('twitter')).toMatchObject({ ok: true, created: false });
    expect(create('floe')).toMatchObject({ ok: false, code: 'exists' });
    expect(create('nope' as string)).toMatchObject({
      ok: false,
      code: 'invalid_argument',
      message: /layout must be one of/,
    });
    expect(
      sm.apply(encodeSnowflakeKeyCommand({ op: 'create', key: 'x', layout: 'floe', ttlMs: 5 }), ctx),
    ).toMatchObject({
      code: 'invalid_argument',
      message: /ttlMs must be an integer in \[1000, 3600000\]/,
    });
    const copy = new SnowflakeKeysStateMachine();
    copy.restore(sm.snapshot());
    expect(copy.list()).toEqual([{ key: 'ids', layout: 'twitter', ttlMs: 10_000 }]);
    expect(sm.apply(encodeSnowflakeKeyCommand({ op: 'delete', key: 'ids' }), ctx)).toMatchObject({
      ok: true,
    });
    expect(sm.apply(encodeSnowflakeKeyCommand({ op: 'delete', key: 'ids' }), ctx)).toMatchObject({
      code: 'not_found',
    });
  });
});
