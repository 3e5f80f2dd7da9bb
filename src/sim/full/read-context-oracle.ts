// Issue 9 item 1b's claim, checked on the wire: a ReadIndex answer can be matched to the read that asked for it.
// A follower's read is answered by its context alone, so if two processes of one node (a process and its successor
// after a restart) ask with the same context, an answer with it is ambiguous: the successor may take its
// predecessor's answer, an index the leader recorded before writes the successor's read must see, for its own.
// Whether that answer is actually stale depends on timing the simulator seldom lines up (docs/simulator-full.md,
// `read-context-per-process`); the ambiguity itself is the broken contract ("every reply is checked against its
// request"), so it fails the run as soon as such an answer reaches one of the processes that asked.
import type { NodeId } from '../../raft/types.js';

export class ReadContextOracle {
  /** `node:context` → the node's process incarnations that sent a ReadIndex request with that context. */
  private readonly askers = new Map<string, number[]>();
  /** Answers checked (coverage). */
  answers = 0;

  constructor(private readonly fail: (detail: string) => void) {}

  /** Process `incarnation` of node `node` sent a ReadIndex request (a retry with the same context counts once). */
  asked(node: NodeId, incarnation: number, context: Uint8Array): void {
    const key = `${node}:${Buffer.from(context).toString('hex')}`;
    const who = this.askers.get(key);
    if (who === undefined) this.askers.set(key, [incarnation]);
    else if (!who.includes(incarnation)) who.push(incarnation);
  }

  /** A ReadIndex answer is about to reach process `incarnation` of node `node`. */
  answered(node: NodeId, incarnation: number, context: Uint8Array, index: number): void {
    this.answers++;
    const hex = Buffer.from(context).toString('hex');
    const who = this.askers.get(`${node}:${hex}`);
    if (who === undefined || who.length < 2 || !who.includes(incarnation)) return;
    this.fail(
      `n${node}#${incarnation} received a ReadIndex answer (index ${index}) for context ${hex}, which processes ` +
        `${who.map((i) => `#${i}`).join(', ')} of n${node} asked with: it cannot tell whose read it answers`,
    );
  }
}
