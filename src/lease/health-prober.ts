/**
 * Holder health, the leader's side (issue 13; seed 000's last point): a holder may register a health URL with its
 * acquire (and again with each renewal, so a new leader learns it too). The leader GETs it every `intervalMs`; after
 * `failures` failed probes in a row (no 2xx within `timeoutMs`) it refuses that lease's renewals (`lease_unhealthy`).
 *
 * Safety: nothing here expires a lease. A holder whose renewals are refused stops at its own deadline, and the
 * leader expires the lease only after its deadline passed, exactly as for a holder that crashed
 * (docs/decisions/0002-lease-safety.md). A probe that flaps only delays renewals; it never shortens a lease.
 *
 * Health state is the leader's own: a new leader starts with every lease healthy and learns URLs from renewals.
 */
import type { LeaseTimers } from './lease-service.js';

export interface HealthProberOptions {
  /** GET `url`; true for a 2xx answer within `timeoutMs`. Default: global fetch, no redirects followed. */
  probe?: (url: string, timeoutMs: number) => Promise<boolean>;
  /** Between two probe rounds (ms). Default 1,000. */
  intervalMs?: number;
  /** Per probe (ms). Default 1,000. */
  timeoutMs?: number;
  /** Failed probes in a row before renewals are refused. Default 3. */
  failures?: number;
  /** Most health URLs tracked at once (bounded memory); beyond it, registrations are ignored. Default 10,000. */
  maxTargets?: number;
  timers: LeaseTimers;
  /** Whether `token` is still the live lease of that worker (entries of ended leases are dropped). */
  isLive(app: string, workerId: number, token: number): boolean;
}

interface Target {
  app: string;
  workerId: number;
  token: number;
  url: string;
  failures: number;
  lastError: string;
}

export const MAX_HEALTH_URL_LENGTH = 512;

/** What is wrong with a health URL, or undefined. */
export function checkHealthUrl(url: unknown): string | undefined {
  if (typeof url !== 'string' || url.length === 0 || url.length > MAX_HEALTH_URL_LENGTH)
    return `healthUrl must be an http(s) URL of 1..${MAX_HEALTH_URL_LENGTH} characters`;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return `healthUrl must be an http(s) URL, got ${JSON.stringify(url.slice(0, 80))}`;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    return `healthUrl must use http or https, got ${JSON.stringify(u.protocol)}`;
  return undefined;
}

const fetchProbe = async (url: string, timeoutMs: number): Promise<boolean> => {
  try {
    const res = await fetch(url, {
      method: 'GET',
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.body?.cancel();
    return res.status >= 200 && res.status < 300;
  } catch {
    return false;
  }
};

export class HealthProber {
  private readonly targets = new Map<string, Target>();
  private timer: unknown;
  private running = false;
  private inRound = false;
  private readonly probe: (url: string, timeoutMs: number) => Promise<boolean>;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly failures: number;
  private readonly maxTargets: number;
  readonly stats = { probes: 0, failedProbes: 0, refusedRenewals: 0 };

  constructor(private readonly o: HealthProberOptions) {
    this.probe = o.probe ?? fetchProbe;
    this.intervalMs = o.intervalMs ?? 1000;
    this.timeoutMs = o.timeoutMs ?? 1000;
    this.failures = o.failures ?? 3;
    this.maxTargets = o.maxTargets ?? 10_000;
  }

  /** Registers (or refreshes) the health URL of a live lease. A new token starts healthy. */
  register(app: string, workerId: number, token: number, url: string): void {
    const key = `${app}\u0000${workerId}`;
    const t = this.targets.get(key);
    if (t && t.token === token) {
      t.url = url;
      return;
    }
    if (!t && this.targets.size >= this.maxTargets) return;
    this.targets.set(key, { app, workerId, token, url, failures: 0, lastError: '' });
    if (this.running && this.timer === undefined && !this.inRound) this.schedule();
  }

  /** Why renewals of this lease are refused, or undefined when they are not. */
  unhealthy(app: string, workerId: number, token: number): string | undefined {
    const t = this.targets.get(`${app}\u0000${workerId}`);
    if (!t || t.token !== token || t.failures < this.failures) return undefined;
    return `the holder's health URL ${t.url} failed ${t.failures} probes in a row (${t.lastError})`;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule();
  }

  /** Stops probing and forgets everything (a leader that steps down). */
  stop(): void {
    this.running = false;
    if (this.timer !== undefined) this.o.timers.clearTimeout(this.timer);
    this.timer = undefined;
    this.targets.clear();
  }

  get size(): number {
    return this.targets.size;
  }

  /** One round: every live target probed once, in parallel. Exposed for tests. */
  async round(): Promise<void> {
    const round: Promise<void>[] = [];
    for (const [key, t] of this.targets) {
      if (!this.o.isLive(t.app, t.workerId, t.token)) {
        this.targets.delete(key);
        continue;
      }
      round.push(
        this.probe(t.url, this.timeoutMs).then(
          (ok) => this.record(t, ok, `no 2xx within ${this.timeoutMs} ms`),
          (err: unknown) => this.record(t, false, String(err)),
        ),
      );
    }
    await Promise.all(round);
  }

  private record(t: Target, ok: boolean, why: string): void {
    this.stats.probes++;
    if (ok) {
      t.failures = 0;
      return;
    }
    this.stats.failedProbes++;
    t.failures++;
    t.lastError = why;
  }

  /** A timer only while there is something to probe (an idle leader arms none). */
  private schedule(): void {
    if (!this.running || this.targets.size === 0) return;
    this.timer = this.o.timers.setTimeout(() => {
      this.timer = undefined;
      this.inRound = true;
      void this.round().finally(() => {
        this.inRound = false;
        this.schedule();
      });
    }, this.intervalMs);
  }
}
