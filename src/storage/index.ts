// Durable Raft storage: write-ahead log + snapshot files, with a synchronous in-memory read side.
export {
  DEFAULT_KEEP_SNAPSHOTS,
  DEFAULT_TRAILING_ENTRIES,
  DurableStorage,
  type DurableStorageOptions,
  type DurableStorageStats,
  type SaveBatch,
} from './durable-storage.js';
export {
  SnapshotCorruptionError,
  StorageClosedError,
  StorageConfigError,
  StorageError,
  StorageFailedError,
  StorageLegacyLockError,
  StorageLockCopiedError,
  StorageLockedError,
  StorageLockLostError,
  StorageLockUnavailableError,
  StorageLockUnsupportedError,
  StorageUsageError,
  WalCorruptionError,
} from './errors.js';
export {
  nodeFs,
  type OpenMode,
  type StorageFile,
  type StorageFileStat,
  type StorageFs,
} from './file-system.js';
export { type LockOwner, processLockOwner } from './lock-file.js';
export { type CrashOptions, MemoryFs, type MemoryFsFaults } from './memory-fs.js';
export { UNKNOWN_VOTE } from './payload.js';
export { SnapshotStore } from './snapshot-store.js';
export {
  DEFAULT_SEGMENT_BYTES,
  Wal,
  type WalOptions,
  type WalRecord,
  type WalRecovery,
  type WalStats,
} from './wal.js';
