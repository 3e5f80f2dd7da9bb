// `floe cluster remove`: the strict reconfiguration check's refusal (409 unsafe_removal) is explained,
// and `--force` asks the node to skip it. Against a stub HTTP server on 127.0.0.1 (what the node
// answers is tested in src/server/http/cluster-remove.test.ts).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { runCaptured } from './run-captured.js';

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

const view = {
  id: 1,
  cluster: null,
  role: 'leader',
  leader: 1,
  term: 2,
  commit: 9,
  applied: 9,
  members: [{ id: 1, peerAddr: '127.0.0.1:7001', httpAddr: null, role: 'leader', match: 9 }],
};

/** A node that refuses the removal unless forced; records what it was asked. */
async function stubNode(asked: string[]): Promise<string> {
  server = createServer((req, res) => {
    asked.push(`${req.method} ${req.url}`);
    res.setHeader('content-type', 'application/json');
    if (req.url?.endsWith('?force=true')) return res.end(JSON.stringify(view));
    res.statusCode = 409;
    res.end(
      JSON.stringify({
        error: 'unsafe_removal',
        message: 'removing voter 2 would leave voters [1, 3], of which 1 is known active',
        remaining: [1, 3],
        active: [1],
        quorum: 2,
      }),
    );
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  return `127.0.0.1:${(server!.address() as AddressInfo).port}`;
}

const run = (...argv: string[]) => runCaptured(argv);

describe('floe cluster remove', () => {
  it('reports a refused unsafe removal with how to force it, exit 1', async () => {
    const asked: string[] = [];
    const endpoint = await stubNode(asked);
    const r = await run('cluster', 'remove', '2', '--endpoint', endpoint);
    expect(asked).toEqual(['DELETE /v1/members/2']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/failed \(409\): removing voter 2 would leave voters \[1, 3\]/);
    expect(r.stderr).toMatch(
      /to remove it anyway: floe cluster remove 2 --force --endpoint 127\.0\.0\.1:\d+\n$/,
    );
  });

  it('--force asks the node to skip the check', async () => {
    const asked: string[] = [];
    const endpoint = await stubNode(asked);
    const r = await run('cluster', 'remove', '2', '--force', '--endpoint', endpoint, '--json');
    expect(asked).toEqual(['DELETE /v1/members/2?force=true']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ id: 1, leader: 1 });
  });
});

describe('floe cluster remove: review probes', () => {
  it('the --force hint of a refusal names the --endpoint it was refused on (not the default endpoint)', async () => {
    // Copying the hint as printed must act on the same cluster: without --endpoint it would go to 127.0.0.1:7380,
    // which may be another cluster's member (or none).
    const asked: string[] = [];
    const endpoint = await stubNode(asked);
    const r = await run('cluster', 'remove', '2', '--endpoint', endpoint);
    expect(r.code).toBe(1);
    const hint = r.stderr.slice(r.stderr.indexOf('to remove it anyway:'));
    expect(hint).toMatch(/floe cluster remove 2 /);
    expect(hint).toContain('--force');
    expect(hint).toContain(`--endpoint ${endpoint}`);
  });
});

// ---- adversarial review of FS-22 (rev-fs22) -------------------------------------------------------

describe('floe cluster remove <leader>: the 307 to the new leader, with credentials (review of FS-22)', () => {
  const others: Server[] = [];
  afterEach(async () => {
    await Promise.all(others.splice(0).map((s) => new Promise<void>((r) => s.close(() => r()))));
  });

  /** A node with auth on: 401 without `Authorization: Basic admin:pw`; otherwise `answer`. */
  async function authNode(
    asked: string[],
    answer: (res: import('node:http').ServerResponse) => void,
  ): Promise<string> {
    const s = createServer((req, res) => {
      asked.push(`${req.method} ${req.url} ${req.headers.authorization ?? '-'}`);
      res.setHeader('content-type', 'application/json');
      if (req.headers.authorization !== `Basic ${Buffer.from('admin:pw').toString('base64')}`) {
        res.statusCode = 401;
        return res.end(JSON.stringify({ error: 'unauthorized', message: 'authentication required' }));
      }
      answer(res);
    });
    others.push(s);
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
    return `127.0.0.1:${(s.address() as AddressInfo).port}`;
  }

  it('the old leader hands over and answers 307: the CLI sends $FLOE_USER/$FLOE_PASSWORD to both and prints the new leader’s view', async () => {
    const asked: string[] = [];
    const newLeader = await authNode(asked, (res) =>
      res.end(JSON.stringify({ ...view, id: 2, leader: 2, members: [{ ...view.members[0], id: 2 }] })),
    );
    const oldLeader = await authNode(asked, (res) => {
      res.statusCode = 307;
      res.setHeader('location', `http://${newLeader}/v1/members/1`);
      res.end(
        JSON.stringify({
          error: 'not_leader',
          message: 'not the leader',
          leader: { id: 2, httpAddr: newLeader },
        }),
      );
    });
    const r = await runCaptured(['cluster', 'remove', '1', '--endpoint', oldLeader], {
      FLOE_USER: 'admin',
      FLOE_PASSWORD: 'pw',
    });
    const auth = `Basic ${Buffer.from('admin:pw').toString('base64')}`;
    expect(asked).toEqual([`DELETE /v1/members/1 ${auth}`, `DELETE /v1/members/1 ${auth}`]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^leader 2 /);
  });
});

// ---- 503 not_leader without an address (noticed in stop 31's review of FS-22) ---------------------------------

describe('floe cluster remove <leader>: the old leader does not know the new leader’s address yet', () => {
  /** Answers 503 not_leader (no redirect to give) to the first `busy` requests, then the view. */
  async function handingOver(asked: string[], busy: number): Promise<string> {
    server = createServer((req, res) => {
      asked.push(`${req.method} ${req.url}`);
      res.setHeader('content-type', 'application/json');
      if (asked.length <= busy) {
        res.statusCode = 503;
        return res.end(
          JSON.stringify({ error: 'not_leader', message: 'node 1 is not the leader', leader: { id: 2 } }),
        );
      }
      res.end(JSON.stringify({ ...view, id: 1, leader: 2 }));
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    return `127.0.0.1:${(server!.address() as AddressInfo).port}`;
  }

  it('asks again after 503 not_leader until the node can answer, and succeeds', async () => {
    const asked: string[] = [];
    const endpoint = await handingOver(asked, 2);
    const r = await run('cluster', 'remove', '1', '--endpoint', endpoint);
    expect(asked).toEqual(['DELETE /v1/members/1', 'DELETE /v1/members/1', 'DELETE /v1/members/1']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^leader 2 /);
  });

  it('gives up after about 3 s of 503 not_leader, with the node’s message', async () => {
    const asked: string[] = [];
    const endpoint = await handingOver(asked, 1_000);
    const r = await run('cluster', 'remove', '1', '--endpoint', endpoint);
    expect(asked).toHaveLength(6); // the first ask and five more
    expect(r.code).toBe(2); // the node's error, as for any other refusal
    expect(r.stderr).toMatch(/failed \(503\): node 1 is not the leader/);
  });

  it('does not ask again after another 503 (nothing says that asking again helps)', async () => {
    const asked: string[] = [];
    server = createServer((req, res) => {
      asked.push(`${req.method} ${req.url}`);
      res.statusCode = 503;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ error: 'not_committed', message: 'the transfer did not finish' }));
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    const r = await run(
      'cluster',
      'remove',
      '1',
      '--endpoint',
      `127.0.0.1:${(server!.address() as AddressInfo).port}`,
    );
    expect(asked).toHaveLength(1);
    expect(r.code).toBe(2); // the node's error, as for any other refusal
  });
});
