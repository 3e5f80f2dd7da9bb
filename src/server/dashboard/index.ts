/**
 * The live dashboard every node serves at `/` (docs/dashboard.md). Routes:
 *
 * - `GET /` — the page; `GET /dashboard/app.js`, `GET /dashboard/style.css` — its script and style;
 * - `GET /dashboard/data` — one snapshot as JSON;
 * - `GET /dashboard/events` — server-sent events, one snapshot a second while anyone listens.
 *
 * The routes are registered on the node's HTTP app, so the node's authentication applies: with users,
 * an unauthenticated browser gets 401 with `WWW-Authenticate: Basic` (the browser asks for credentials)
 * and the user needs admin on `*`, as for the rest of the admin surface.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { APP_JS, PAGE_HTML, STYLE_CSS } from './assets.js';
import { DashboardData, type DashboardSources } from './data.js';

export { clusterView } from './cluster-view.js';
export type { DashboardSnapshot, DashboardSources } from './data.js';

export interface DashboardOptions {
  /** Snapshot period of the event stream (ms). Default 1,000. */
  intervalMs?: number;
  /** Event-stream clients at once; more get 503. Default 32. */
  maxClients?: number;
}

const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'";

export function registerDashboard(
  app: FastifyInstance,
  sources: DashboardSources,
  opts: DashboardOptions = {},
): void {
  const data = new DashboardData(sources);
  const intervalMs = opts.intervalMs ?? 1000;
  const maxClients = opts.maxClients ?? 32;
  const clients = new Set<ServerResponse>();
  let timer: NodeJS.Timeout | undefined;
  let ticking = false;

  const tick = async () => {
    if (ticking) return; // a slow snapshot is never stacked
    ticking = true;
    try {
      data.pollMembers();
      const frame = `data: ${JSON.stringify(await data.snapshot())}\n\n`;
      for (const res of clients) res.write(frame);
    } catch {
      // a snapshot failed (node stopping): the next tick tries again
    } finally {
      ticking = false;
    }
  };
  const stopIfIdle = () => {
    if (clients.size === 0 && timer) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  const asset =
    (body: string, type: string) => async (_req: unknown, reply: import('fastify').FastifyReply) =>
      reply
        .header('content-type', type)
        .header('cache-control', 'no-cache')
        .header('content-security-policy', CSP)
        .header('x-content-type-options', 'nosniff')
        .send(body);
  app.get('/', asset(PAGE_HTML, 'text/html; charset=utf-8'));
  app.get('/dashboard/app.js', asset(APP_JS, 'text/javascript; charset=utf-8'));
  app.get('/dashboard/style.css', asset(STYLE_CSS, 'text/css; charset=utf-8'));

  app.get('/dashboard/data', async (_req, reply) => {
    data.pollMembers();
    return reply.header('cache-control', 'no-store').send(await data.snapshot());
  });

  app.get('/dashboard/events', async (req, reply) => {
    if (clients.size >= maxClients)
      return reply
        .code(503)
        .send({ error: 'overloaded', message: `at most ${maxClients} dashboard streams at once` });
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    // Reconnect quickly after the node restarts.
    res.write('retry: 1000\n\n');
    clients.add(res);
    req.raw.socket.setNoDelay(true);
    const done = () => {
      clients.delete(res);
      stopIfIdle();
    };
    res.on('close', done);
    res.on('error', done);
    if (!timer) {
      timer = setInterval(() => void tick(), intervalMs);
      timer.unref();
    }
    void tick();
  });

  // Event streams never end by themselves: end them before the server waits for open requests.
  app.addHook('preClose', async () => {
    for (const res of clients) res.end();
    clients.clear();
    stopIfIdle();
    data.close();
  });
}
