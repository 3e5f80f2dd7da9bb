/**
 * Typed errors of the durable storage. Every message names the file (and, for the WAL, the byte
 * offset) so an operator can find the bad bytes; `code` is stable for programmatic checks.
 */
export class StorageError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * The write-ahead log cannot be trusted at `file` + `offset`: a bad checksum or frame that is not a
 * torn tail, a missing segment, an index gap, an unknown record type. Recovery stops; nothing after
 * the bad bytes is used. Restore the node from a peer (or a backup) rather than editing the file.
 */
export class WalCorruptionError extends StorageError {
  constructor(
    readonly file: string,
    readonly offset: number,
    readonly detail: string,
  ) {
    super('ERR_WAL_CORRUPT', `WAL corrupt: ${file} at byte offset ${offset}: ${detail}`);
  }
}

/** A snapshot file fails its checksum, is truncated, or disagrees with its name or with the WAL. */
export class SnapshotCorruptionError extends StorageError {
  constructor(
    readonly file: string,
    readonly detail: string,
  ) {
    super('ERR_SNAPSHOT_CORRUPT', `snapshot corrupt: ${file}: ${detail}`);
  }
}

/** Another live process (or this one) holds the data directory's lock file. */
export class StorageLockedError extends StorageError {
  constructor(
    readonly lockFile: string,
    readonly pid: number,
  ) {
    super(
      'ERR_STORAGE_LOCKED',
      `data dir is locked by live process ${pid}${pid === process.pid ? ' (this process: already open)' : ''}: ${lockFile}; ` +
        'stop that process first (a lock left by a dead process is taken over automatically)',
    );
  }
}

/** A bad option or an unusable data directory (not a directory, not writable, bootstrap mismatch). */
export class StorageConfigError extends StorageError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_STORAGE_CONFIG', message, options);
  }
}

/** A call that cannot be honoured given the current log (index gap, snapshot out of date, ...). */
export class StorageUsageError extends StorageError {
  constructor(message: string) {
    super('ERR_STORAGE_USAGE', message);
  }
}

/**
 * A write or fsync failed. The storage stops accepting writes for good (fail-stop): after a failed
 * fsync the kernel may have dropped dirty pages, so retrying could acknowledge lost data.
 * Reopen the directory (recovery re-reads what is really on disk).
 */
export class StorageFailedError extends StorageError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_STORAGE_FAILED', message, options);
  }
}

/** The storage was closed; writes after close() are refused. */
export class StorageClosedError extends StorageError {
  constructor() {
    super('ERR_STORAGE_CLOSED', 'storage is closed');
  }
}
