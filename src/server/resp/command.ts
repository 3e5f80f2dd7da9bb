import type { RespBackend } from './backend.js';
import type { ProtocolVersion } from './encode.js';
import { errors } from './errors.js';
import type { RespLimits } from './limits.js';
import { parseStrictInt } from './parser.js';
import type { Reply } from './reply.js';
import type { Topology } from './topology.js';

/**
 * Command flags, named as Redis's COMMAND reply names them (plus Floe-internal ones in the comments).
 * - `write`: changes state; on a non-leader it is answered `-MOVED` (keyed) before the handler runs.
 * - `readonly`: reads state; keyed ones are answered `-MOVED` on a non-leader unless the client sent READONLY.
 * - `no_auth`: allowed before AUTH. `fast`, `admin`, `pubsub`, `loading`, `stale`, `noscript`: informational.
 */
export type CommandFlag =
  | 'write'
  | 'readonly'
  | 'admin'
  | 'no_auth'
  | 'fast'
  | 'pubsub'
  | 'loading'
  | 'stale'
  | 'noscript'
  | 'denyoom'
  | 'sentinel';

export type CommandHandler = (ctx: CommandContext, args: Buffer[]) => Reply | Promise<Reply>;

/**
 * One row of the command table. Adding a command is adding one of these (see `commands/index.ts`).
 * `arity` follows Redis: positive = exactly that many arguments including the name, negative = at least -arity.
 * Key positions (1-based argument indexes; 0 = no key) drive MOVED and COMMAND INFO / GETKEYS.
 */
export interface CommandSpec {
  /** Lower case, e.g. `worker.acquire`; for a subcommand just the subcommand (`setname`). */
  name: string;
  arity: number;
  flags: readonly CommandFlag[];
  firstKey: number;
  lastKey: number;
  step: number;
  /** COMMAND DOCS: group (`connection`, `server`, `cluster`, `sentinel`, `pubsub`, `floe`). */
  group: string;
  summary: string;
  since: string;
  complexity?: string;
  /** Present for commands that run; containers (CLIENT, CLUSTER, ...) have `subcommands` instead. */
  handler?: CommandHandler;
  subcommands?: ReadonlyMap<string, CommandSpec>;
  /** For subcommands: the container's name (`client`), making the full name `client|setname`. */
  container?: string;
  /**
   * A keyed command this member may serve itself in any role (no MOVED), e.g. INCR on a `node`-mode
   * sequence. Checked before the MOVED decision; must be cheap and synchronous.
   */
  servedLocally?: (backend: RespBackend, key: Buffer) => boolean;
  /**
   * Optional, for pipelines of one command (`INCR key` x 16): answers `n` copies of the command, byte for byte
   * identical and read right behind one that `handler` answered without an error, in one call: the replies of the
   * first k ≤ n of them in order, or undefined (or a throw) when it cannot; the others then run one by one. The
   * copies come from the same client with no command of its own in between, so what `dispatch` checked of the
   * first (arity, authentication, pub/sub context) holds for them; what may have changed while the first one was
   * awaited (the role, permissions) the function checks itself.
   */
  repeat?: (ctx: CommandContext, args: Buffer[], n: number) => Reply[] | undefined;
}

export type CommandSpecInput = Omit<CommandSpec, 'firstKey' | 'lastKey' | 'step' | 'since' | 'subcommands'> &
  Partial<Pick<CommandSpec, 'firstKey' | 'lastKey' | 'step' | 'since'>> & {
    subcommands?: readonly CommandSpecInput[];
  };

/** Build a table row with defaults (no keys, since 1.0.0). Subcommand arity counts the container name too. */
export function defineCommand(input: CommandSpecInput, container?: string): CommandSpec {
  const spec: CommandSpec = {
    ...input,
    name: input.name.toLowerCase(),
    firstKey: input.firstKey ?? 0,
    lastKey: input.lastKey ?? input.firstKey ?? 0,
    step: input.step ?? (input.firstKey ? 1 : 0),
    since: input.since ?? '1.0.0',
    subcommands: undefined,
    container,
  };
  if (input.subcommands) {
    const subs = new Map<string, CommandSpec>();
    for (const s of input.subcommands) subs.set(s.name.toLowerCase(), defineCommand(s, spec.name));
    spec.subcommands = subs;
  }
  return spec;
}

/** `client|setname` for subcommands, the name otherwise (Redis's fullname, used in arity errors). */
export function fullName(spec: CommandSpec): string {
  return spec.container ? `${spec.container}|${spec.name}` : spec.name;
}

/** Per-connection state a command may read or change. */
export interface Session {
  readonly id: number;
  proto: ProtocolVersion;
  /** CLIENT SETNAME / HELLO SETNAME; empty = none. */
  name: string;
  libName: string;
  libVer: string;
  /** The authenticated user, undefined before AUTH (or when auth is off and the client never sent AUTH). */
  user: string | undefined;
  authenticated: boolean;
  /** READONLY was sent: keyed read commands are served here even on a replica. */
  readonlyMode: boolean;
  readonly channels: Set<string>;
  readonly patterns: Set<string>;
  readonly remoteAddress: string;
  readonly localAddress: string;
  readonly createdAt: number;
  lastInteraction: number;
  /**
   * performance.now() when the server last read bytes from this client: at or after the arrival of every command
   * parsed so far (a strict sequence may answer a pipeline with one ReadIndex round started after it; decision 0004).
   */
  readonly arrivedAt?: number;
  lastCommand: string;
  /** Send this command's reply, then close the connection (QUIT). */
  closeAfterReply(): void;
  /** Queue an out-of-band message (pub/sub) after the replies already queued. */
  sendPush(r: Reply): void;
  /** Pub/sub subscription count changed: the connection adjusts its idle timer. */
  subscriptionsChanged(): void;
  /** Bytes waiting to be parsed / sent (CLIENT INFO). */
  queryBufferBytes(): number;
  outputBufferBytes(): number;
}

/** Counters every `stats()` and INFO show. */
export interface ServerCounters {
  totalConnections: number;
  rejectedConnections: number;
  totalCommands: number;
  protocolErrors: number;
  idleClosed: number;
  /** Clients closed by the output-buffer limits (`maxOutputHardBytes`, `outputStallTimeoutMs`). */
  outputLimitClosed: number;
  /** Clients closed because a request stayed incomplete past `requestTimeoutMs`. */
  requestTimeoutClosed: number;
  backpressurePauses: number;
  errorReplies: number;
}

/** Every counter at zero (a server starting). */
export function zeroServerCounters(): ServerCounters {
  return {
    totalConnections: 0,
    rejectedConnections: 0,
    totalCommands: 0,
    protocolErrors: 0,
    idleClosed: 0,
    outputLimitClosed: 0,
    requestTimeoutClosed: 0,
    backpressurePauses: 0,
    errorReplies: 0,
  };
}

/** Presentation options (see `RespServerOptions`). */
export interface PresentationOptions {
  mode: 'cluster' | 'standalone';
  sentinelName: string;
  floeVersion: string;
  redisVersion: string;
}

export interface ServerLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** Server-wide state shared by all connections. */
export interface ServerState {
  readonly backend: RespBackend;
  readonly limits: RespLimits;
  readonly options: PresentationOptions;
  readonly counters: ServerCounters;
  readonly startedAt: number;
  /** Random per process start, as Redis's run_id. */
  readonly runId: string;
  readonly logger: ServerLogger;
  readonly table: ReadonlyMap<string, CommandSpec>;
  /** This server's own advertised address. */
  selfAddr(): { host: string; port: number };
  topology(): Topology;
  sessions(): Iterable<Session>;
}

export interface CommandContext {
  readonly session: Session;
  readonly server: ServerState;
}

/** Argument as UTF-8 text. */
export function text(b: Buffer | undefined): string {
  return b === undefined ? '' : b.toString('utf8');
}

/** Argument as lower-case text (option and subcommand names). */
export function lower(b: Buffer | undefined): string {
  return b === undefined ? '' : b.toString('latin1').toLowerCase();
}

/** A safe integer written as Redis's string2ll accepts it; else `-ERR value is not an integer or out of range`. */
export function integerArg(b: Buffer | undefined): number {
  const v = b === undefined ? undefined : parseStrictInt(b, 0, b.length);
  if (v === undefined || !Number.isSafeInteger(v)) throw errors.notInteger();
  return v;
}

/** A non-negative integer up to 2^63-1 as a bigint (fencing tokens); else `-ERR value is not an integer or out of range`. */
export function tokenArg(b: Buffer | undefined): bigint | number {
  const s = b === undefined ? '' : b.toString('latin1');
  if (!/^(?:0|[1-9][0-9]{0,18})$/.test(s)) throw errors.notInteger();
  const v = BigInt(s);
  if (v > 0x7fffffffffffffffn) throw errors.notInteger();
  return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}
