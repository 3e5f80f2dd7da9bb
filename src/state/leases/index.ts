export {
  checkApp,
  decodeLeaseCommand,
  encodeLeaseCommand,
  isLeaseCommand,
  leaseError,
  parseLeaseCommand,
} from './codec.js';
export { LeaseStateMachine } from './lease-state-machine.js';
export * from './types.js';
