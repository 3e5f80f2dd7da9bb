import type { FloeSequence } from '../client/sequence.js';
import type { Snowflake } from '../id/snowflake.js';

/**
 * Column defaults that fill an ID in on insert (seed 003's database-middleware integration), for
 * ORMs that take a synchronous default function — Drizzle's `$defaultFn`:
 *
 *   id: bigint('id', { mode: 'bigint' }).primaryKey().$defaultFn(snowflakeDefault(ids)),
 *
 * No ORM is imported here: these are plain functions (docs/orm.md).
 */

/** Each call takes the next ID of a (leased) Snowflake generator; throws LeaseLostError once the lease is gone. */
export function snowflakeDefault(gen: Snowflake): () => bigint {
  return () => gen.next();
}

/** No value was buffered for a synchronous default (the next segment is being fetched). */
export class SequenceNotReadyError extends Error {
  constructor(key: string) {
    super(
      `sequence ${JSON.stringify(key)} has no value buffered for a synchronous default: the next segment is being ` +
        'fetched (retry the insert, or give client.sequence a larger step so the buffer never runs dry)',
    );
    this.name = 'SequenceNotReadyError';
  }
}

/**
 * Each call takes the next buffered value of a sequence (`client.sequence(key)`) as a bigint. A
 * default must be synchronous, so when the buffer is empty this throws SequenceNotReadyError (the
 * fetch it triggered fills the buffer for the next insert); `await ready(seq)` before the first insert.
 */
export function sequenceDefault(seq: FloeSequence): () => bigint {
  return () => {
    const v = seq.tryNextSync();
    if (v === undefined) throw new SequenceNotReadyError(seq.key);
    return BigInt(v);
  };
}

/** Resolves once the sequence has values buffered (takes one value to get there; it is not reused). */
export async function ready(seq: FloeSequence): Promise<void> {
  await seq.next();
}
