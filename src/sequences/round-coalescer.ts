/**
 * Shares ReadIndex rounds between the sequence service's requests, with rounds overlapping (decision 0004).
 *
 * The rule is the ReadCoalescer's (src/lease/read-coalescer.ts): a request is answered only by a round that STARTED
 * after it arrived, under the same tag (the Raft term). What differs is when rounds start. The lease coalescer keeps
 * one round in flight, so a request that arrives just after a round started waits for the rest of that round and
 * then a whole new one (1.5 round trips on average). Here up to `maxInFlight` rounds run at once: requests that
 * find no usable round join the next round, which starts at the end of the current turn of the event loop (every
 * request read in this turn shares it) when fewer than `maxInFlight` rounds are in flight, or else as soon as one
 * ends. Raft's ReadIndex allows overlapping rounds: each confirms leadership with a quorum's answer to a heartbeat
 * sent after it began, whatever other rounds do.
 */
export class RoundCoalescer {
  /** Rounds in flight, oldest first: when each started (on `now`), under which tag, and its outcome. */
  private readonly inFlight: Array<{ at: number; tag: unknown; promise: Promise<void> }> = [];
  /** The latest start of a round that confirmed, and its tag. */
  private confirmed = { at: Number.NEGATIVE_INFINITY, tag: undefined as unknown };
  /** The round requests are waiting to start: it starts at the end of this turn, or when a round ends. */
  private next: { promise: Promise<void>; resolve(): void; reject(err: unknown): void } | undefined;
  private startScheduled = false;
  /**
   * `rounds`: rounds started; `waits`: confirm() calls; `reused`: answered by a round already started or done;
   * `leased`: answered by the leader lease, with no round (decision 0009).
   */
  readonly stats = { rounds: 0, waits: 0, reused: 0, leased: 0 };

  constructor(
    private readonly read: () => Promise<void>,
    /** Monotonic ms; the same clock as the `since.at` callers pass. */
    private readonly now: () => number = () => performance.now(),
    /** Tag of a round, read when it starts (the Raft term). */
    private readonly tag: () => unknown = () => undefined,
    /** Rounds in flight at once (at least 1). */
    private readonly maxInFlight = 2,
    /**
     * Whether a leader lease under this tag holds now (decision 0009): no other leader exists at this instant, which
     * is all a round that starts after the request arrived proves. Absent: rounds only.
     */
    private readonly lease?: (tag: unknown) => boolean,
  ) {
    if (!(Number.isInteger(maxInFlight) && maxInFlight >= 1))
      throw new Error(`maxInFlight must be an integer >= 1, got ${maxInFlight}`);
  }

  /** True when a round that started at or after `since.at` under `since.tag` has already confirmed. */
  confirmedSince(since: { at: number; tag?: unknown }): boolean {
    return this.confirmedAtOrAfter(since.at, since.tag);
  }

  /** `confirmedSince({ at, tag })` without the object (the synchronous fast path calls it per command). */
  confirmedAtOrAfter(at: number, tag: unknown): boolean {
    if (this.confirmed.at >= at && this.confirmed.tag === tag) {
      this.stats.waits++;
      this.stats.reused++;
      return true;
    }
    if (this.lease?.(tag)) {
      this.stats.waits++;
      this.stats.leased++;
      return true;
    }
    return false;
  }

  /**
   * Resolves after a round that started after this call has confirmed leadership. With `since`, a round that started
   * at or after `since.at` (at or after the request arrived) under the tag `since.tag` also answers it, even one that
   * already confirmed.
   */
  confirm(since?: { at: number; tag?: unknown }): Promise<void> {
    this.stats.waits++;
    if (this.lease?.(since === undefined ? this.tag() : since.tag)) {
      this.stats.leased++;
      return Promise.resolve();
    }
    if (since !== undefined) {
      const tag = since.tag;
      if (this.confirmed.at >= since.at && this.confirmed.tag === tag) {
        this.stats.reused++;
        return Promise.resolve();
      }
      // The newest round in flight is the likeliest to have started after the arrival.
      for (let i = this.inFlight.length - 1; i >= 0; i--) {
        const r = this.inFlight[i]!;
        if (r.at < since.at) break;
        if (r.tag === tag) {
          this.stats.reused++;
          return r.promise;
        }
      }
    }
    if (!this.next) {
      let resolve!: () => void;
      let reject!: (err: unknown) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      this.next = { promise, resolve, reject };
    }
    if (this.inFlight.length < this.maxInFlight && !this.startScheduled) {
      this.startScheduled = true;
      setImmediate(this.startScheduledRound);
    }
    return this.next.promise;
  }

  private readonly startScheduledRound = (): void => {
    this.startScheduled = false;
    if (this.inFlight.length < this.maxInFlight) this.startNext();
  };

  /** Starts the waiting round (if any). Its start is read now: after every request waiting for it arrived. */
  private startNext(): void {
    const waiting = this.next;
    if (!waiting) return;
    this.next = undefined;
    this.stats.rounds++;
    const round = { at: this.now(), tag: this.tag(), promise: undefined as unknown as Promise<void> };
    let p: Promise<void>;
    try {
      p = this.read();
    } catch (err) {
      p = Promise.reject(err);
    }
    round.promise = p;
    this.inFlight.push(round);
    const done = (ok: boolean) => {
      if (ok && round.at >= this.confirmed.at) this.confirmed = { at: round.at, tag: round.tag };
      const i = this.inFlight.indexOf(round);
      if (i >= 0) this.inFlight.splice(i, 1);
      if (this.next && !this.startScheduled) this.startNext();
    };
    p.then(
      () => done(true),
      () => done(false),
    );
    p.then(waiting.resolve, waiting.reject);
  }
}
