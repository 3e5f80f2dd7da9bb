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

/** Redis's exact wording for the errors clients recognise. */
export const errors = {
  syntax: (): RespError => new RespError('ERR syntax error'),
  notInteger: (): RespError => new RespError('ERR value is not an integer or out of range'),
  wrongArity: (fullName: string): RespError =>
    new RespError(`ERR wrong number of arguments for '${fullName}' command`),
  /** `unknown command 'FOO', with args beginning with: 'a' 'b' ` (Redis shows at most ~128 bytes of args). */
  unknownCommand: (name: string, args: readonly Buffer[]): RespError => {
    let shown = '';
    for (let i = 0; i < args.length && shown.length < 128; i++) {
      // Cut the bytes before decoding: an argument may be up to maxBulkBytes long.
      shown += `'${args[i]!.subarray(0, 128 - shown.length).toString('utf8')}' `;
    }
    return new RespError(`ERR unknown command '${name.slice(0, 128)}', with args beginning with: ${shown}`);
  },
  unknownSubcommand: (sub: string, container: string): RespError =>
    new RespError(`ERR unknown subcommand '${sub.slice(0, 128)}'. Try ${container.toUpperCase()} HELP.`),
  noAuth: (): RespError => new RespError('NOAUTH Authentication required.'),
  wrongPass: (): RespError => new RespError('WRONGPASS invalid username-password pair or user is disabled.'),
  moved: (slot: number, addr: string): RespError => new RespError(`MOVED ${slot} ${addr}`),
  clusterDown: (): RespError => new RespError('CLUSTERDOWN The cluster is down'),
};
