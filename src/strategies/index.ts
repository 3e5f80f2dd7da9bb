export {
  type AuditPluginOptions,
  type AuditSink,
  auditPlugin,
  metricsPlugin,
  permutationPlugin,
  shortCodePlugin,
} from './builtin-plugins.js';
export {
  clientSequenceStrategy,
  functionStrategy,
  nodeSequenceStrategy,
  nodeSnowflakeStrategy,
  snowflakeStrategy,
} from './builtin-strategies.js';
export { IdGenerator, type IdGeneratorOptions } from './id-generator.js';
export * from './types.js';
