/**
 * What the live dashboard shows, built on the node that serves the page: its own Raft view, the other
 * members' own reports (their open `/v1/cluster`, polled only while someone watches), leases and
 * pools, sequences with their allocation rate, and throughput/latency windows. Bounded: at most
 * MAX_APPS apps with MAX_LEASES leases each and MAX_SEQUENCES sequences are listed (counts say how many more).
 */
import type { LeaseService } from '../../lease/lease-service.js';
import type { FloeNode } from '../../node/node.js';
import type { LeaseGrant, LeaseStateMachine } from '../../state/leases/index.js';
import type { SequenceStateMachine } from '../../state/sequences/sequence-state-machine.js';
import type { NodeMetrics } from '../metrics.js';
import type { WindowPoint } from '../metrics-window.js';
import { clusterView } from './cluster-view.js';

export const MAX_APPS = 50;
export const MAX_LEASES = 200;
export const MAX_SEQUENCES = 100;
/** Up to this many sequences the page lists the first ones by key; above, the latest to allocate. */
export const SORT_LIMIT = 5000;

export interface MemberRow {
  id: number;
  httpAddr: string | null;
  /** The role this node sees for the member (leader, follower, learner). */
  role: string;
  self: boolean;
  /** From the member's own /v1/cluster: its role, term, commit and applied index, and whom it follows. */
  reachable: boolean;
  reported?: { role: string; term: number; commit: number; applied: number; leader: number };
  /** Leader only: the highest log index known replicated on this member. */
  match: number | null;
}

export interface LeaseRow {
  workerId: number;
  holder: string;
  token: number;
  /** Time left on the leader's deadline (ms); null where unknown (on a follower, or not yet tracked). */
  timeLeftMs: number | null;
  highWaterMs: number;
  boundMs: number;
  ttlMs: number;
}

export interface DashboardSnapshot {
  at: number;
  node: {
    id: number;
    role: string;
    leader: number;
    term: number;
    commit: number;
    applied: number;
    snapshotIndex: number;
  };
  leaderHttp: string | null;
  members: MemberRow[];
  apps: { app: string; size: number; leased: number; bits: number; leases: LeaseRow[]; more: number }[];
  appsMore: number;
  sequences: { key: string; mode: string; next: string; step: number; ratePerSec: number | null }[];
  sequencesTotal: number;
  series: { resp: WindowPoint[]; http: WindowPoint[]; commit: WindowPoint[] };
  counters: { proposals: number; applied: number; leaderChanges: number; snapshots: number };
}

export interface DashboardSources {
  node: FloeNode<unknown>;
  metrics: NodeMetrics;
  leaseState?: LeaseStateMachine;
  leaseService?: LeaseService;
  sequenceState?: SequenceStateMachine;
  /** Fetches a member's `/v1/cluster` (default: `memberFetch` or global fetch, over `scheme`). */
  fetchMember?: (httpAddr: string) => Promise<unknown>;
  /** `https` when the members' HTTP listeners speak TLS. Default `http`. */
  scheme?: 'http' | 'https';
  /** The node's own fetch for calls to other members (with TLS: the cluster's CA and certificate). */
  memberFetch?: (
    url: string,
    init: { signal: AbortSignal },
  ) => Promise<{ ok: boolean; status: number; text(): Promise<string> }>;
}

type Reported = NonNullable<MemberRow['reported']>;

const fetchMemberOf =
  (s: DashboardSources) =>
  async (httpAddr: string): Promise<unknown> => {
    const get = s.memberFetch ?? ((url: string, init: { signal: AbortSignal }) => fetch(url, init));
    const res = await get(`${s.scheme ?? 'http'}://${httpAddr}/v1/cluster`, {
      signal: AbortSignal.timeout(800),
    });
    if (!res.ok) throw new Error(`status ${res.status}`);
    return JSON.parse(await res.text());
  };

/** Builds snapshots; polls the other members (one request each in flight at most) when asked to. */
export class DashboardData {
  private readonly reports = new Map<number, { at: number; report?: Reported }>();
  private readonly inFlight = new Set<number>();
  /** Per sequence key: samples of (time, high-water) over the last ~15 s, for the rate. */
  private readonly seqSamples = new Map<string, Array<[number, bigint]>>();

  /** Keys of the latest allocations (at most MAX_SEQUENCES, oldest first). */
  private readonly recent = new Set<string>();
  private readonly unsubscribe: (() => void) | undefined;

  constructor(private readonly s: DashboardSources) {
    this.unsubscribe = s.sequenceState?.onAllocated((a) => {
      this.recent.delete(a.key);
      this.recent.add(a.key);
      if (this.recent.size > MAX_SEQUENCES) this.recent.delete(this.recent.values().next().value as string);
    });
  }

  close(): void {
    this.unsubscribe?.();
  }

  /** Asks every other member for its own view (answers arrive for the next snapshot). */
  pollMembers(): void {
    const st = this.s.node.status();
    const fetchMember = this.s.fetchMember ?? fetchMemberOf(this.s);
    for (const m of st.members) {
      if (m.id === st.id || !m.httpAddr || this.inFlight.has(m.id)) continue;
      this.inFlight.add(m.id);
      fetchMember(m.httpAddr)
        .then(
          (v) => this.reports.set(m.id, { at: Date.now(), report: reportOf(v) }),
          () => this.reports.set(m.id, { at: Date.now() }),
        )
        .finally(() => this.inFlight.delete(m.id));
    }
  }

  async snapshot(): Promise<DashboardSnapshot> {
    const { node, metrics } = this.s;
    const view = clusterView(node);
    const now = Date.now();
    const members: MemberRow[] = view.members.map((m) => {
      const self = m.id === view.id;
      const r = this.reports.get(m.id);
      // A report older than 5 s says nothing about now.
      const fresh = r?.report && now - r.at < 5000 ? r.report : undefined;
      return {
        id: m.id,
        httpAddr: m.httpAddr,
        role: m.role,
        self,
        reachable: self || fresh !== undefined,
        reported: self
          ? {
              role: view.role,
              term: view.term,
              commit: view.commit,
              applied: view.applied,
              leader: view.leader,
            }
          : fresh,
        match: m.match,
      };
    });
    const leaderHttp = view.members.find((m) => m.id === view.leader)?.httpAddr ?? null;
    return {
      at: now,
      node: {
        id: view.id,
        role: view.role,
        leader: view.leader,
        term: view.term,
        commit: view.commit,
        applied: view.applied,
        snapshotIndex: view.snapshotIndex,
      },
      leaderHttp,
      members,
      ...(await this.apps()),
      ...this.sequences(now),
      series: {
        resp: metrics.windows.resp.points(),
        http: metrics.windows.http.points(),
        commit: metrics.windows.commit.points(),
      },
      counters: {
        proposals: node.stats.proposals,
        applied: node.stats.applied,
        leaderChanges: node.stats.leaderChanges,
        snapshots: node.stats.snapshots,
      },
    };
  }

  private async apps(): Promise<Pick<DashboardSnapshot, 'apps' | 'appsMore'>> {
    const state = this.s.leaseState;
    if (!state) return { apps: [], appsMore: 0 };
    const pools = state.poolList();
    const svc = this.s.leaseService;
    const apps = [];
    for (const p of pools.slice(0, MAX_APPS)) {
      // The leader's service knows each deadline on its monotonic clock; elsewhere time left is unknown.
      const live: Array<LeaseGrant & { remainingMs?: number }> =
        svc && this.s.node.isLeader ? await svc.list(p.app, { linearizable: false }) : state.leases(p.app);
      const leases: LeaseRow[] = live.slice(0, MAX_LEASES).map((l) => {
        const left = l.remainingMs;
        return {
          workerId: l.workerId,
          holder: l.nodeId,
          token: l.token,
          timeLeftMs: left === undefined ? null : Math.max(0, Math.round(left)),
          highWaterMs: l.highWaterMs,
          boundMs: l.boundMs,
          ttlMs: l.ttlMs,
        };
      });
      apps.push({
        app: p.app,
        size: p.size,
        leased: p.leased,
        bits: p.bits,
        leases,
        more: live.length - leases.length,
      });
    }
    return { apps, appsMore: Math.max(0, pools.length - MAX_APPS) };
  }

  private sequences(now: number): Pick<DashboardSnapshot, 'sequences' | 'sequencesTotal'> {
    const state = this.s.sequenceState;
    if (!state) return { sequences: [], sequencesTotal: 0 };
    // Listing sorts every key: fine for thousands, not for millions once a second. Past SORT_LIMIT keys the
    // page shows the sequences that allocated most recently instead.
    const list =
      state.size <= SORT_LIMIT
        ? state.list('', MAX_SEQUENCES)
        : [...this.recent].flatMap((k) => state.get(k) ?? []).sort((a, b) => (a.key < b.key ? -1 : 1));
    const seen = new Set<string>();
    const sequences = list.map((i) => {
      seen.add(i.key);
      const next = BigInt(i.next);
      let samples = this.seqSamples.get(i.key);
      if (!samples) this.seqSamples.set(i.key, (samples = []));
      samples.push([now, next]);
      while (samples.length > 2 && now - samples[0]![0] > 15_000) samples.shift();
      const [t0, v0] = samples[0]!;
      const ratePerSec = now - t0 >= 1000 ? Number(next - v0) / ((now - t0) / 1000) : null;
      return { key: i.key, mode: i.mode, next: i.next, step: i.step, ratePerSec };
    });
    for (const k of this.seqSamples.keys()) if (!seen.has(k)) this.seqSamples.delete(k);
    return { sequences, sequencesTotal: state.size };
  }
}

function reportOf(v: unknown): Reported | undefined {
  const o = v as Partial<Record<keyof Reported, unknown>> | null;
  if (!o || typeof o !== 'object') return undefined;
  const num = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : 0);
  return {
    role: typeof o.role === 'string' ? o.role : 'unknown',
    term: num(o.term),
    commit: num(o.commit),
    applied: num(o.applied),
    leader: num(o.leader),
  };
}
