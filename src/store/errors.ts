/**
 * The lease store (etcd) could not be reached, or did not answer in time, before anything was
 * written: nothing changed, the caller may retry. Servers answer HTTP 503 `store_unavailable` and
 * RESP `-TRYAGAIN`; they never guess an answer.
 */
export class StoreUnavailableError extends Error {
  constructor(
    readonly endpoints: readonly string[],
    what: string,
    cause: unknown,
  ) {
    super(
      `etcd unreachable at ${endpoints.join(',')} while ${what}: ${cause instanceof Error ? cause.message : String(cause)}; ` +
        `nothing was written, retry later`,
    );
    this.name = 'StoreUnavailableError';
  }
}
