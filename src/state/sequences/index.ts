export {
  buildCreate,
  type CreateOptions,
  checkKey,
  decodeSequenceCommand,
  encodeSequenceCommand,
  parseBig,
  parseSequenceCommand,
  sequenceError,
} from './codec.js';
export { SequenceStateMachine } from './sequence-state-machine.js';
export * from './types.js';
