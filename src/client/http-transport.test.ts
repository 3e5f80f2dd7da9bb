import { describe, expect, it } from 'vitest';
import { FloeUnavailableError } from './errors.js';
import {
  type FetchLike,
  type FetchResponseLike,
  HttpTransport,
  LEARNED_ENDPOINT_TTL_MS,
  MAX_LEARNED_ENDPOINTS,
  MAX_LEARNED_PER_CALL,
  MAX_RESPONSE_BYTES,
} from './http-transport.js';
import { loggingTransport, virtualTransport } from './test-doubles.js';

function reply(status: number, body: unknown): FetchResponseLike {
  return { status, headers: { get: () => null }, text: async () => JSON.stringify(body) };
}

const transportOf = (endpoints: string[], answer: (host: string) => FetchResponseLike) =>
  virtualTransport(endpoints, answer);

/** A connection refused, as Node's fetch (undici) reports it: the system error is the `cause`. */
const refusedError = (host: string, code = 'ECONNREFUSED', syscall = 'connect') =>
  new TypeError('fetch failed', {
    cause: Object.assign(new Error(`${syscall} ${code} ${host}`), { code, syscall }),
  });
const gone = (host: string): never => {
  throw refusedError(host);
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
  it('finds the leader a follower behind the balancer redirects to, and finds it again after an election', async () => {
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
    const first = await t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 });
    expect(first.endpoint).toBe('http://n5:8080');
    t.confirm(first.endpoint); // the SDK's reply check passed
    expect(t.leaderEndpoint).toBe('http://n5:8080');
    behindLb = 'n8:8080';
    leaderAnswers = 'election';
    const call = t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 });
    leaderAnswers = 'grant'; // the election ends: n5 leads again
    const r = await call;
    expect(r.endpoint).toBe('http://n5:8080');
    // The first call: n1 is gone, the balancer's follower redirects to n5. The second: n5 (the confirmed leader)
    // answers 503 (its election); the configured endpoints fail; then n5 again, learned from the redirect.
    expect(hosts).toEqual([
      'n1:8080',
      'floe-lb:8080',
      'n5:8080',
      'n5:8080',
      'n1:8080',
      'floe-lb:8080',
      'n5:8080',
    ]);
  });
});

// Review of FS-19 (F1, F4): a process started with another cluster's members, behind the same balancer, lists them in
// its 503 not_leader; a client that followed that list could be granted a lease by the other cluster (duplicate IDs),
// and its credentials went to every address any 503 listed.
describe('HttpTransport: the members a 503 not_leader lists are never followed (review of FS-19, F1 F4)', () => {
  it('does not go to a member of another cluster that a misconfigured joiner lists', async () => {
    const { t, hosts } = transportOf(['floe-lb:8080'], (host) => {
      if (host === 'floe-lb:8080') return noLeader([{ id: 1, httpAddr: 'b1:7380' }]);
      if (host === 'b1:7380') return granted; // cluster B would grant
      throw new Error(`unexpected ${host}`);
    });
    await expect(t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 3000 })).rejects.toBeInstanceOf(
      FloeUnavailableError,
    );
    expect(hosts.every((h) => h === 'floe-lb:8080')).toBe(true);
    expect(t.learnedEndpoints).toEqual([]);
  });
});

/** A fetch that records each attempt's host and Authorization. */
function recordingTransport(
  endpoints: string[],
  answer: (host: string, url: string) => FetchResponseLike,
  more: { user?: string; password?: string } = {},
) {
  let now = 0;
  const sent: { url: string; auth: string | undefined }[] = [];
  const sleeps: number[] = [];
  const fetch: FetchLike = async (url, init) => {
    sent.push({ url, auth: init.headers.authorization });
    return answer(new URL(url).host, url);
  };
  const t = new HttpTransport({
    endpoints,
    ...more,
    requestTimeoutMs: 2000,
    fetch,
    monotonic: () => now,
    wall: () => now,
    sleep: async (ms) => {
      sleeps.push(ms);
      now += ms;
    },
    random: () => 0.5,
  });
  return {
    t,
    sent,
    sleeps,
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

const redirectTo = (httpAddr: unknown) =>
  reply(307, { error: 'not_leader', message: 'x', leader: { id: 5, httpAddr } });

// Review of FS-19 (F3, F6): any string a redirect named was normalised and kept, with Authorization sent to it.
describe('HttpTransport: only a plain host:port from a redirect is followed (review of FS-19, F3 F6)', () => {
  const refused: [string, unknown][] = [
    ['a path', 'evil.example/path:80'],
    ['a path after the port', 'evil.example:80/steal?x='],
    ['an explicit scheme', 'http://evil.example:80'],
    ['userinfo', 'u:p@evil.example:80'],
    ['port 0', 'evil.example:0'],
    ['port 65536', 'evil.example:65536'],
    ['port 99999', 'evil.example:99999'],
    ['no port', 'evil.example'],
    ['an empty host', ':80'],
    ['10 MB', `${'a'.repeat(10_000_000)}:80`],
    ['256 characters', `${'a'.repeat(251)}:8080`],
    ['localhost', 'localhost:8080'],
    ['LOCALHOST.', 'LOCALHOST.:8080'],
    ['127/8', '127.3.2.1:8080'],
    ['127.1', '127.1:8080'],
    ['0', '0:8080'],
    ['0.0.0.0', '0.0.0.0:8080'],
    ['::', '[::]:8080'],
    ['::1', '[0:0::1]:8080'],
    ['IPv4-mapped loopback', '[::ffff:127.0.0.1]:8080'],
    ['a number', 8080],
  ];
  for (const [what, addr] of refused)
    it(`refuses a redirect to ${what}`, async () => {
      const { t, sent } = recordingTransport(
        ['floe-lb:8080'],
        (host) => (host === 'floe-lb:8080' ? redirectTo(addr) : granted),
        { user: 'svc', password: 'pw' },
      );
      await expect(t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 1000 })).rejects.toBeInstanceOf(
        FloeUnavailableError,
      );
      expect(sent.every((s) => new URL(s.url).host === 'floe-lb:8080')).toBe(true);
      expect(t.learnedEndpoints).toEqual([]);
    });

  it('refuses a Location with userinfo, and takes only the host:port of a Location', async () => {
    const location = (l: string): FetchResponseLike => ({
      status: 307,
      headers: { get: (n) => (n === 'location' ? l : null) },
      text: async () => '',
    });
    const a = recordingTransport(['floe-lb:8080'], (host) =>
      host === 'floe-lb:8080' ? location('http://u:p@n5:8080/v1/x') : granted,
    );
    await expect(a.t.post('/v1/x', {}, { budgetMs: 500 })).rejects.toBeInstanceOf(FloeUnavailableError);
    const b = recordingTransport(['floe-lb:8080'], (host) =>
      host === 'floe-lb:8080' ? location('http://N5:8080/steal?x=') : granted,
    );
    const r = await b.t.post('/v1/x', {}, { budgetMs: 500 });
    expect(r.endpoint).toBe('http://n5:8080');
    expect(b.sent.at(-1)?.url).toBe('http://n5:8080/v1/x');
  });

  it('keeps the scheme of the redirecting endpoint: never https to http', async () => {
    const location: FetchResponseLike = {
      status: 307,
      headers: { get: (n) => (n === 'location' ? 'http://n5:8443/v1/x' : null) },
      text: async () => '',
    };
    const { t, sent } = recordingTransport(['https://floe-lb:8443'], (host) =>
      host === 'floe-lb:8443' ? location : granted,
    );
    const r = await t.post('/v1/x', {}, { budgetMs: 500 });
    expect(r.endpoint).toBe('https://n5:8443');
    expect(sent.map((s) => s.url)).toEqual(['https://floe-lb:8443/v1/x', 'https://n5:8443/v1/x']);
  });

  it('learns one endpoint for spellings of one host, and none for a configured one', async () => {
    let turn = 0;
    const names = ['N5:8080', 'n5:8080', 'n5.:8080', '[0:0::a]:8080', '[::a]:8080', 'N1:8080'];
    const { t } = recordingTransport(['n1:8080', 'floe-lb:8080'], (host) => {
      if (host === 'floe-lb:8080') return redirectTo(names[turn++ % names.length]);
      if (host === 'n1:8080') return gone(host);
      return granted;
    });
    for (let i = 0; i < names.length; i++) await t.post('/v1/x', {}, { budgetMs: 500 });
    expect(t.learnedEndpoints).toEqual(['http://n5:8080', 'http://n5.:8080', 'http://[::a]:8080']);
  });

  it('follows loopback redirects when a configured endpoint is loopback (tests, one host)', async () => {
    const { t } = recordingTransport(['127.0.0.1:7380'], (host) =>
      host === '127.0.0.1:7380' ? redirectTo('127.0.0.1:7381') : granted,
    );
    expect((await t.post('/v1/x', {}, { budgetMs: 500 })).endpoint).toBe('http://127.0.0.1:7381');
  });

  it('refuses an answer over MAX_RESPONSE_BYTES, naming the limit', async () => {
    const huge = new Uint8Array(MAX_RESPONSE_BYTES + 1).fill(0x20);
    const big = (): FetchResponseLike => ({
      status: 200,
      headers: { get: () => null },
      text: async () => ' '.repeat(huge.length),
      body: new Blob([huge]).stream(),
    });
    const { t } = recordingTransport(['n1:8080'], () => big());
    const e = await t.post('/v1/x', {}, { budgetMs: 100 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(FloeUnavailableError);
    expect(String((e as FloeUnavailableError).cause ?? (e as Error).message)).toContain(
      String(MAX_RESPONSE_BYTES),
    );
  });
});

// Review of FS-19 (F2): learned endpoints were never dropped and took their turn before the configured ones, each
// failure doubling the backoff: with 32 dead learned endpoints, renewals during a 300 ms election failed 10 times in 10.
describe('HttpTransport: dead learned endpoints do not starve the configured ones (review of FS-19, F2)', () => {
  /**
   * A transport that learned `n` endpoints from redirects (each answered once; the last one's answer confirmed, so it
   * is the sticky leader), all of them dead now.
   */
  async function withDeadLearned(n: number) {
    let phase: 'learn' | 'run' = 'learn';
    let turn = 0;
    let lbDownUntil = 0;
    const w = recordingTransport(['floe-lb:8080'], (host) => {
      if (phase === 'learn') return host === 'floe-lb:8080' ? redirectTo(`10.0.${turn++}.1:7380`) : granted;
      if (host === 'floe-lb:8080') return w.now() < lbDownUntil ? noLeader() : granted;
      w.advance(2000); // blackholed: the attempt times out
      throw new DOMException('The operation timed out.', 'TimeoutError');
    });
    for (let i = 0; i < n; i++) {
      const r = await w.t.post('/v1/x', {}, { budgetMs: 500 });
      if (i === n - 1) w.t.confirm(r.endpoint);
    }
    phase = 'run';
    w.sleeps.length = 0;
    w.sent.length = 0;
    return {
      ...w,
      electFor: (ms: number) => {
        lbDownUntil = w.now() + ms;
      },
    };
  }

  it('renews at the healthy configured endpoint first, with 8 dead learned endpoints', async () => {
    const w = await withDeadLearned(MAX_LEARNED_ENDPOINTS);
    expect(w.t.learnedEndpoints).toHaveLength(MAX_LEARNED_ENDPOINTS);
    for (let k = 0; k < 10; k++) await w.t.post('/renew', {}, { budgetMs: 3333 });
    // The dead sticky leader once, then the configured endpoint, which leads from then on; the one backoff step is
    // the first, not raised.
    expect(w.sent.map((s) => new URL(s.url).host)).toEqual([
      '10.0.7.1:7380',
      ...Array(10).fill('floe-lb:8080'),
    ]);
    expect(w.sleeps).toEqual([25]);
  });

  it('renews within one backoff after a 300 ms election, with 32 redirects to dead endpoints learned', async () => {
    const w = await withDeadLearned(32);
    expect(w.t.learnedEndpoints).toHaveLength(MAX_LEARNED_ENDPOINTS);
    let failures = 0;
    for (let k = 0; k < 10; k++) {
      w.electFor(300);
      w.sent.length = 0;
      w.sleeps.length = 0;
      try {
        await w.t.post('/renew', {}, { budgetMs: 3333 });
      } catch {
        failures++;
      }
      const learnedTries = w.sent.filter((s) => new URL(s.url).host !== 'floe-lb:8080').length;
      expect(learnedTries).toBeLessThanOrEqual(MAX_LEARNED_PER_CALL + 1); // + the (dead) sticky leader
      // The backoff doubles only at the configured endpoint: 25 ms jittered, never raised by a learned failure.
      for (const ms of w.sleeps) expect(ms).toBeLessThanOrEqual(50 * 1.5);
    }
    expect(failures).toBe(0);
    // Two failures in a row each: the dead ones are gone.
    expect(w.t.learnedEndpoints.length).toBeLessThan(MAX_LEARNED_ENDPOINTS);
  });

  it('still backs off when a redirect keeps naming a dead node', async () => {
    const { t, sleeps } = recordingTransport(['floe-lb:8080'], (host) =>
      host === 'floe-lb:8080' ? redirectTo('n5:8080') : gone(host),
    );
    await expect(t.post('/v1/x', {}, { budgetMs: 5000 })).rejects.toBeInstanceOf(FloeUnavailableError);
    expect(sleeps.length).toBeLessThan(20); // not raised: ~200 sleeps of 25 ms
    expect(Math.max(...sleeps)).toBeGreaterThanOrEqual(500);
  });

  it('drops a learned endpoint no redirect named and that did not lead for LEARNED_ENDPOINT_TTL_MS', async () => {
    const w = await withDeadLearned(3);
    expect(w.t.learnedEndpoints).toHaveLength(3);
    w.advance(LEARNED_ENDPOINT_TTL_MS + 1);
    await w.t.post('/renew', {}, { budgetMs: 3333 });
    expect(w.t.learnedEndpoints).toEqual([]);
    expect(w.t.leaderEndpoint).toBe('http://floe-lb:8080');
  });
});

// Review of FS-19 (F5): a 2xx from any learned endpoint made it the sticky leader before the SDK checked the answer.
describe('HttpTransport: a learned endpoint leads only once its answer is confirmed (review of FS-19, F5)', () => {
  it('is not the leader after its 2xx until confirmed, and forget drops it', async () => {
    const { t } = recordingTransport(['floe-lb:8080'], (host) =>
      host === 'floe-lb:8080' ? redirectTo('n5:8080') : granted,
    );
    const r = await t.post('/v1/x', {}, { budgetMs: 500 });
    expect(r.endpoint).toBe('http://n5:8080');
    expect(t.leaderEndpoint).toBeUndefined();
    t.confirm(r.endpoint);
    expect(t.leaderEndpoint).toBe('http://n5:8080');
    t.forget(r.endpoint);
    expect(t.leaderEndpoint).toBeUndefined();
    expect(t.learnedEndpoints).toEqual([]);
  });
});

// Regression (FS-21, full-stack simulator, swarm seed 1440006): a client configured with the three initial members
// (all removed and down: connection refused) and a balancer in front of the running processes waited a backoff step
// (doubling to 1 s) after every refused connection, so it reached the balancer once every 3-4 s; the balancer mostly
// landed on a process that was never added (503 not_ready), and the client's nodeId issued no ID for 30 s after the
// faults ended.
describe('HttpTransport: a refused connection costs no backoff wait (FS-21)', () => {
  const notReady: FetchResponseLike = {
    status: 503,
    headers: { get: (n) => (n === 'retry-after' ? '1' : null) },
    text: async () =>
      JSON.stringify({ error: 'not_ready', message: 'this node is not a member of the cluster' }),
  };

  it('with every configured endpoint refusing connections but the balancer answering, each round reaches the balancer without backoff waits between refused endpoints', async () => {
    let lbAnswers = 0;
    const { t, log } = loggingTransport(['n1:8080', 'n2:8080', 'n3:8080', 'floe-lb:8080'], (host) => {
      if (host !== 'floe-lb:8080') return gone(host);
      return ++lbAnswers < 4 ? notReady : granted; // lands on a process never added, three times
    });
    const r = await t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 });
    expect(r.endpoint).toBe('http://floe-lb:8080');
    const round = ['n1:8080', 'n2:8080', 'n3:8080', 'floe-lb:8080'];
    // One wait a round, after the balancer's 503 (its Retry-After: 1 s); none after a refused connection.
    expect(log).toEqual([...round, 'wait 1000', ...round, 'wait 1000', ...round, 'wait 1000', ...round]);
  });

  it('a client whose every endpoint refuses still backs off per round (no busy loop)', async () => {
    const { t, log } = loggingTransport(['n1:8080', 'n2:8080', 'n3:8080'], gone);
    const e = await t.post('/v1/x', {}, { budgetMs: 5000 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(FloeUnavailableError);
    const waits = log.filter((l) => l.startsWith('wait')).map((l) => Number(l.slice(5)));
    // Each round tries the three endpoints, then waits; the wait doubles per round (random 0.5: no jitter) up to 1 s,
    // and the call ends at the first failure once its budget is spent.
    const rounds = log.join(' ').split(/ ?wait \d+(?:\.\d+)? ?/);
    expect(rounds.pop()).toBe('n1:8080');
    for (const round of rounds) expect(round).toBe('n1:8080 n2:8080 n3:8080');
    expect(waits.slice(0, 7)).toEqual([25, 50, 100, 200, 400, 800, 1000]);
    expect(waits.reduce((a, b) => a + b, 0)).toBe(5000);
    expect(log.length).toBeLessThan(60);
  });

  it('a connection reset or an attempt timeout still costs a backoff wait (the request may have arrived)', async () => {
    for (const fail of [
      (host: string) => refusedError(host, 'ECONNRESET', 'read'),
      () =>
        new TypeError('fetch failed', { cause: Object.assign(new Error('x'), { code: 'UND_ERR_SOCKET' }) }),
      () => new DOMException('The operation was aborted due to timeout', 'TimeoutError'),
      (host: string) => new TypeError(`fetch failed: connect ECONNREFUSED ${host}`), // no cause: nothing known
    ]) {
      const { t, log } = loggingTransport(['n1:8080', 'floe-lb:8080'], (host) => {
        if (host === 'n1:8080') throw fail(host);
        return granted;
      });
      await t.post('/v1/x', {}, { budgetMs: 5000 });
      expect(log).toEqual(['n1:8080', 'wait 25', 'floe-lb:8080']);
    }
  });

  it('a host that does not resolve, or every address of one refusing (AggregateError), costs no wait', async () => {
    for (const fail of [
      (host: string) => refusedError(host, 'ENOTFOUND', 'getaddrinfo'),
      (host: string) =>
        new TypeError('fetch failed', {
          cause: new AggregateError([refusedError(host).cause, refusedError(host).cause]),
        }),
    ]) {
      const { t, log } = loggingTransport(['n1:8080', 'floe-lb:8080'], (host) => {
        if (host === 'n1:8080') throw fail(host);
        return granted;
      });
      await t.post('/v1/x', {}, { budgetMs: 5000 });
      expect(log).toEqual(['n1:8080', 'floe-lb:8080']);
    }
  });
});

// Review of FS-21: behind a real HTTP balancer (nginx, an ingress) with every backend down, the answer is a bare 502 or
// 503 with an HTML body, no Floe error code. It said `http_502`/`http_503` and the SDK gave up at once, final.
describe('HttpTransport: a balancer answering for nodes it cannot reach', () => {
  for (const status of [502, 503]) {
    it(`a bare ${status} with no Floe body is retried after a backoff, on the next endpoint`, async () => {
      let lbCalls = 0;
      const r = recordingTransport(['floe-lb:8080', 'n1:8080'], (host) => {
        if (host === 'floe-lb:8080') {
          lbCalls++;
          return {
            status,
            headers: { get: () => null },
            text: async () => `<html><body><h1>${status} Bad Gateway</h1></body></html>`,
          };
        }
        return granted;
      });
      const res = await r.t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 });
      expect(res.endpoint).toBe('http://n1:8080');
      expect(lbCalls).toBe(1);
      expect(r.sleeps.length).toBe(1);
    });
  }

  it('a 4xx with no Floe body stays final', async () => {
    const r = recordingTransport(['floe-lb:8080', 'n1:8080'], () => ({
      status: 404,
      headers: { get: () => null },
      text: async () => 'not found',
    }));
    await expect(r.t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 })).rejects.toThrow(
      /http_404|not found/,
    );
    expect(r.sent.length).toBe(1);
  });
});
