import { type CommandSpec, type CommandSpecInput, defineCommand } from '../command.js';
import { clusterCommands } from './cluster.js';
import { connectionCommands } from './connection.js';
import { introspectionCommands } from './introspection.js';
import { pubsubCommands } from './pubsub.js';
import { sentinelCommands } from './sentinel.js';
import { sequenceCommands } from './sequence.js';
import { snowflakeCommands } from './snowflake.js';
import { workerCommands } from './worker.js';

/**
 * Every command the server knows. To add one (e.g. INCR later), append a `CommandSpecInput` to a list here:
 * name, arity, flags (`write`/`readonly` decide MOVED on followers), key position, handler.
 */
export const ALL_COMMANDS: readonly CommandSpecInput[] = [
  ...connectionCommands,
  ...introspectionCommands,
  ...clusterCommands,
  ...sentinelCommands,
  ...pubsubCommands,
  ...workerCommands,
  ...snowflakeCommands,
  ...sequenceCommands,
];

/** Build the lookup table (lower-case name → spec). Throws on a duplicate name. */
export function buildCommandTable(
  inputs: readonly CommandSpecInput[] = ALL_COMMANDS,
): ReadonlyMap<string, CommandSpec> {
  const table = new Map<string, CommandSpec>();
  for (const input of inputs) {
    const spec = defineCommand(input);
    if (table.has(spec.name)) throw new Error(`duplicate RESP command ${spec.name}`);
    table.set(spec.name, spec);
  }
  return table;
}
