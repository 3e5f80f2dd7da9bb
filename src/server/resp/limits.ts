/**
 * Every bound the RESP server keeps, so that no input can make it use unbounded memory.
 * Per client, memory is at most about `maxRequestBytes + readHighWaterBytes` of input plus
 * `maxOutputBytes` + one reply of output; with `maxClients` clients that bounds the whole server.
 */
export interface RespLimits {
  /** Largest bulk-string argument, in bytes. Default 512 KiB (Floe has no large values); 1 .. 512 MiB. */
  maxBulkBytes: number;
  /** Most arguments in one command, the command name included. Default 1024; 1 .. 1,048,576. */
  maxArgs: number;
  /** Largest single request (all bytes of one command). Default 1 MiB; at least `maxBulkBytes`, at most 1 GiB. */
  maxRequestBytes: number;
  /** Longest inline (telnet-style) command line. Default 64 KiB (Redis's PROTO_INLINE_MAX_SIZE); 16 .. 16 MiB. */
  maxInlineBytes: number;
  /** Most clients connected at once; one more gets `-ERR max number of clients reached`. Default 10,000; 1 .. 1,000,000. */
  maxClients: number;
  /**
   * Most clients connected at once from one IP address; one more gets
   * `-ERR max number of clients per address reached`. Default 1,000; 1 .. 1,000,000.
   */
  maxClientsPerAddress: number;
  /**
   * Close a client that sent nothing for this many ms; 0 = never (Redis's `timeout 0`). Default 0; `floe serve`
   * uses 300,000 (5 min; Redis clients reconnect on their own). 0 .. 2^31-1.
   * Like Redis, clients in pub/sub mode and clients waiting for a reply are never closed as idle.
   */
  idleTimeoutMs: number;
  /**
   * Stop executing a client's commands and reading its socket while more than this many reply bytes wait to be
   * sent to it (a slow reader); resume when the socket drains. Default 1 MiB; 1 KiB .. 1 GiB.
   */
  maxOutputBytes: number;
  /**
   * Redis's `client-output-buffer-limit` hard limit: a client with more than this many reply bytes waiting to be
   * sent (pushes it never reads, or one huge reply) is disconnected with a warning in the log. Default 32 MiB;
   * maxOutputBytes .. 2 GiB.
   */
  maxOutputHardBytes: number;
  /**
   * A client that has not read its replies for this many ms while paused for output (it reads nothing, so its
   * buffer never drains) is disconnected with a warning in the log. Default 60,000; 0 = never; 0 .. 2^31-1.
   */
  outputStallTimeoutMs: number;
  /**
   * A request that has started but is still incomplete this many ms later (a client sending a command byte by
   * byte: slowloris) gets `-ERR request not completed within N ms` and is closed. Default 30,000; 0 = never;
   * 0 .. 2^31-1.
   */
  requestTimeoutMs: number;
  /** Stop reading a client's socket while more than this many received bytes wait to be parsed. Default 64 KiB; 1 KiB .. 64 MiB. */
  readHighWaterBytes: number;
  /** Before a client authenticates (when auth is required): most arguments per command. Default 10 (as Redis); 1 .. maxArgs. */
  unauthenticatedMaxArgs: number;
  /** Before a client authenticates: largest bulk argument. Default 16 KiB (as Redis); 1 .. maxBulkBytes. */
  unauthenticatedMaxBulkBytes: number;
  /**
   * After a protocol error, QUIT or a refused connection, the server sends its reply, half-closes, and destroys the
   * socket this many ms later if the client has not closed it. Default 2000; 0 .. 60,000.
   */
  closeGraceMs: number;
}

export const DEFAULT_LIMITS: Readonly<RespLimits> = Object.freeze({
  maxBulkBytes: 512 * 1024,
  maxArgs: 1024,
  maxRequestBytes: 1024 * 1024,
  maxInlineBytes: 64 * 1024,
  maxClients: 10_000,
  maxClientsPerAddress: 1000,
  idleTimeoutMs: 0,
  maxOutputBytes: 1024 * 1024,
  maxOutputHardBytes: 32 * 1024 * 1024,
  outputStallTimeoutMs: 60_000,
  requestTimeoutMs: 30_000,
  readHighWaterBytes: 64 * 1024,
  unauthenticatedMaxArgs: 10,
  unauthenticatedMaxBulkBytes: 16 * 1024,
  closeGraceMs: 2000,
});

/** A server option is outside its allowed range. */
export class RespOptionError extends Error {
  constructor(
    readonly field: string,
    readonly allowed: string,
    readonly value: unknown,
  ) {
    super(`invalid RESP server option: ${field} = ${String(value)}; allowed: ${allowed}`);
    this.name = 'RespOptionError';
  }
}

/** Fill in defaults and check every limit; throws `RespOptionError` naming the field and its range. */
export function resolveLimits(partial: Partial<RespLimits> = {}): RespLimits {
  const l: RespLimits = { ...DEFAULT_LIMITS };
  for (const [k, v] of Object.entries(partial)) {
    if (v === undefined) continue;
    if (!(k in DEFAULT_LIMITS)) throw new RespOptionError(`limits.${k}`, 'a known limit name', v);
    (l as unknown as Record<string, number>)[k] = v as number;
  }
  // A pause threshold above the default hard limit raises the hard limit with it unless one is given.
  if (partial.maxOutputHardBytes === undefined && typeof l.maxOutputBytes === 'number')
    l.maxOutputHardBytes = Math.max(DEFAULT_LIMITS.maxOutputHardBytes, l.maxOutputBytes);
  const check = (field: keyof RespLimits, min: number, max: number, minText = String(min)): void => {
    const v = l[field];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      throw new RespOptionError(`limits.${field}`, `an integer in [${minText}, ${max}]`, v);
    }
  };
  const MiB = 1024 * 1024;
  check('maxBulkBytes', 1, 512 * MiB);
  check('maxArgs', 1, 1024 * 1024);
  check('maxRequestBytes', l.maxBulkBytes, 1024 * MiB, `maxBulkBytes (${l.maxBulkBytes})`);
  check('maxInlineBytes', 16, 16 * MiB);
  check('maxClients', 1, 1_000_000);
  check('maxClientsPerAddress', 1, 1_000_000);
  check('idleTimeoutMs', 0, 2 ** 31 - 1);
  check('maxOutputBytes', 1024, 1024 * MiB);
  check('maxOutputHardBytes', l.maxOutputBytes, 2048 * MiB, `maxOutputBytes (${l.maxOutputBytes})`);
  check('outputStallTimeoutMs', 0, 2 ** 31 - 1);
  check('requestTimeoutMs', 0, 2 ** 31 - 1);
  check('readHighWaterBytes', 1024, 64 * MiB);
  check('unauthenticatedMaxArgs', 1, l.maxArgs);
  check('unauthenticatedMaxBulkBytes', 1, l.maxBulkBytes);
  check('closeGraceMs', 0, 60_000);
  return l;
}
