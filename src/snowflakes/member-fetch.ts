import type { FetchLike } from '../client/http-transport.js';
import { MEMBER_HEADER, memberHeader } from '../server/member-auth.js';

/** The global fetch, signing every request as cluster member `nodeId` (see server/member-auth.ts). */
export function memberFetch(
  secret: string,
  nodeId: number,
  inner: FetchLike = globalThis.fetch as unknown as FetchLike,
): FetchLike {
  return (url, init) => {
    const u = new URL(url);
    return inner(url, {
      ...init,
      headers: { ...init.headers, [MEMBER_HEADER]: memberHeader(secret, nodeId, init.method, u.pathname) },
    });
  };
}
