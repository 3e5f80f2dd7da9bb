/** The audit trail (issue 12): events, channel, ClickHouse sink, spill, pipeline (docs/audit.md). */
export { AuditChannel, type AuditChannelOptions } from './channel.js';
export { type ClickHouseAuditOptions, ClickHouseAuditSink } from './clickhouse-sink.js';
export { ClusterAuditor, type ClusterAuditorOptions, type ClusterAuditorStats } from './cluster-auditor.js';
export * from './events.js';
export { registerAuditMetrics } from './metrics.js';
export {
  type AuditAlarm,
  type AuditLogger,
  type AuditMode,
  type AuditPipeline,
  type AuditPipelineOptions,
  type AuditStats,
  createAuditPipeline,
  stderrAuditLogger,
} from './pipeline.js';
export { corruptionMessage, insertSpillContent, type ReplayFileResult } from './replay.js';
export {
  AUDIT_COLUMNS,
  DEFAULT_AUDIT_TABLE,
  parseVersion,
  schemaStatements,
  supportsDedupToken,
} from './schema.js';
export { listSpillFiles, type SpillFileContent, type SpillOptions, SpillStore } from './spill.js';
export { decodeFrames, encodeFrame, type SpillCorruption, type SpillFrame } from './spill-format.js';
export { type AuditedHolder, earlierHolderFromAudit } from './whois-history.js';
