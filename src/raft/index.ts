// Floe's Raft core: a deterministic state machine in the shape of etcd-io/raft.
// See docs/raft-core.md for the Ready/advance contract and a runnable example.

export { DEFAULTS as RAFT_DEFAULTS, leaseMarginFor } from './config.js';
export { MemoryStorage } from './memory-storage.js';
export { majority, majorityValue, voteResult } from './quorum.js';
export { RawNode } from './raw-node.js';
export * from './types.js';
