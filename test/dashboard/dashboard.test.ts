// The live dashboard in a real headless Chromium (Debian's /usr/bin/chromium driven by playwright-core)
// against a real 3-node cluster: the page shows the leader; after kill -9 of the leader it shows the new
// one, live (server-sent events), without a reload. Waits on the page's content, never on sleeps.
// Needs `npm run build` first. FLOE_DASHBOARD_SCREENSHOT=<path.png> also saves a screenshot.
import { existsSync } from 'node:fs';
import { Redis } from 'ioredis';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, http } from '../cluster/harness.js';
import { startCluster } from '../cluster/lease-cluster.js';

// What the functions run inside the page use of its DOM (the tests' TypeScript has no DOM library).
interface PageElement {
  dataset: Record<string, string | undefined>;
  textContent: string | null;
  classList: { contains(name: string): boolean };
}
declare const document: {
  getElementById(id: string): PageElement | null;
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): { length: number };
};

const CHROMIUM = '/usr/bin/chromium';
let cluster: Cluster;
let leader: number;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (see .ci/run)`);
  ({ cluster, leader } = await startCluster(3));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
});

afterAll(async () => {
  await browser?.close();
  await cluster?.stopAll();
  cluster?.cleanup();
});

/** Some leases, a sequence and RESP traffic, so that every part of the page has something to show. */
async function traffic(): Promise<void> {
  const l = cluster.node(leader);
  for (const [app, holders] of [
    ['orders', ['orders-api-1', 'orders-api-2', 'orders-worker-1']],
    ['payments', ['payments-1']],
  ] as const) {
    for (const nodeId of holders) {
      const r = await http(l.http, 'POST', `/v1/apps/${app}/workers/acquire`, { nodeId, ttlMs: 30_000 });
      expect(r.status).toBe(200);
    }
  }
  expect((await http(l.http, 'POST', '/v1/sequences', { key: 'invoice-no', step: 100 })).status).toBe(201);
  const redis = new Redis({ port: l.spec.respPort, host: '127.0.0.1', lazyConnect: true });
  await redis.connect();
  try {
    for (let i = 0; i < 20; i++)
      await Promise.all(Array.from({ length: 50 }, () => redis.incr('invoice-no')));
  } finally {
    redis.disconnect();
  }
}

const leaderShown = (page: Page, id: number) =>
  page.waitForFunction((want) => document.getElementById('leader')?.dataset.leader === String(want), id, {
    timeout: 30_000,
  });

describe('live dashboard in headless Chromium', () => {
  it('shows the members and the leader; after kill -9 of the leader, the new leader without a reload', async () => {
    await traffic();
    const follower = cluster.nodes.find((n) => n.spec.id !== leader)!;
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`http://${follower.http}/`);
    await leaderShown(page, leader);
    // All three members report themselves (each one's own /v1/cluster), the leader's row says so.
    await page.waitForFunction(
      () => document.querySelectorAll('#members tbody tr:not(.down)').length === 3,
      undefined,
      { timeout: 30_000 },
    );
    expect(await page.textContent(`#members tr[data-member="${leader}"] td:nth-child(2)`)).toBe('leader');
    expect(await page.textContent('#apps')).toContain('orders-api-2');
    expect(await page.textContent('#sequences')).toContain('invoice-no');

    const shot = process.env.FLOE_DASHBOARD_SCREENSHOT;
    if (shot) {
      // From the leader's own page: it knows each lease's time left.
      const lp = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
      await lp.goto(`http://${cluster.node(leader).http}/`);
      await lp.waitForFunction(() => document.querySelectorAll('#members tbody tr:not(.down)').length === 3);
      await lp.waitForFunction(() => /\d+(\.\d)? s/.test(document.getElementById('apps')?.textContent ?? ''));
      await lp.screenshot({ path: shot, fullPage: true });
      await lp.close();
    }

    const old = leader;
    await cluster.node(old).kill9();
    const next = await page.waitForFunction(
      (gone) => {
        const v = Number(document.getElementById('leader')?.dataset.leader);
        return v !== 0 && v !== gone ? v : undefined;
      },
      old,
      { timeout: 30_000 },
    );
    const newLeader = (await next.jsonValue()) as number;
    expect(newLeader).not.toBe(old);
    expect(await page.textContent('#leader')).toBe(`node ${newLeader}`);
    // The killed member is shown unreachable.
    await page.waitForFunction(
      (gone) =>
        document.querySelector(`#members tr[data-member="${gone}"]`)?.classList.contains('down') === true,
      old,
      { timeout: 30_000 },
    );
    expect(errors).toEqual([]);
    await page.close();
  });
});
