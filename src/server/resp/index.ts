/**
 * Floe's RESP (Redis protocol) server: any Redis client talks to a Floe node. See docs/resp.md.
 */
export {
  BackendError,
  type BackendErrorCode,
  type LeasePermission,
  type LeaseReply,
  type RaftRole,
  type RespBackend,
  type RespMember,
  type SeqCreateRequest,
  type SequenceBackend,
  type SequenceInfoReply,
  type SnowflakeBackend,
  type SnowflakeKeyReply,
  type WorkerAcquireRequest,
  type WorkerListRequest,
  type WorkerReleaseRequest,
  type WorkerRenewRequest,
} from './backend.js';
export type { CloseReason } from './client-connection.js';
export {
  type CommandContext,
  type CommandFlag,
  type CommandHandler,
  type CommandSpecInput,
  integerArg,
  lower,
  type ServerLogger,
  type Session,
  text,
} from './command.js';
export { ALL_COMMANDS } from './commands/index.js';
export { crc16, keyHashSlot, SLOT_COUNT } from './crc16.js';
export { errors, RespError } from './errors.js';
export { FakeBackend, FakeCluster, type FakeClusterOptions } from './fake-backend.js';
export { DEFAULT_LIMITS, type RespLimits, RespOptionError } from './limits.js';
export { clusterNodeId } from './node-id.js';
export { R, type Reply } from './reply.js';
export {
  type RespServer,
  type RespServerEvents,
  type RespServerOptions,
  type RespServerStats,
  startRespServer,
} from './server.js';
