import { createHash } from 'node:crypto';
import { tryParseHostPort } from '../../net/host-port.js';

/**
 * The 40-hex-digit node ID Redis Cluster clients expect (CLUSTER MYID / NODES / SLOTS), derived from the Floe
 * member id so it is the same on every node and across restarts: SHA-1 of `floe-member:<id>`.
 */
export function clusterNodeId(memberId: number): string {
  let id = cache.get(memberId);
  if (id === undefined) {
    id = createHash('sha1').update(`floe-member:${memberId}`).digest('hex');
    if (cache.size >= 1024) cache.clear(); // members are few; bound it anyway
    cache.set(memberId, id);
  }
  return id;
}

const cache = new Map<number, string>();

/** `host:port` (IPv6 as `[v6]:port`) → parts; undefined when it is not one (rules: src/net/host-port.ts). */
export function parseHostPort(addr: string | undefined): { host: string; port: number } | undefined {
  return tryParseHostPort(addr);
}
