import { Counter, type Registry } from 'prom-client';
import { IdPermutation, type PermutationOptions } from '../id/permutation.js';
import { ShortCodec, type ShortCodecOptions } from '../id/short-codec.js';
import type { GenerateContext, IdPlugin } from './types.js';

/** Counts IDs per business type: `floe_ids_generated_total{biz_type}` (rate() gives IDs/s). */
export function metricsPlugin<T = bigint>(registry: Registry, order = 100): IdPlugin<T> {
  const existing = registry.getSingleMetric('floe_ids_generated_total') as Counter<'biz_type'> | undefined;
  const counter =
    existing ??
    new Counter({
      name: 'floe_ids_generated_total',
      help: 'IDs generated, per business type',
      labelNames: ['biz_type'],
      registers: [registry],
    });
  return {
    name: 'metrics',
    order,
    after: (ctx) => {
      counter.inc({ biz_type: ctx.bizType });
    },
  };
}

/**
 * Replaces each ID with its image under a keyed permutation of 63-bit values (src/id): unique in,
 * unique out, without visible order. `decode` gives the original ID back.
 */
export function permutationPlugin(
  options: PermutationOptions,
  order = 50,
): IdPlugin<bigint> & { decode(v: bigint): bigint } {
  const p = new IdPermutation(options);
  return {
    name: 'permutation',
    order,
    after: (_ctx, v) => p.encode(v),
    decode: (v) => p.decode(v),
  };
}

/** Turns each bigint ID into a short code (src/id ShortCodec); `decode` gives the ID back. */
export function shortCodePlugin(
  options: ShortCodecOptions = {},
  order = 60,
): IdPlugin<bigint | string> & { decode(code: string): bigint } {
  const c = new ShortCodec(options);
  return {
    name: 'short-code',
    order,
    after: (_ctx, v) => (typeof v === 'bigint' ? c.encode(v) : v),
    decode: (code) => c.decode(code),
  };
}

/** Where audit events go (the audit trail's `record`: synchronous, never blocks, never throws). */
export interface AuditSink {
  record(event: Record<string, unknown>): void;
}

export interface AuditPluginOptions {
  /** Summaries are emitted at this interval (ms). Default 1,000. */
  intervalMs?: number;
  /** One event per ID instead of summaries (opt-in: costly). */
  perId?: boolean;
  /** Who issues (e.g. `{app, workerId, token}` of the lease); added to every event. */
  source?: () => Record<string, unknown>;
  order?: number;
}

/**
 * Records issuance for the audit trail: per business type, a summary (first, last, count) every
 * interval, read from the generator's tally (no per-ID hook, so it costs the ID path nothing but
 * the tally's two field writes); or, with `perId`, one event per ID. Never awaits the sink. `stop()`
 * flushes what is left.
 */
export function auditPlugin<T = bigint>(
  sink: AuditSink,
  o: AuditPluginOptions = {},
): IdPlugin<T> & { flush(): void; stop(): void } {
  const sources: {
    gen: { takeTally(b: string): { count: number; first: unknown; last: unknown } | undefined };
    bizType: string;
    sinceMs: number;
  }[] = [];
  const flush = () => {
    const now = Date.now();
    for (const src of sources) {
      const t = src.gen.takeTally(src.bizType);
      if (!t) continue;
      sink.record({
        type: 'issued',
        bizType: src.bizType,
        first: String(t.first),
        last: String(t.last),
        count: t.count,
        fromMs: src.sinceMs,
        toMs: now,
        ...o.source?.(),
      });
      src.sinceMs = now;
    }
  };
  const timer = setInterval(flush, o.intervalMs ?? 1000);
  timer.unref();
  const plugin: IdPlugin<T> & { flush(): void; stop(): void } = {
    name: 'audit',
    order: o.order ?? 1000, // last: it sees the final value
    attached: (gen, bizType) => {
      if (!o.perId) sources.push({ gen, bizType, sinceMs: Date.now() });
    },
    flush,
    stop: () => {
      clearInterval(timer);
      flush();
    },
  };
  if (o.perId)
    plugin.after = (ctx: GenerateContext, v: T) => {
      const now = Date.now();
      sink.record({
        type: 'issued',
        bizType: ctx.bizType,
        first: String(v),
        last: String(v),
        count: 1,
        fromMs: now,
        toMs: now,
        ...o.source?.(),
      });
    };
  return plugin;
}
