import { type LeaseError, parseLeaseCommand } from '../state/leases/index.js';

/**
 * The lease state's own complete check (`parseLeaseCommand`: types, ranges, lengths) run on a
 * request before the lease service proposes it, so that nothing it would refuse reaches the log
 * (issue 15 item 2). Fields the service fills in when absent get a placeholder in range.
 */
export type LeasePrecheck =
  | {
      op: 'acquire';
      app: unknown;
      nodeId: unknown;
      ttlMs?: unknown;
      requestId?: unknown;
      boundMs?: unknown;
      incarnation?: unknown;
      layout?: unknown;
    }
  | { op: 'renew'; app: unknown; workerId: unknown; token: unknown; boundMs?: unknown }
  | { op: 'release'; app: unknown; workerId: unknown; token: unknown; lastTimestampMs?: unknown }
  | { op: 'configurePool'; app: unknown; bits: unknown; datacenterBits: unknown };

export function precheckLease(req: LeasePrecheck): LeaseError | undefined {
  const cmd: Record<string, unknown> = { ns: 'lease', ...req };
  if (req.op === 'acquire') {
    cmd.ttlMs = req.ttlMs ?? 1_000; // the service's default TTL is always in range
    cmd.requestId = req.requestId ?? 'generated';
  } else if (req.op === 'renew') cmd.boundMs = req.boundMs ?? 0;
  else if (req.op === 'release') cmd.lastTimestampMs = req.lastTimestampMs ?? 0;
  const r = parseLeaseCommand(cmd);
  return 'ok' in r && r.ok === false ? r : undefined;
}
