/**
 * Issue 15 item 4: bad input that used to be accepted. A non-object JSON body (`[{"by":1}]`,
 * `null`, a number, a string) answers 400 invalid_body and proposes nothing; an empty path key
 * answers 400 naming the parameter.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { startHttpAdmin } from './http-admin.js';
import { memorySingleNode } from './test-node.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

async function singleNode(): Promise<{ base: string; lastIndex: () => number }> {
  const { node, state } = memorySingleNode();
  const app = await startHttpAdmin({ node, kv: state.kv, host: '127.0.0.1', port: 0 });
  node.start();
  await node.waitForLeader();
  stop = async () => {
    await node.stop('test over');
    await app.close();
  };
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return { base: `http://127.0.0.1:${addr.port}`, lastIndex: () => node.status().lastIndex };
}

async function send(base: string, method: string, path: string, raw?: string) {
  const res = await fetch(base + path, {
    method,
    headers: raw === undefined ? {} : { 'content-type': 'application/json' },
    body: raw,
  });
  return {
    status: res.status,
    body: (await res.json()) as { error?: string; message?: string; value?: string },
  };
}

describe('HTTP bad input (issue 15 item 4)', () => {
  it('INCR with a body that is not a JSON object answers 400 and adds nothing', async () => {
    const { base, lastIndex } = await singleNode();
    expect((await send(base, 'POST', '/v1/counters/c/incr', '{"by":2}')).status).toBe(200);
    const before = lastIndex();
    for (const [raw, kind] of [
      ['[{"by":1}]', 'an array'],
      ['null', 'null'],
      ['7', 'number'],
      ['"x"', 'string'],
      ['true', 'boolean'],
    ] as const) {
      const r = await send(base, 'POST', '/v1/counters/c/incr', raw);
      expect(r.status, raw).toBe(400);
      expect(r.body).toEqual({
        error: 'invalid_body',
        message: `request body must be a JSON object, got ${kind}`,
      });
    }
    expect(lastIndex()).toBe(before);
    expect((await send(base, 'GET', '/v1/counters/c')).body.value).toBe('2');
    // No body at all still means the default step.
    expect((await send(base, 'POST', '/v1/counters/c/incr')).status).toBe(200);
  });

  it('INCR by a number outside int64 answers 400 and proposes nothing', async () => {
    const { base, lastIndex } = await singleNode();
    const before = lastIndex();
    for (const by of ['9999999999999999999', '-9999999999999999999', '9223372036854775808']) {
      const r = await send(base, 'POST', '/v1/counters/c/incr', JSON.stringify({ by }));
      expect(r.status, by).toBe(400);
      expect(r.body.message).toBe('by must be an integer in [-2^63, 2^63-1]');
    }
    expect(lastIndex()).toBe(before);
    expect((await send(base, 'POST', '/v1/counters/c/incr', '{"by":"9223372036854775807"}')).status).toBe(
      200,
    );
  });

  it('an empty key on GET and write routes answers 400 naming the parameter', async () => {
    const { base, lastIndex } = await singleNode();
    const before = lastIndex();
    for (const [method, path, raw] of [
      ['GET', '/v1/kv/', undefined],
      ['GET', '/v1/counters/', undefined],
      ['PUT', '/v1/kv/', '{"value":"v"}'],
      ['POST', '/v1/counters//incr', '{}'],
    ] as const) {
      const r = await send(base, method, path, raw);
      expect(r.status, `${method} ${path}`).toBe(400);
      expect(r.body).toEqual({ error: 'invalid_argument', message: 'path parameter key must not be empty' });
    }
    expect(lastIndex()).toBe(before);
  });
});
