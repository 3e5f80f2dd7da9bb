import { type FloeErrorCode, respLineOf } from '../errors/table.js';

/**
 * An error reply. `line` is the whole reply line without the leading `-`: an upper-case code, a space, a message
 * (`ERR syntax error`, `MOVED 12182 10.0.0.1:7379`, `NOAUTH Authentication required.`). Handlers throw it;
 * the dispatcher turns it into the reply and the connection stays open.
 */
export class RespError extends Error {
  constructor(readonly line: string) {
    super(line);
    this.name = 'RespError';
  }
}

/**
 * The RESP error of a Floe error code (src/server/errors/table.ts, docs/errors.md): its prefix and,
 * where the table fixes one, its stable text, then `detail`.
 */
export function respErrorOf(code: FloeErrorCode, detail?: string): RespError {
  return new RespError(respLineOf(code, detail));
}

/** Redis's exact wording for the errors clients recognise (prefixes and fixed texts from the error table). */
export const errors = {
  syntax: (): RespError => respErrorOf('syntax_error'),
  notInteger: (): RespError => respErrorOf('not_integer'),
  wrongArity: (fullName: string): RespError =>
    respErrorOf('wrong_arity', `wrong number of arguments for '${fullName}' command`),
  /** `unknown command 'FOO', with args beginning with: 'a' 'b' ` (Redis shows at most ~128 bytes of args). */
  unknownCommand: (name: string, args: readonly Buffer[]): RespError => {
    let shown = '';
    for (let i = 0; i < args.length && shown.length < 128; i++) {
      // Cut the bytes before decoding: an argument may be up to maxBulkBytes long.
      shown += `'${args[i]!.subarray(0, 128 - shown.length).toString('utf8')}' `;
    }
    return respErrorOf(
      'unknown_command',
      `unknown command '${name.slice(0, 128)}', with args beginning with: ${shown}`,
    );
  },
  unknownSubcommand: (sub: string, container: string): RespError =>
    respErrorOf(
      'unknown_subcommand',
      `unknown subcommand '${sub.slice(0, 128)}'. Try ${container.toUpperCase()} HELP.`,
    ),
  noAuth: (): RespError => respErrorOf('unauthorized'),
  wrongPass: (): RespError => respErrorOf('wrong_password'),
  moved: (slot: number, addr: string): RespError => respErrorOf('not_leader', `${slot} ${addr}`),
  clusterDown: (): RespError => respErrorOf('cluster_down'),
  /** `NOPERM <message>`: the user lacks a permission. */
  noPerm: (message: string): RespError => respErrorOf('forbidden', message),
};
