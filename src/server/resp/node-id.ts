import { createHash } from 'node:crypto';

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

/** `host:port` (host may be `[v6]`) → parts; undefined when it is not an address with a valid port. */
export function parseHostPort(addr: string | undefined): { host: string; port: number } | undefined {
  if (!addr) return undefined;
  const colon = addr.lastIndexOf(':');
  if (colon <= 0) return undefined;
  let host = addr.slice(0, colon);
  const portText = addr.slice(colon + 1);
  if (!/^[0-9]{1,5}$/.test(portText)) return undefined;
  const port = Number(portText);
  if (port < 1 || port > 65535) return undefined;
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (host.length === 0) return undefined;
  return { host, port };
}
