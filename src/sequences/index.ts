export { sequenceNodeOf } from './floe-node-adapter.js';
export {
  type SequenceNode,
  SequenceOverloadedError,
  SequenceRefusedError,
  SequenceReplyMismatchError,
  SequenceService,
  type SequenceServiceOptions,
} from './sequence-service.js';
