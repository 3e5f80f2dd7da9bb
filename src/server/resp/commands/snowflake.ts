import { DEFAULT_LAYOUT_NAME, decode, FloeIdError, getLayout, type Layout } from '../../../id/index.js';
import { type CommandSpecInput, lower, text } from '../command.js';
import { errors, RespError } from '../errors.js';
import { R } from '../reply.js';

/** SNOWFLAKE.DECODE: pure, answered by any node. */
export const snowflakeCommands: CommandSpecInput[] = [
  {
    name: 'snowflake.decode',
    arity: -2,
    flags: ['readonly', 'fast', 'stale', 'loading'],
    group: 'floe',
    summary:
      'SNOWFLAKE.DECODE id [LAYOUT floe|twitter|sonyflake|baidu]: the parts of an ID (decimal or 0x hex).',
    since: '0.1.0',
    handler: (_ctx, args) => {
      let layout: Layout;
      try {
        layout = getLayout(DEFAULT_LAYOUT_NAME);
        for (let i = 2; i < args.length; i += 2) {
          if (lower(args[i]) !== 'layout' || i + 1 >= args.length) throw errors.syntax();
          layout = getLayout(text(args[i + 1]));
        }
        const id = text(args[1]);
        const parts = decode(id, layout);
        return R.record([
          ['id', id],
          ['layout', layout.name],
          ['timestamp_ms', parts.timestamp],
          ['time', parts.time.toISOString()],
          ['datacenter_id', parts.datacenter],
          ['worker_id', parts.worker],
          ['sequence', parts.sequence],
        ]);
      } catch (err) {
        if (err instanceof FloeIdError) throw new RespError(`ERR ${err.message}`);
        throw err;
      }
    },
  },
];
