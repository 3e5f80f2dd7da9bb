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

/**
 * Another live process (or this one, through another open) holds the data directory's lock.
 * `pid` (and `holder`) are what the holder recorded in LOCK: informational, the kernel lock decides.
 */
export class StorageLockedError extends StorageError {
  constructor(
    readonly lockFile: string,
    readonly pid: number,
    /** How the holder describes itself (host, start time), if it recorded it. */
    readonly holder = '',
    /** 'kernel': an open file holds the kernel lock; 'pid-file': the PID rule (opted in where there is no kernel lock). */
    readonly by: 'kernel' | 'pid-file' = 'kernel',
  ) {
    const who =
      pid > 0 ? `live process ${pid}${holder}` : 'a live process (it has not written its record yet)';
    const self = pid === process.pid ? ' (this process: already open)' : '';
    super(
      'ERR_STORAGE_LOCKED',
      `data dir is locked by ${who}${self}: ${lockFile}; ` +
        (by === 'kernel'
          ? 'stop that process first (its lock goes away by itself when it exits or is killed; never delete LOCK)'
          : 'stop that process first (a lock left by a dead process is taken over automatically)'),
    );
  }
}

/**
 * The data directory cannot be locked: this platform or file system has no kernel file lock (or the
 * native module that takes it does not load). Refused by default: without the lock two processes
 * could use one directory. The PID rule is an explicit opt-in (`unsupportedLock: 'pid-file'`).
 */
export class StorageLockUnsupportedError extends StorageError {
  constructor(
    readonly lockFile: string,
    options?: { cause?: unknown },
  ) {
    const why = options?.cause instanceof Error ? options.cause.message : String(options?.cause);
    const optIn =
      "the weaker PID rule (`floe serve --storage-lock pid-file`; DurableStorage and the audit spill: unsupportedLock: 'pid-file'; " +
      'see docs/storage.md, "The lock", for its limits)';
    const moduleFailed =
      (options?.cause as { moduleLoadFailed?: unknown } | undefined)?.moduleLoadFailed === true;
    super(
      'ERR_STORAGE_LOCK_UNSUPPORTED',
      moduleFailed
        ? `cannot lock ${lockFile}: the native lock module (fs-native-extensions) failed to load: ${why}. ` +
            'It has no prebuilt binary for musl (Alpine Linux): on Alpine use a glibc-based image (e.g. node:*-slim), ' +
            `or opt in to ${optIn}. Refusing to open the data dir unlocked.`
        : `cannot lock ${lockFile}: this platform or file system has no kernel file lock (${why}); ` +
            'refusing to open the data dir unlocked. Put it on a local file system (ext4, XFS, APFS, NTFS), or opt in to ' +
            optIn,
      options,
    );
  }
}

/**
 * LOCK holds a record in the old format (a bare PID): written by a Floe version that locked by PID only, or by
 * `--storage-lock pid-file`. Such a version removes LOCK at a clean shutdown, so the record means that a process of
 * it is running on this directory (it holds no kernel lock) or crashed: PIDs cannot tell which across containers.
 */
export class StorageLegacyLockError extends StorageError {
  constructor(
    readonly lockFile: string,
    readonly pid: number,
  ) {
    super(
      'ERR_STORAGE_LEGACY_LOCK',
      `${lockFile} was written by a Floe version that locked by PID only, or by --storage-lock pid-file ` +
        `(it names process ${pid > 0 ? pid : '(unreadable)'}): such a process may still be running on this directory, ` +
        'in this or another container, and it holds no kernel lock. Stop every Floe process of the older version ' +
        '(and every one run with --storage-lock pid-file) that uses this directory, then delete LOCK, or, once they ' +
        'are all stopped, pass `floe serve --take-legacy-lock` (DurableStorage and the audit spill: ' +
        'takeLegacyLock: true) for this one start. Two Floe versions must never share a data directory.',
    );
  }
}

/** The kernel lock could not be taken for a reason that may pass (ENOLCK: an NFS lock daemon failing). */
export class StorageLockUnavailableError extends StorageError {
  constructor(
    readonly lockFile: string,
    options?: { cause?: unknown },
  ) {
    const why = options?.cause instanceof Error ? options.cause.message : String(options?.cause);
    super(
      'ERR_STORAGE_LOCK_UNAVAILABLE',
      `cannot lock ${lockFile}: the kernel refused the lock for now (${why}); on NFS this is the lock daemon ` +
        '(lockd/statd, or the NFSv4 server) failing or out of locks. Refusing to open the data dir unlocked: ' +
        'fix the lock service and start again (a local file system is better still).',
      options,
    );
  }
}

/**
 * The kernel lock on LOCK was free, but LOCK names a process that is verifiably alive on this machine (same boot,
 * PID namespace and start time as recorded) and did not close it: the directory was moved or copied while that
 * process had it open (or LOCK was replaced). Refused: that process may still write into this directory by path.
 */
export class StorageLockCopiedError extends StorageError {
  constructor(
    readonly lockFile: string,
    readonly pid: number,
  ) {
    super(
      'ERR_STORAGE_LOCK_COPIED',
      `${lockFile} is not locked, but it names live process ${pid} (same machine boot, PID namespace and start time ` +
        'as recorded), which did not close it: this directory was moved or copied while that process had it open, ' +
        'or its LOCK was replaced. Stop that process first (or, for a copy, delete LOCK in the copy once you are ' +
        'sure no process uses it).',
    );
  }
}

/** The storage's LOCK no longer names the file this process locked (deleted, replaced, or the directory moved). */
export class StorageLockLostError extends StorageError {
  constructor(message: string) {
    super('ERR_STORAGE_LOCK_LOST', message);
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
