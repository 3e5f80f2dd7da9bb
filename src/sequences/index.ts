export { sequenceNodeOf } from './floe-node-adapter.js';
export { allocProof, httpRemoteAlloc, REMOTE_ALLOC_PATH, RemoteAllocError } from './remote-alloc.js';
export {
  type AllocCommand,
  type SequenceNode,
  SequenceOverloadedError,
  SequenceRefusedError,
  SequenceReplyMismatchError,
  SequenceService,
  type SequenceServiceOptions,
} from './sequence-service.js';
