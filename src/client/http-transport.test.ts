import { describe, expect, it } from 'vitest';
import { FloeUnavailableError } from './errors.js';
import {
  type FetchLike,
  type FetchResponseLike,
  HttpTransport,
  MAX_LEARNED_ENDPOINTS,
} from './http-transport.js';

function reply(status: number, body: unknown): FetchResponseLike {
  return { status, headers: { get: () => null }, text: async () => JSON.stringify(body) };
}

/** A transport on virtual time (each sleep moves it; every answer comes at once) and the given cluster. */
function transportOf(endpoints: string[], answer: (host: string) => FetchResponseLike) {
  let now = 0;
  const hosts: string[] = [];
  const fetch: FetchLike = async (url) => {
    const host = new URL(url).host;
    hosts.push(host);
    return answer(host);
  };
  const t = new HttpTransport({
    endpoints,
    requestTimeoutMs: 2000,
    fetch,
    monotonic: () => now,
    wall: () => 1_780_000_000_000 + now,
    sleep: async (ms) => {
      now += ms;
    },
    random: () => 0.5,
  });
  return { t, hosts };
}

const gone = (host: string): never => {
  throw new TypeError(`fetch failed: connect ECONNREFUSED ${host}`);
};
const granted = reply(200, { ok: true });
const noLeader = (members?: { id: number; httpAddr: string }[]) =>
  reply(503, {
    error: 'not_leader',
    message: 'node 9 is not the leader and no leader is known (election in progress?)',
    ...(members ? { members } : {}),
  });

// Regression (FS-19, full-stack simulator, swarm seed 1015218): every member a client was configured with had been
// replaced; its one way in was a load balancer in front of every running process, most of them started to join and
// never added, answering 503 not_leader. The client never tried the members those answers (or a follower's redirect)
// named, and got no ID for 30 s after the faults ended.
describe('HttpTransport: a client whose configured members were all replaced (FS-19)', () => {
  it('finds the leader through the members a non-member lists in its 503 not_leader', async () => {
    const { t, hosts } = transportOf(['n1:8080', 'n2:8080', 'floe-lb:8080'], (host) => {
      if (host === 'n1:8080' || host === 'n2:8080') return gone(host);
      if (host === 'floe-lb:8080') return noLeader([{ id: 5, httpAddr: 'n5:8080' }]); // lands on a non-member
      if (host === 'n5:8080') return granted;
      throw new Error(`unexpected ${host}`);
    });
    const r = await t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 });
    expect(r.endpoint).toBe('http://n5:8080');
    expect(hosts).toEqual(['n1:8080', 'n2:8080', 'floe-lb:8080', 'n5:8080']);
    expect(t.learnedEndpoints).toEqual(['http://n5:8080']);
  });

  it('keeps a leader it was redirected to once, and finds it again after an election, with servers that list nobody', async () => {
    let behindLb = 'n13:8080'; // a follower that redirects, then (after the election) a process that knows nobody
    let leaderAnswers: 'grant' | 'election' = 'grant';
    const { t, hosts } = transportOf(['n1:8080', 'floe-lb:8080'], (host) => {
      if (host === 'n1:8080') return gone(host);
      if (host === 'floe-lb:8080') {
        if (behindLb === 'n13:8080')
          return reply(307, { error: 'not_leader', message: 'x', leader: { id: 5, httpAddr: 'n5:8080' } });
        return noLeader();
      }
      if (host === 'n5:8080') return leaderAnswers === 'grant' ? granted : noLeader();
      throw new Error(`unexpected ${host}`);
    });
    await t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 });
    behindLb = 'n8:8080';
    leaderAnswers = 'election';
    const call = t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 });
    leaderAnswers = 'grant'; // the election ends: n5 leads again
    const r = await call;
    expect(r.endpoint).toBe('http://n5:8080');
    // The first call: n1 is gone, the balancer's follower redirects to n5. The second: n5 answers 503 (its
    // election), and the next endpoint in turn is n5 again, learned from the redirect.
    expect(hosts).toEqual(['n1:8080', 'floe-lb:8080', 'n5:8080', 'n5:8080', 'n5:8080']);
  });

  it('learns only host:port addresses, at most MAX_LEARNED_ENDPOINTS of them, and still gives up at its budget', async () => {
    const members = [
      { id: 1, httpAddr: 'evil.example/path:80' },
      { id: 2, httpAddr: 'has space:80' },
      ...Array.from({ length: MAX_LEARNED_ENDPOINTS + 5 }, (_, i) => ({
        id: 10 + i,
        httpAddr: `m${i}:8080`,
      })),
    ];
    const { t } = transportOf(['floe-lb:8080'], (host) =>
      host === 'floe-lb:8080' ? noLeader(members) : noLeader(),
    );
    await expect(t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 3000 })).rejects.toBeInstanceOf(
      FloeUnavailableError,
    );
    expect(t.learnedEndpoints).toHaveLength(MAX_LEARNED_ENDPOINTS);
    expect(t.learnedEndpoints.every((e) => /^http:\/\/m\d+:8080$/.test(e))).toBe(true);
    expect(t.learnedEndpoints.at(-1)).toBe(`http://m${MAX_LEARNED_ENDPOINTS + 4}:8080`);
  });
});
