// DELETE /v1/members/:id and the strict reconfiguration check: the node's refusal is a 409
// `unsafe_removal` naming the voters that would remain, and `?force=true` asks it to skip the check.
// The check itself is tested on a real three-node cluster in src/node/strict-reconf.test.ts; here the
// node's removeMember is replaced to see what the route asks of it. Built with buildHttpAdmin and
// driven with inject() (no port).
import { afterEach, describe, expect, it } from 'vitest';
import { UnsafeRemovalError } from '../../node/errors.js';
import type { RemoveMemberOptions } from '../../node/node.js';
import { buildHttpAdmin } from '../http-admin.js';
import { singleNodeWithApp } from '../test-node.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

async function app() {
  const asked: [number, RemoveMemberOptions | undefined][] = [];
  const s = await singleNodeWithApp(({ node, state, leases }) => {
    node.removeMember = async (id, options) => {
      asked.push([id, options]);
      if (!options?.force) throw new UnsafeRemovalError(id, [1, 3], [1], 2);
    };
    return buildHttpAdmin({
      node,
      kv: state.kv,
      services: { node, leases, auth: state.auth },
      defaultMetrics: false,
      dashboard: false,
    });
  });
  const a = s.app;
  stop = s.stop;
  const del = async (url: string) => {
    const res = await a.inject({ method: 'DELETE', url });
    return { status: res.statusCode, body: res.json() as Record<string, unknown> };
  };
  return { del, asked };
}

describe('DELETE /v1/members/:id (strict reconfiguration check)', () => {
  it('answers 409 unsafe_removal with the remaining voters, the active ones and the quorum', async () => {
    const { del, asked } = await app();
    const r = await del('/v1/members/2');
    expect(asked).toEqual([[2, { force: false }]]);
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ error: 'unsafe_removal', remaining: [1, 3], active: [1], quorum: 2 });
    expect(r.body.message).toMatch(
      /^removing voter 2 would leave voters \[1, 3\], of which 1 is known active/,
    );
    expect(r.body.message).toMatch(/\?force=true/);
  });

  it('?force=true asks the node to skip the check; ?force=false does not', async () => {
    const { del, asked } = await app();
    expect((await del('/v1/members/2?force=true')).status).toBe(200);
    expect((await del('/v1/members/2?force=false')).status).toBe(409);
    expect(asked).toEqual([
      [2, { force: true }],
      [2, { force: false }],
    ]);
  });

  it('refuses a force that is not true or false, asking nothing of the node', async () => {
    const { del, asked } = await app();
    const r = await del('/v1/members/2?force=yes');
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'bad_request', message: 'force must be true or false' });
    expect(asked).toEqual([]);
  });
});
