/**
 * Strategies decide how IDs are made; plugins wrap the making (seed 004's two layers).
 *
 * A strategy is registered per business type (seed 004's bizType: "order-no", "user-id", ...).
 * Plugins are registered on one or more business types (many-to-many) and run in `order` (lower
 * first) around every generation: `before` (returning false rejects the request), `after` (may
 * replace the value, e.g. obfuscation), `error` (called when this plugin's own hook threw).
 */

/** What a generation is about; plugins may read it and keep their own data in `attributes`. */
export interface GenerateContext {
  bizType: string;
  /** How many values were asked for (1 for `generate`). */
  count: number;
  /** Free-form per-request data shared by the plugins of one generation. */
  attributes: Record<string, unknown>;
}

/** How IDs of one business type are made. `generate` may be synchronous (the fast path) or not. */
export interface IdStrategy<T = bigint> {
  /** Short name for errors and metrics (`snowflake`, `sequence`, ...). */
  readonly name: string;
  /** Called once, before the first generation (e.g. to lease a worker ID). */
  init?(): void | Promise<void>;
  generate(ctx: GenerateContext): T | Promise<T>;
  /** `ctx.count` values at once; default: `generate` that many times. */
  generateBatch?(ctx: GenerateContext): T[] | Promise<T[]>;
}

export interface IdPlugin<T = unknown> {
  readonly name: string;
  /** Lower runs first. Default 0; ties keep registration order. */
  readonly order?: number;
  /** Return false to reject the request (the chain stops; the rejected handler is called). */
  // biome-ignore lint/suspicious/noConfusingVoidType: a hook may return nothing
  before?(ctx: GenerateContext): boolean | undefined | void;
  /** Sees every value made; may return a replacement (the next plugin sees that). */
  // biome-ignore lint/suspicious/noConfusingVoidType: a hook may return nothing
  after?(ctx: GenerateContext, value: T): T | undefined | void;
  /**
   * Called once per business type the plugin is registered on, with the generator (summarising
   * plugins read `generator.takeTally(bizType)` on their own schedule instead of a per-ID hook).
   */
  attached?(
    generator: { takeTally(bizType: string): { count: number; first: unknown; last: unknown } | undefined },
    bizType: string,
  ): void;
  /** Called with this plugin's own exception; generation goes on as if the hook had not run. */
  error?(ctx: GenerateContext, err: unknown, hook: 'before' | 'after'): void;
}

/** A request refused: by a strategy (it threw) or by a plugin's `before`. */
export class IdRejectedError extends Error {
  constructor(
    readonly bizType: string,
    readonly by: string,
    message: string,
    override readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'IdRejectedError';
  }
}

/** Called when a request is refused; the default logs and throws the IdRejectedError. */
export type RejectedHandler = (err: IdRejectedError, ctx: GenerateContext) => void;
