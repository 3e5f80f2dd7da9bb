// The simulated transport between nodes: a sent message meets the network's fate (lost, delayed,
// duplicated); a delivered one is stepped into the receiver's core, or queued while the receiver is
// paused; and the sender's core is told how every snapshot stream ended, as a real transport would.

import type { Message } from '../raft/types.js';
import { describeMessage } from './describe.js';
import { cloneMessage } from './network.js';
import type { SimNode } from './sim-node.js';
import type { SimWorld } from './world.js';

export class Transport {
  constructor(private readonly w: SimWorld) {}

  /** Hands a message from the sender's Ready to the network. */
  send(node: SimNode, msg: Message): void {
    const w = this.w;
    w.checker.observeSend(msg, node.durableHs);
    w.stats.messages++;
    const fates = w.network.fate(msg);
    if (fates.length === 0) {
      w.stats.messagesLost++;
      w.log(`lost ${describeMessage(msg)}`);
      // The transport sometimes notices: a failed connection, or a snapshot stream that broke.
      if (msg.type === 'snap') {
        w.queue.push(w.now + w.settings.baseTickUs, {
          k: 'report',
          node: node.id,
          life: node.incarnation,
          to: msg.to,
          what: 'snapFailed',
        });
      } else if (w.network.isBlocked(msg.from, msg.to) && w.netRng.chance(0.25)) {
        w.queue.push(w.now + 1, {
          k: 'report',
          node: node.id,
          life: node.incarnation,
          to: msg.to,
          what: 'unreachable',
        });
      }
      return;
    }
    if (fates.length > 1) w.stats.messagesDuplicated++;
    for (const delay of fates) {
      w.queue.push(w.now + delay, {
        k: 'deliver',
        msg: cloneMessage(msg),
        fromInbox: false,
        senderLife: node.incarnation,
      });
    }
  }

  /** A message arrives (or, if a partition came up while it was in flight, is lost). */
  deliver(msg: Message, fromInbox: boolean, senderLife: number): void {
    const w = this.w;
    const to = w.nodes.get(msg.to);
    // A partition that came up while the message was in flight loses it too (unless it was
    // already sitting in a paused receiver's socket buffer).
    if (to === undefined || !to.alive || (!fromInbox && w.network.isBlocked(msg.from, msg.to))) {
      w.stats.messagesLost++;
      if (msg.type === 'snap') this.reportSnapshot(msg, senderLife, false);
      return;
    }
    if (to.paused) {
      to.inbox.push({ msg, senderLife });
      return;
    }
    w.log(`recv ${describeMessage(msg)}`);
    w.core(to, `step(${msg.type})`, (raw) => raw.step(msg));
    if (msg.type === 'snap') this.reportSnapshot(msg, senderLife, true);
  }

  /**
   * The transport tells the sender how every snapshot stream ended, as a real one would (etcd's
   * contract too): without it the leader would wait for that follower forever.
   */
  reportSnapshot(msg: Message, senderLife: number, ok: boolean): void {
    const w = this.w;
    const sender = w.nodes.get(msg.from);
    if (!sender?.alive || sender.incarnation !== senderLife) return;
    if (sender.active) {
      w.core(sender, 'reportSnapshot', (raw) => raw.reportSnapshot(msg.to, ok));
    } else {
      w.queue.push(w.now + 1_000, {
        k: 'report',
        node: sender.id,
        life: senderLife,
        to: msg.to,
        what: ok ? 'snapOk' : 'snapFailed',
      });
    }
  }
}
