/**
 * The timers the transport arms (reconnect backoff, handshake and snapshot timeouts, the keepalive
 * ticker, the grace period of a closing socket). Node's globals by default; a simulator passes its
 * virtual ones. A handle is whatever setTimeout/setInterval returned; unref() is called when present.
 */
export interface TimerHandle {
  unref?(): unknown;
}

export interface TransportTimers {
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle | undefined): void;
  setInterval(fn: () => void, ms: number): TimerHandle;
  clearInterval(handle: TimerHandle | undefined): void;
}

/** Node's global timers, looked up at each call (so test doubles installed later are used). */
export const defaultTimers: TransportTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout | undefined),
  setInterval: (fn, ms) => setInterval(fn, ms),
  clearInterval: (h) => clearInterval(h as NodeJS.Timeout | undefined),
};
