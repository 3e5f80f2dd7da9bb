// The simulator's public entry point: `runSimulation(options)` and the types around it.
// The work is split by concern:
//   options.ts         what a run is asked to do: options, defaults, drawn cluster settings, replay line
//   results.ts         what a run reports
//   world.ts           the shared state of a run (clock, queue, nodes, network, checker, trace)
//   event-loop.ts      the two phases and the dispatch of every event
//   ready-handling.ts  the Ready contract: persist (or tear), send, apply, advance, snapshot
//   transport.ts       send / deliver / snapshot-outcome reports
//   processes.ts       node lifecycle: create, start from durable storage, crash, resume, retire
//   faults.ts          the fault director: what breaks when, and healing
//   workload.ts        the client: proposals, reads, membership walk, transfers
//   liveness.ts        the post-heal liveness check
// See docs/simulator.md.

export { runSimulation } from './event-loop.js';
export {
  BUG_NAMES,
  type BugName,
  type ClockRates,
  replayCommand,
  SIM_DEFAULTS,
  type SimOptions,
  WORKAROUND_NAMES,
  type WorkaroundName,
} from './options.js';
export type { LivenessOutcome, SafetyFailure, SimResult, SimStats } from './results.js';
