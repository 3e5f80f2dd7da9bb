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
export { type SegmentAllocated, SequenceStateMachine } from './sequence-state-machine.js';
export * from './types.js';
