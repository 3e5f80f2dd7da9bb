// What tells one process on this machine apart from another that has, or once had, the same PID:
// the machine's boot ID and the process's start time. Shared by the data directory's LOCK
// (src/storage/lock-file.ts) and the SDK's lease-cache lock (src/client/cache-lock.ts).
import { readFileSync, readlinkSync } from 'node:fs';

/** This machine's boot ID (Linux), or undefined elsewhere: it changes at every boot. */
export function readBootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * This process's PID namespace: the target of `/proc/self/ns/pid` (`pid:[4026531836]`), or undefined where unknown
 * (no /proc). Two processes in different PID namespaces (two containers) cannot see each other's PIDs.
 */
export function readPidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid').trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * Start time of a process: field 22 of `/proc/<pid>/stat` (clock ticks since boot), or null where unknown (no such
 * process, no /proc). A PID that now has another start time belongs to another process.
 */
export function processStartTicks(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start at field 3; start time is field 22.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** Whether a process with this PID exists: `kill(pid, 0)`, EPERM counting as alive (another user's process). */
export function pidExists(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: string } | null)?.code === 'EPERM';
  }
}
