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
  private next: { promise: Promise<void>; resolve(): void; reject(err: unknown): void } | undefined;
  /** `rounds`: reads started; `waits`: confirm() calls. */
  readonly stats = { rounds: 0, waits: 0 };

  constructor(private readonly read: () => Promise<void>) {}

  /** Resolves after a read round that started after this call has confirmed leadership. */
  confirm(): Promise<void> {
    this.stats.waits++;
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
    let p: Promise<void>;
    try {
      p = this.read();
    } catch (err) {
      p = Promise.reject(err);
    }
    this.inFlight = p;
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
