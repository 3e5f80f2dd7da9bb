/**
 * Shares ReadIndex rounds between concurrent callers without weakening them.
 *
 * A caller may only be answered by a round that STARTED after it asked (a round started earlier
 * could confirm a leadership that was lost in between). So: a caller arriving while no round is
 * in flight starts one; callers arriving while one is in flight wait for the next round, which
 * starts as soon as the current one ends. With 100,000 holders renewing every few seconds this
 * turns tens of thousands of heartbeat rounds per second into about one per round trip.
 */
export class ReadCoalescer {
  private inFlight: Promise<void> | undefined;
  private inFlightStart = { at: Number.NEGATIVE_INFINITY, tag: undefined as unknown };
  /** The latest round that confirmed: when it started (on `now`) and the tag it was started under. */
  private confirmed = { at: Number.NEGATIVE_INFINITY, tag: undefined as unknown };
  private next: { promise: Promise<void>; resolve(): void; reject(err: unknown): void } | undefined;
  /** `rounds`: reads started; `waits`: confirm() calls; `reused`: answered by a round that started after `since`. */
  readonly stats = { rounds: 0, waits: 0, reused: 0 };

  constructor(
    private readonly read: () => Promise<void>,
    /** Monotonic ms; the same clock as the `since.at` callers pass. */
    private readonly now: () => number = () => performance.now(),
    /** Tag of a round, read when it starts (the sequence service: the Raft term). */
    private readonly tag: () => unknown = () => undefined,
  ) {}

  /**
   * Resolves after a read round that started after this call has confirmed leadership. With `since`, a round that
   * started at or after `since.at` (a time at or after the request's arrival, e.g. when the bytes that completed a
   * pipelined command were read) under the same tag also answers it, even one that already confirmed: a pipeline of
   * requests that arrived together shares one round, and each still has a round that began after it arrived.
   */
  confirm(since?: { at: number; tag?: unknown }): Promise<void> {
    this.stats.waits++;
    if (since !== undefined) {
      const tag = since.tag;
      if (this.confirmed.at >= since.at && this.confirmed.tag === tag) {
        this.stats.reused++;
        return Promise.resolve();
      }
      if (this.inFlight && this.inFlightStart.at >= since.at && this.inFlightStart.tag === tag) {
        this.stats.reused++;
        return this.inFlight;
      }
    }
    if (!this.inFlight) return this.start();
    if (!this.next) {
      let resolve!: () => void;
      let reject!: (err: unknown) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      this.next = { promise, resolve, reject };
    }
    return this.next.promise;
  }

  private start(): Promise<void> {
    this.stats.rounds++;
    const started = { at: this.now(), tag: this.tag() };
    let p: Promise<void>;
    try {
      p = this.read();
    } catch (err) {
      p = Promise.reject(err);
    }
    this.inFlight = p;
    this.inFlightStart = started;
    p.then(
      () => {
        if (started.at >= this.confirmed.at) this.confirmed = started;
      },
      () => {},
    );
    const done = () => {
      if (this.inFlight === p) this.inFlight = undefined;
      const waiting = this.next;
      this.next = undefined;
      if (waiting) this.start().then(waiting.resolve, waiting.reject);
    };
    p.then(done, done);
    return p;
  }
}
