import { parseHostPort } from '../node/config.js';
import type { CliIO } from './io.js';
import { CommandFailedError } from './io.js';

/** Connection options of the admin commands (`--endpoint`, `--user`, `--password`). */
export interface Conn {
  endpoint: string;
  user?: string;
  password?: string;
}

/** One admin call; follows the leader by hand (fetch would drop credentials on a cross-origin 307). */
export async function call(
  io: CliIO,
  c: Conn,
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  let endpoint = c.endpoint;
  parseHostPort('--endpoint', endpoint);
  const user = c.user ?? io.env.FLOE_USER;
  const password = c.password ?? io.env.FLOE_PASSWORD;
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (user && password)
    headers.authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  for (let hop = 0; hop < 3; hop++) {
    let res: Response;
    try {
      res = await fetch(`http://${endpoint}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        redirect: 'manual',
        signal: AbortSignal.timeout(15_000),
      });
    } catch (err) {
      throw new CommandFailedError(`cannot reach Floe at ${endpoint}: ${(err as Error).message}`);
    }
    const text = await res.text();
    const parsed = text ? (JSON.parse(text) as { message?: string; leader?: { httpAddr?: string } }) : {};
    if (res.status === 307 && parsed.leader?.httpAddr) {
      endpoint = parsed.leader.httpAddr;
      continue;
    }
    if (!res.ok)
      throw new CommandFailedError(`${method} ${path} failed (${res.status}): ${parsed.message ?? text}`);
    return parsed;
  }
  throw new CommandFailedError('the leader kept moving; try again');
}
