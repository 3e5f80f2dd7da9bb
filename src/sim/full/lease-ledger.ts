// What the replicated lease state decided, as the harness saw it committed, and the checks of lease replies and
// accepted leases against it ("every reply matches its request", issue 10; audit of the oracles, gap 2).
//
// - Grants: every `granted` event a replica emits (each token once: a token is the grant's log index), with the
//   acquire command read back from that replica's log at that index (requestId, incarnation). A grant is what the
//   state machine made for one requestId from one incarnation; a retried acquire is answered with that same grant.
// - Frees: every `released` / `expired` event (each token once), with the worker's high-water mark after it.
// - Requests: every acquire each client process sent (requestId, incarnation), recorded by the router as it sends.
//
// Checks:
// - `replyMismatch`: a successful lease reply a node gave (before any `replyMixup` swap) against the commitments:
//   acquire — its token is a committed grant of that app and worker ID, to the reply's nodeId, for the reply's
//   requestId and incarnation, and its floor (`highWaterMs`) is at least the worker's high-water mark before the grant;
//   renew — its token is a committed grant of that worker ID, and its bound covers the bound the request asked for;
//   release — the request's token of that worker ID is committed as freed by then, the reply's mark covers the
//   request's `lastTimestampMs` and, for a first release (not `alreadyReleased`), is the mark the release committed;
//   over RESP (a bare OK, no mark) a free of the token must be committed, with a mark covering LAST.
// - `accepted`: a lease a client process took from a reply (not resumed from a cache) is a committed grant made for
//   one of that process's own acquire requests (requestId and incarnation it sent). A reply swapped on the way
//   (`replyMixup`) that the SDK takes for its own fails here at once (with the `no-reply-check` switch).

import { decodeEnvelope, unpack } from '../../node/envelope.js';
import type { Entry } from '../../raft/types.js';
import type { LeaseEvent } from '../../state/leases/types.js';

export interface CommittedGrant {
  app: string;
  workerId: number;
  token: number;
  nodeId: string;
  /** From the acquire command at the grant's index; undefined if it could not be read back (counted). */
  requestId: string | undefined;
  incarnation: string | undefined;
  /** The worker's high-water mark after every free the harness saw before the grant (a lower bound of its floor). */
  floorMs: number;
}

interface Freed {
  type: 'released' | 'expired';
  highWaterMs: number;
}

export interface LedgerStats {
  grants: number;
  /** Grants whose acquire command could not be read back from the replica's log (requestId not checked). */
  unreadCommands: number;
  repliesChecked: number;
  leasesAccepted: number;
}

/** The acquire fields of a committed log entry (a Floe envelope around a lease command), if it is one. */
export function acquireOfEntry(e: Entry | undefined): { requestId: string; incarnation: string } | undefined {
  if (e === undefined || e.type !== 'normal' || e.data.length === 0) return undefined;
  try {
    const env = decodeEnvelope(e.data);
    if (env.kind !== 'app') return undefined;
    const c = unpack<Record<string, unknown>>(env.payload);
    if (c?.ns !== 'lease' || c.op !== 'acquire' || typeof c.requestId !== 'string') return undefined;
    return { requestId: c.requestId, incarnation: typeof c.incarnation === 'string' ? c.incarnation : '' };
  } catch {
    return undefined;
  }
}

export class LeaseLedger {
  private readonly grants = new Map<number, CommittedGrant>();
  private readonly freed = new Map<number, Freed>();
  /** app/worker → high-water mark after its frees so far. */
  private readonly hwFree = new Map<string, number>();
  /** process name → "requestId\0incarnation" of every acquire it sent. */
  private readonly sent = new Map<string, Set<string>>();
  readonly stats: LedgerStats = { grants: 0, unreadCommands: 0, repliesChecked: 0, leasesAccepted: 0 };

  /** A lease event applied on some replica; `entryAt` reads that replica's log (for a grant's command). */
  leaseEvent(e: LeaseEvent, entryAt: (index: number) => Entry | undefined): void {
    if (e.type === 'restored' || e.type === 'renewed') return;
    const w = `${e.app}/${e.workerId}`;
    if (e.type === 'granted') {
      if (this.grants.has(e.token)) return;
      const cmd = acquireOfEntry(entryAt(e.index));
      if (cmd === undefined) this.stats.unreadCommands++;
      this.stats.grants++;
      this.grants.set(e.token, {
        app: e.app,
        workerId: e.workerId,
        token: e.token,
        nodeId: e.nodeId,
        requestId: cmd?.requestId,
        incarnation: cmd?.incarnation,
        floorMs: this.hwFree.get(w) ?? 0,
      });
    } else {
      if (this.freed.has(e.token)) return;
      this.freed.set(e.token, { type: e.type, highWaterMs: e.highWaterMs });
      this.hwFree.set(w, Math.max(this.hwFree.get(w) ?? 0, e.highWaterMs));
    }
  }

  /** Process `proc` sends an acquire (its body, as JSON). */
  acquireSent(proc: string, body: string | undefined): void {
    let b: Record<string, unknown>;
    try {
      b = JSON.parse(body ?? '{}') as Record<string, unknown>;
    } catch {
      return;
    }
    if (typeof b.requestId !== 'string') return;
    let s = this.sent.get(proc);
    if (!s) this.sent.set(proc, (s = new Set()));
    s.add(`${b.requestId}\0${typeof b.incarnation === 'string' ? b.incarnation : ''}`);
  }

  grant(token: number): CommittedGrant | undefined {
    return this.grants.get(token);
  }

  /**
   * Whether a successful lease reply (op from the path) disagrees with what was committed; undefined when it agrees.
   * `app` and `workerId` come from the path, `req` and `res` are the parsed bodies.
   */
  replyMismatch(
    op: string,
    app: string,
    pathWorkerId: number | undefined,
    req: Record<string, unknown>,
    res: Record<string, unknown>,
  ): string | undefined {
    this.stats.repliesChecked++;
    const num = (v: unknown) => (typeof v === 'string' && v !== '' ? Number(v) : v);
    if (op === 'acquire') {
      const token = res.token as number;
      const g = this.grants.get(token);
      if (!g) return `token ${JSON.stringify(res.token)} was never committed as a grant`;
      const want: Record<string, unknown> = { app: g.app, workerId: g.workerId, nodeId: g.nodeId };
      if (g.requestId !== undefined) want.requestId = g.requestId;
      if (g.incarnation !== undefined) want.incarnation = g.incarnation;
      for (const [k, v] of Object.entries(want)) {
        if (res[k] !== v)
          return `${k} is ${JSON.stringify(res[k])}, the grant committed at token ${token} has ${JSON.stringify(v)}`;
      }
      if (!((res.highWaterMs as number) >= g.floorMs))
        return `highWaterMs ${JSON.stringify(res.highWaterMs)} is below the worker's committed mark ${g.floorMs} before token ${token}`;
      return undefined;
    }
    const token = num(req.token) as number;
    if (op === 'renew') {
      const g = this.grants.get(token);
      if (!g || g.app !== app || g.workerId !== pathWorkerId)
        return `token ${token} was never committed as a grant of ${app}/${pathWorkerId}`;
      if (res.token !== token) return `token is ${JSON.stringify(res.token)}, the request's is ${token}`;
      const asked = num(req.boundMs);
      if (typeof asked === 'number' && !((res.boundMs as number) >= asked))
        return `boundMs ${JSON.stringify(res.boundMs)} is below the bound ${asked} the request asked to commit`;
      return undefined;
    }
    if (op === 'release') {
      const g = this.grants.get(token);
      if (!g || g.app !== app || g.workerId !== pathWorkerId)
        return `token ${token} was never committed as a grant of ${app}/${pathWorkerId}`;
      const f = this.freed.get(token);
      if (!f)
        return `token ${token} of ${app}/${pathWorkerId} is answered as released, but no free of it is committed`;
      const last = num(req.lastTimestampMs);
      if (res.highWaterMs === undefined) {
        // RESP's WORKER.RELEASE answers a bare OK: the token's free must be committed (a release, or an expiry that a
        // late release is answered `alreadyReleased` for), its mark covering LAST (a holder never goes above its
        // committed bound, which the mark includes).
        if (typeof last === 'number' && !(f.highWaterMs >= last))
          return `the committed ${f.type === 'released' ? 'release' : 'expiry'} of token ${token} left mark ${f.highWaterMs}, below the request's LAST ${last}`;
        return undefined;
      }
      const mark = res.highWaterMs as number;
      if (typeof last === 'number' && !(mark >= last))
        return `highWaterMs ${mark} is below the request's lastTimestampMs ${last}`;
      if (res.alreadyReleased === false && (f.type !== 'released' || mark !== f.highWaterMs))
        return `a first release answered with mark ${mark}, but the committed free of token ${token} was ${f.type} at ${f.highWaterMs}`;
      if (!(mark >= f.highWaterMs)) return `highWaterMs ${mark} is below the committed mark ${f.highWaterMs}`;
      return undefined;
    }
    return undefined;
  }

  /**
   * Process `proc` took lease `token` from a reply (not from a cache): it must be a committed grant for one of its own
   * acquire requests. Undefined when it is.
   */
  accepted(proc: string, token: number): string | undefined {
    this.stats.leasesAccepted++;
    const g = this.grants.get(token);
    if (!g) return `${proc} took token ${token}, which was never committed as a grant`;
    if (g.requestId === undefined) return undefined;
    const mine = this.sent.get(proc)?.has(`${g.requestId}\0${g.incarnation ?? ''}`) ?? false;
    if (!mine)
      return `${proc} took token ${token} of ${g.app}/${g.workerId}, committed for requestId ${JSON.stringify(g.requestId)} incarnation ${JSON.stringify(g.incarnation)} (nodeId ${g.nodeId}), which ${proc} never sent`;
    return undefined;
  }
}
