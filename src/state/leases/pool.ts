/**
 * One application's worker-ID pool: the records of every worker ID ever used, which of them are
 * leased, the order in which the free ones were freed, and who held each one last.
 *
 * Choice of worker ID for an acquire (all O(1) amortized, no scan of the pool):
 * 1. the ID this nodeId held last, if it is free (stable worker IDs for returning instances);
 * 2. else the lowest never-used ID (never-used IDs count as free since the beginning);
 * 3. else the ID that has been free the longest (smallest log index of its release/expiry),
 *    which gives a dead holder the most time to be really gone before its ID is reused.
 * Free records sit in an intrusive doubly linked list in the order they were freed; a returning
 * nodeId takes its record out of the middle in O(1).
 */
export class WorkerRecord {
  /** Highest timestamp any holder of this ID may have used (bounds, last timestamps). Never lowered. */
  highWaterMs = 0;
  /** Live: the holder. Free: the last holder, '' once that holder has moved to another ID. */
  nodeId = '';
  live = false;
  /** Live: the lease token. Free: the last token (0 = never granted). */
  token = 0;
  ttlMs = 0;
  grantedAtMs = 0;
  renewedAtMs = 0;
  /** The high-water mark at grant time: what the holder must start above. */
  floorMs = 0;
  requestId = '';
  /** The holder process's incarnation id ('' when the acquire carried none): a retry must come from it. */
  incarnation = '';
  /** Log index of the last release/expiry; 0 when never freed. */
  freedAt = 0;
  prevFree: WorkerRecord | null = null;
  nextFree: WorkerRecord | null = null;
  inFreeList = false;

  constructor(readonly workerId: number) {}
}

export class Pool {
  bits: number;
  datacenterBits: number;
  size: number;
  /** Every worker ID ever used, live or free (free ones keep their high-water mark forever). */
  readonly records = new Map<number, WorkerRecord>();
  /** nodeId -> the record it holds or held last. Invariant: byNode.get(r.nodeId) === r for r.nodeId !== ''. */
  readonly byNode = new Map<string, WorkerRecord>();
  private freeHead: WorkerRecord | null = null;
  private freeTail: WorkerRecord | null = null;
  /** Lowest ID that may never have been used; IDs below it all have records. */
  nextFresh = 0;
  leased = 0;
  /** The ID layout fingerprint the app is pinned to ('' until an acquire names one). */
  layout = '';

  constructor(
    readonly app: string,
    bits: number,
    datacenterBits: number,
  ) {
    this.bits = bits;
    this.datacenterBits = datacenterBits;
    this.size = 2 ** bits;
  }

  get workerBits(): number {
    return this.bits - this.datacenterBits;
  }

  datacenterOf(workerId: number): number {
    return Math.floor(workerId / 2 ** this.workerBits);
  }

  localWorkerOf(workerId: number): number {
    return workerId % 2 ** this.workerBits;
  }

  /** The live lease a nodeId holds in this pool, if any. */
  liveLeaseOf(nodeId: string): WorkerRecord | undefined {
    const r = this.byNode.get(nodeId);
    return r?.live ? r : undefined;
  }

  liveLease(workerId: number): WorkerRecord | undefined {
    const r = this.records.get(workerId);
    return r?.live ? r : undefined;
  }

  /** The record to grant to `nodeId`, or undefined when every ID is leased. Does not change state. */
  pick(nodeId: string): WorkerRecord | undefined {
    const last = this.byNode.get(nodeId);
    if (last && !last.live && last.workerId < this.size) return last;
    while (this.nextFresh < this.size && this.records.has(this.nextFresh)) this.nextFresh++;
    if (this.nextFresh < this.size) return new WorkerRecord(this.nextFresh);
    return this.freeHead ?? undefined;
  }

  grant(
    r: WorkerRecord,
    nodeId: string,
    token: number,
    ttlMs: number,
    requestId: string,
    incarnation: string,
    leaderTimeMs: number,
    boundMs: number | undefined,
  ): void {
    if (r.live) throw new Error(`worker ID ${r.workerId} of app ${this.app} is already leased`);
    if (!this.records.has(r.workerId)) this.records.set(r.workerId, r);
    this.unlinkFree(r);
    // Keep byNode one-to-one: the previous holder of r no longer gets it back, and nodeId's
    // previous record no longer names it.
    if (r.nodeId !== '' && r.nodeId !== nodeId && this.byNode.get(r.nodeId) === r)
      this.byNode.delete(r.nodeId);
    const prev = this.byNode.get(nodeId);
    if (prev && prev !== r) prev.nodeId = '';
    this.byNode.set(nodeId, r);
    r.nodeId = nodeId;
    r.live = true;
    r.token = token;
    r.ttlMs = ttlMs;
    r.requestId = requestId;
    r.incarnation = incarnation;
    r.grantedAtMs = leaderTimeMs;
    r.renewedAtMs = leaderTimeMs;
    r.floorMs = r.highWaterMs;
    if (boundMs !== undefined && boundMs > r.highWaterMs) r.highWaterMs = boundMs;
    this.leased++;
  }

  free(r: WorkerRecord, index: number): void {
    if (!r.live) return;
    r.live = false;
    r.freedAt = index;
    r.requestId = '';
    r.incarnation = '';
    this.leased--;
    if (r.workerId < this.size) this.appendFree(r);
  }

  /** Changes size/split. Only called with no live leases. Rebuilds the free list for the new range. */
  resize(bits: number, datacenterBits: number): void {
    this.bits = bits;
    this.datacenterBits = datacenterBits;
    this.size = 2 ** bits;
    const free: WorkerRecord[] = [];
    for (const r of this.records.values()) {
      this.unlinkFree(r);
      if (!r.live && r.workerId < this.size) free.push(r);
    }
    // Longest free first; equal indexes (one expire batch) by worker ID, so every replica agrees.
    free.sort((a, b) => a.freedAt - b.freedAt || a.workerId - b.workerId);
    for (const r of free) this.appendFree(r);
    this.nextFresh = 0;
  }

  /** Free records, longest free first. */
  *freeRecords(): Generator<WorkerRecord> {
    for (let r = this.freeHead; r; r = r.nextFree) yield r;
  }

  /** Rebuilds the free list from a saved order (snapshot restore). */
  restoreFreeOrder(order: readonly number[]): void {
    for (const id of order) {
      const r = this.records.get(id);
      if (!r || r.live || r.inFreeList) throw new Error(`snapshot free list names worker ID ${id} wrongly`);
      this.appendFree(r);
    }
  }

  private appendFree(r: WorkerRecord): void {
    if (r.inFreeList) return;
    r.inFreeList = true;
    r.prevFree = this.freeTail;
    r.nextFree = null;
    if (this.freeTail) this.freeTail.nextFree = r;
    else this.freeHead = r;
    this.freeTail = r;
  }

  private unlinkFree(r: WorkerRecord): void {
    if (!r.inFreeList) return;
    if (r.prevFree) r.prevFree.nextFree = r.nextFree;
    else this.freeHead = r.nextFree;
    if (r.nextFree) r.nextFree.prevFree = r.prevFree;
    else this.freeTail = r.prevFree;
    r.prevFree = null;
    r.nextFree = null;
    r.inFreeList = false;
  }
}
