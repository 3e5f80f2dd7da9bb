export { DeadlineHeap, type HeapEntry } from './deadline-heap.js';
export { leaseNodeOf } from './floe-node-adapter.js';
export * from './lease-service.js';
export { ReadCoalescer } from './read-coalescer.js';
