import { encodeAuthCommand } from './codec.js';
import { type HashOptions, hashPassword } from './password.js';
import type { GrantSpec } from './types.js';

/**
 * Builders for the commands that carry a password: they hash first (scrypt, fresh salt) on the
 * node that received the request, so the proposed command holds only the hash.
 */
export async function userAddCommand(
  user: string,
  password: string,
  grants: GrantSpec[] = [],
  opts: HashOptions = {},
): Promise<Uint8Array> {
  return encodeAuthCommand({ op: 'userAdd', user, password: await hashPassword(password, opts), grants });
}

export async function userSetPasswordCommand(
  user: string,
  password: string,
  opts: HashOptions = {},
): Promise<Uint8Array> {
  return encodeAuthCommand({ op: 'userSetPassword', user, password: await hashPassword(password, opts) });
}
