import type { FloeSequence } from '../client/sequence.js';
import type { Snowflake } from '../id/snowflake.js';
import type { SequenceService } from '../sequences/sequence-service.js';
import type { SnowflakeService } from '../snowflakes/snowflake-service.js';
import type { GenerateContext, IdStrategy } from './types.js';

/**
 * Snowflake IDs from a generator, normally a leased one (`lease.snowflake(...)` in the SDK): the
 * lease's floor, ceiling and deadline apply. Synchronous: usable with `generateSync`.
 */
export function snowflakeStrategy(gen: Snowflake, name = 'snowflake'): IdStrategy<bigint> {
  return {
    name,
    generate: () => gen.next(),
    generateBatch: (ctx) => Array.from(gen.nextBatch(ctx.count)),
  };
}

/** Values of a sequence served in-process (`client.sequence(key)` in the SDK). */
export function clientSequenceStrategy(seq: FloeSequence, name = 'sequence'): IdStrategy<bigint> {
  return {
    name,
    generate: async () => BigInt(await seq.next()),
    generateBatch: async (ctx) => (await seq.nextBatch(ctx.count)).map(BigInt),
  };
}

/** On a node: values of the sequence `key` from the node's SequenceService (strict or node mode). */
export function nodeSequenceStrategy(
  svc: SequenceService,
  key: string,
  name = 'sequence',
): IdStrategy<bigint> {
  return {
    name,
    generate: () => svc.incrBy(key, 1n),
    generateBatch: async (ctx) => {
      const last = await svc.incrBy(key, BigInt(ctx.count));
      return Array.from({ length: ctx.count }, (_, i) => last - BigInt(ctx.count - 1 - i));
    },
  };
}

/** On a node: Snowflake IDs of `key` from the node's own leased worker ID. */
export function nodeSnowflakeStrategy(
  svc: SnowflakeService,
  key: string,
  name = 'snowflake',
): IdStrategy<bigint> {
  return {
    name,
    generate: async () => (await svc.next(key, 1))[0]!,
    generateBatch: (ctx) => svc.next(key, ctx.count),
  };
}

/** A strategy from a function (seed 004's user-defined strategies). */
export function functionStrategy<T>(
  name: string,
  generate: (ctx: GenerateContext) => T | Promise<T>,
  init?: () => void | Promise<void>,
): IdStrategy<T> {
  return init ? { name, generate, init } : { name, generate };
}
