import {
  type GenerateContext,
  type IdPlugin,
  IdRejectedError,
  type IdStrategy,
  type RejectedHandler,
} from './types.js';

export interface IdGeneratorOptions {
  /** Called on every refusal; default: log with `logger` and throw the IdRejectedError. */
  onRejected?: RejectedHandler;
  logger?: { warn(obj: unknown, msg?: string): void };
  /** Called when a plugin's own error hook throws too (counted either way). */
  onPluginFailure?: (plugin: string, err: unknown) => void;
}

/** Values handed out for one business type over a period. */
export interface Tally<T> {
  count: number;
  first: T | undefined;
  last: T | undefined;
}

interface Registration<T> {
  strategy: IdStrategy<T>;
  plugins: IdPlugin<T>[];
  /** The plugins with a `before` / `after` hook, in order (kept apart for the hot path). */
  befores: IdPlugin<T>[];
  afters: IdPlugin<T>[];
  /** Values handed out since the last `takeTally` (for summarising plugins such as audit). */
  tally: Tally<T>;
  ready: Promise<void> | undefined;
  initialised: boolean;
}

/**
 * Business types → strategies, with plugins around them (seed 004's strategy and plugin layers).
 * The same object works in the SDK (strategies over a leased worker ID or an in-process sequence)
 * and on a node (strategies over the node's sequence and Snowflake services). See docs/strategies.md.
 *
 * Fast path: `generateSync` runs a synchronous strategy and synchronous plugins with no promise;
 * `generate` works with anything.
 */
export class IdGenerator<T = bigint> {
  private readonly types = new Map<string, Registration<T>>();
  private readonly onRejected: RejectedHandler;
  private pluginSeq = 0;
  private readonly pluginRank = new WeakMap<IdPlugin<T>, number>();
  /** Plugin hook exceptions, by plugin name (never part of a generation's outcome). */
  readonly pluginFailures = new Map<string, number>();

  constructor(private readonly o: IdGeneratorOptions = {}) {
    this.onRejected =
      o.onRejected ??
      ((err) => {
        o.logger?.warn({ bizType: err.bizType, by: err.by, err: err.message }, 'ID request rejected');
        throw err;
      });
  }

  /** Registers (or replaces) the strategy of `bizType`; its plugins stay. */
  register(bizType: string, strategy: IdStrategy<T>): this {
    if (typeof bizType !== 'string' || bizType.length === 0)
      throw new TypeError('bizType must be a non-empty string');
    const plugins = this.types.get(bizType)?.plugins ?? [];
    this.types.set(bizType, {
      strategy,
      plugins,
      befores: plugins.filter((p) => p.before),
      afters: plugins.filter((p) => p.after),
      tally: { count: 0, first: undefined, last: undefined },
      ready: undefined,
      initialised: !strategy.init,
    });
    return this;
  }

  /** Registers `plugin` on each business type named (many-to-many); they must be registered first. */
  use(plugin: IdPlugin<T>, ...bizTypes: string[]): this {
    if (bizTypes.length === 0) throw new TypeError(`plugin ${plugin.name}: name at least one business type`);
    if (!this.pluginRank.has(plugin)) this.pluginRank.set(plugin, this.pluginSeq++);
    for (const b of bizTypes) {
      const r = this.types.get(b);
      if (!r)
        throw new TypeError(
          `plugin ${plugin.name}: no strategy is registered for business type ${JSON.stringify(b)}`,
        );
      if (r.plugins.includes(plugin)) continue;
      r.plugins.push(plugin);
      r.plugins.sort(
        (a, c) => (a.order ?? 0) - (c.order ?? 0) || this.pluginRank.get(a)! - this.pluginRank.get(c)!,
      );
      r.befores = r.plugins.filter((x) => x.before);
      r.afters = r.plugins.filter((x) => x.after);
      plugin.attached?.(this as unknown as IdGenerator<unknown>, b);
    }
    return this;
  }

  /**
   * What was handed out for `bizType` since the last call (first value, last value, count), and
   * starts a new tally. Kept inline on every generation at the cost of two field writes, so a
   * summarising plugin (audit) needs no per-ID hook.
   */
  takeTally(bizType: string): Tally<T> | undefined {
    const r = this.types.get(bizType);
    if (!r || r.tally.count === 0) return undefined;
    const t = r.tally;
    r.tally = { count: 0, first: undefined, last: undefined };
    return t;
  }

  /** The business types and their strategy and plugin names, for status pages. */
  describe(): { bizType: string; strategy: string; plugins: string[] }[] {
    return [...this.types].map(([bizType, r]) => ({
      bizType,
      strategy: r.strategy.name,
      plugins: r.plugins.map((p) => p.name),
    }));
  }

  /** One value of `bizType`. */
  async generate(bizType: string, attributes: Record<string, unknown> = {}): Promise<T> {
    const r = this.registration(bizType);
    const ctx: GenerateContext = { bizType, count: 1, attributes };
    const refusedBy = this.runBefore(r, ctx);
    if (refusedBy !== undefined) return this.rejectedBy(ctx, refusedBy);
    if (!r.initialised) await this.init(bizType, r);
    let value: T;
    try {
      value = await r.strategy.generate(ctx);
    } catch (err) {
      return this.reject(ctx, r.strategy.name, err);
    }
    return this.runAfter(r, ctx, value);
  }

  /** `count` values of `bizType`. */
  async generateBatch(
    bizType: string,
    count: number,
    attributes: Record<string, unknown> = {},
  ): Promise<T[]> {
    if (!Number.isSafeInteger(count) || count < 1)
      throw new RangeError(`count must be a positive integer, got ${count}`);
    const r = this.registration(bizType);
    const ctx: GenerateContext = { bizType, count, attributes };
    const refusedBy = this.runBefore(r, ctx);
    if (refusedBy !== undefined) return this.rejectedBy(ctx, refusedBy);
    if (!r.initialised) await this.init(bizType, r);
    let values: T[];
    try {
      if (r.strategy.generateBatch) values = await r.strategy.generateBatch(ctx);
      else {
        values = [];
        for (let i = 0; i < count; i++) values.push(await r.strategy.generate(ctx));
      }
    } catch (err) {
      return this.reject(ctx, r.strategy.name, err);
    }
    return values.map((v) => this.runAfter(r, ctx, v));
  }

  /**
   * One value without a promise: the strategy must be initialised (call `init`) and synchronous;
   * a strategy that answers with a promise is an error here (use `generate`).
   */
  generateSync(bizType: string, attributes: Record<string, unknown> = {}): T {
    const r = this.registration(bizType);
    const ctx: GenerateContext = { bizType, count: 1, attributes };
    const refusedBy = this.runBefore(r, ctx);
    if (refusedBy !== undefined) return this.rejectedBy(ctx, refusedBy);
    if (!r.initialised)
      throw new TypeError(`strategy of ${JSON.stringify(bizType)} is not initialised: await init() first`);
    let value: T | Promise<T>;
    try {
      value = r.strategy.generate(ctx);
    } catch (err) {
      return this.reject(ctx, r.strategy.name, err);
    }
    if (value instanceof Promise) {
      value.catch(() => {});
      throw new TypeError(
        `strategy ${r.strategy.name} of ${JSON.stringify(bizType)} is asynchronous: use generate()`,
      );
    }
    return this.runAfter(r, ctx, value);
  }

  /** Initialises the strategy of `bizType` (or of every type) ahead of the first request. */
  async init(bizType?: string, r?: Registration<T>): Promise<void> {
    if (bizType === undefined) {
      await Promise.all([...this.types.keys()].map((b) => this.init(b)));
      return;
    }
    const reg = r ?? this.registration(bizType);
    if (reg.initialised) return;
    reg.ready ??= Promise.resolve(reg.strategy.init?.()).then(
      () => {
        reg.initialised = true;
      },
      (err: unknown) => {
        reg.ready = undefined; // the next request tries again
        throw err;
      },
    );
    await reg.ready;
  }

  private registration(bizType: string): Registration<T> {
    const r = this.types.get(bizType);
    if (!r) {
      const err = new IdRejectedError(
        bizType,
        'registry',
        `no strategy is registered for business type ${JSON.stringify(bizType)}`,
      );
      this.onRejected(err, { bizType, count: 0, attributes: {} });
      throw err;
    }
    return r;
  }

  /** Runs the `before` hooks in order; the name of the plugin that rejected, if one did. */
  private runBefore(r: Registration<T>, ctx: GenerateContext): string | undefined {
    const list = r.befores;
    for (let i = 0; i < list.length; i++) {
      const p = list[i]!;
      // biome-ignore lint/suspicious/noConfusingVoidType: a hook may return nothing
      let ok: boolean | undefined | void;
      try {
        ok = p.before!(ctx);
      } catch (err) {
        this.pluginFailed(p, ctx, err, 'before');
        continue;
      }
      if (ok === false) return p.name;
    }
    return undefined;
  }

  private runAfter(r: Registration<T>, ctx: GenerateContext, value: T): T {
    const list = r.afters;
    let v = value;
    if (list.length === 0) return this.tallied(r.tally, v);
    for (let i = 0; i < list.length; i++) {
      const p = list[i]!;
      try {
        const out = p.after!(ctx, v);
        if (out !== undefined) v = out as T;
      } catch (err) {
        this.pluginFailed(p, ctx, err, 'after');
      }
    }
    return this.tallied(r.tally, v);
  }

  private tallied(t: Tally<T>, v: T): T {
    if (t.count++ === 0) t.first = v;
    t.last = v;
    return v;
  }

  private pluginFailed(p: IdPlugin<T>, ctx: GenerateContext, err: unknown, hook: 'before' | 'after'): void {
    this.pluginFailures.set(p.name, (this.pluginFailures.get(p.name) ?? 0) + 1);
    try {
      p.error?.(ctx, err, hook);
    } catch (again) {
      this.o.onPluginFailure?.(p.name, again);
    }
  }

  private rejectedBy(ctx: GenerateContext, by: string): never {
    const err = new IdRejectedError(
      ctx.bizType,
      by,
      `plugin ${by} rejected the request for ${JSON.stringify(ctx.bizType)}`,
    );
    this.onRejected(err, ctx);
    throw err;
  }

  private reject(ctx: GenerateContext, by: string, cause: unknown): never {
    const msg = cause instanceof Error ? cause.message : String(cause);
    const err = new IdRejectedError(
      ctx.bizType,
      by,
      `strategy ${by} refused ${JSON.stringify(ctx.bizType)}: ${msg}`,
      cause,
    );
    this.onRejected(err, ctx);
    throw err;
  }
}
