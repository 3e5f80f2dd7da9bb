/**
 * `npm run bench:auth-flood`: authorised writes under a flood of wrong passwords (issue 15 item 1), one run.
 *
 * A 3-node Floe cluster (dist/) with auth on. One authenticated client holds a lease and renews it
 * with a raised bound (a logged write through the Raft log and the WAL's fsync) in a loop; its
 * latency is measured for `--seconds` without a flood, then while `--rate` wrong-password requests
 * per second hit the same node (half for an existing user, half for unknown users). Prints p50/p99
 * of both phases, the ratio (target: p99 under the flood <= 2x unflooded), how the flood was answered
 * (401 / 429) and whether the lease survived.
 */
import { Agent, request } from 'node:http';
import { Cluster, http, waitForLeader } from '../test/cluster/harness.js';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? def : Number(process.argv[i + 1]);
}
const SECONDS = arg('seconds', 8);
const RATE = arg('rate', 1000);
const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;
const ROOT = basic('root', 'root-password-1');

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}

async function post(
  addr: string,
  path: string,
  body: unknown,
  auth: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://${addr}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: auth },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json().catch(() => ({}))) as Record<string, unknown> };
}

async function main(): Promise<void> {
  const cluster = await Cluster.create({ size: 3 });
  cluster.startAll();
  try {
    const leader = await waitForLeader(cluster);
    const addr = cluster.node(leader).http;
    const made = await http(addr, 'POST', '/v1/users', {
      user: 'root',
      password: 'root-password-1',
      grants: { '*': ['admin'] },
    });
    if (made.status !== 200)
      throw new Error(`user setup failed: ${made.status} ${JSON.stringify(made.body)}`);
    const lease = await post(
      addr,
      '/v1/apps/flood/workers/acquire',
      { nodeId: 'writer', ttlMs: 10_000 },
      ROOT,
    );
    if (lease.status !== 200) throw new Error(`acquire failed: ${JSON.stringify(lease.body)}`);
    const { workerId, token } = lease.body as { workerId: number; token: number };
    let bound = Date.now();
    let lost = false;
    const writes = async (ms: number): Promise<number[]> => {
      const lat: number[] = [];
      const end = performance.now() + ms;
      while (performance.now() < end) {
        bound += 10;
        const t = performance.now();
        const r = await post(
          addr,
          `/v1/apps/flood/workers/${workerId}/renew`,
          { token, boundMs: Math.max(bound, Date.now() + 1000) },
          ROOT,
        );
        lat.push(performance.now() - t);
        if (r.status !== 200) {
          lost = true;
          console.error(`renew answered ${r.status} ${JSON.stringify(r.body)}`);
          break;
        }
      }
      return lat;
    };

    const calm = await writes(SECONDS * 1000);
    const answers: Record<string, number> = {};
    let stop = false;
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    const flood = (async () => {
      let n = 0;
      const t0 = performance.now();
      while (!stop) {
        const due = Math.floor(((performance.now() - t0) / 1000) * RATE);
        for (; n < due; n++) {
          const user = n % 2 === 0 ? 'root' : `nobody-${n}`;
          const req = request(
            `http://${addr}/v1/apps/flood/workers`,
            { agent, headers: { authorization: basic(user, `wrong-${n}`) } },
            (res) => {
              answers[res.statusCode ?? 0] = (answers[res.statusCode ?? 0] ?? 0) + 1;
              res.resume();
            },
          );
          req.on('error', () => {
            answers.error = (answers.error ?? 0) + 1;
          });
          req.end();
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const flooded = await writes(SECONDS * 1000);
    stop = true;
    await flood;
    agent.destroy();

    const row = (name: string, xs: number[]) =>
      console.log(
        `${name.padEnd(26)} n=${String(xs.length).padStart(5)}  p50 ${pct(xs, 50).toFixed(2)} ms  p99 ${pct(xs, 99).toFixed(2)} ms`,
      );
    console.log(
      `bench:auth-flood, 3 nodes, logged lease renewals with a correct password, ${SECONDS} s per phase\n`,
    );
    row('without a flood', calm);
    row(`under ${RATE} wrong/s`, flooded);
    console.log(
      `\np99 ratio ${(pct(flooded, 99) / pct(calm, 99)).toFixed(2)}x (target <= 2x); flood answers ${JSON.stringify(answers)}; lease ${lost ? 'LOST' : 'kept'}`,
    );
    if (lost) process.exitCode = 1;
  } finally {
    await cluster.stopAll();
    cluster.cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
