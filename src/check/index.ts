// Floe's history checker: linearizability (Wing-Gong-Lowe search with per-key partitioning, as in
// Porcupine) and unique-ID properties, plus the history recording format.

export {
  HistoryFormatError,
  type HistoryRecord,
  type ParseResult,
  parseHistoryText,
  type RecordDecoder,
  readHistoryFiles,
  toOperations,
} from './history-file.js';
export {
  type CheckOptions,
  type CheckResult,
  checkHistory,
  DEFAULT_MAX_CACHE_ENTRIES,
  DEFAULT_TIMEOUT_MS,
  type DescribedOperation,
  type PartitionFailure,
  type PartitionResult,
  type Verdict,
} from './linearizability.js';
export {
  determinize,
  type Model,
  type NondeterministicModel,
  type Operation,
  partitionByKey,
  type StepResult,
  UNKNOWN,
  type Unknown,
} from './model.js';
export {
  type CounterInput,
  type CounterModelOptions,
  type CounterOutput,
  counterModel,
  decodeCounterRecord,
} from './models/counter.js';
export {
  decodeRegisterRecord,
  kvModel,
  type RegisterInput,
  type RegisterModelOptions,
  type RegisterOutput,
  type RegisterValue,
} from './models/register.js';
export {
  checkUniqueIds,
  decodeIdRecord,
  formatUniqueIdResult,
  type IdInput,
  type IdOutput,
  type IdViolation,
  increasingIdModel,
  type UniqueIdMode,
  type UniqueIdOptions,
  type UniqueIdResult,
} from './models/unique-id.js';
export {
  HistoryRecorder,
  monotonicNowNs,
  type PendingCall,
  type RecorderOptions,
  type TrackOptions,
} from './recorder.js';
export { type FormatOptions, formatCheckResult } from './report.js';
