// In-memory twins of the node's seams, for tests of the runtime without disks or sockets.
import { MemoryStorage } from '../raft/memory-storage.js';
import type { ConfState, Entry, HardState, Message, NodeId, Snapshot } from '../raft/types.js';
import type { NodeStorage, NodeTransport, TransportSink } from './seams.js';

export class MemoryNodeStorage implements NodeStorage {
  readonly storage: MemoryStorage;
  saves = 0;

  constructor(conf?: ConfState) {
    this.storage = new MemoryStorage(conf);
  }

  async save(batch: { hardState?: HardState; entries: Entry[]; snapshot?: Snapshot }): Promise<void> {
    this.saves++;
    if (batch.snapshot) this.storage.applySnapshot(batch.snapshot);
    if (batch.entries.length > 0) this.storage.append(batch.entries);
    if (batch.hardState) this.storage.setHardState(batch.hardState);
  }

  async createSnapshot(index: number, conf: ConfState, data: Uint8Array): Promise<void> {
    this.storage.createSnapshot(index, conf, data);
    const keep = 100;
    if (index - keep > this.storage.firstIndex()) this.storage.compact(index - keep);
  }

  async close(): Promise<void> {}
}

/** A hub that delivers messages between in-process nodes asynchronously; links can be cut. */
export class MemoryNetwork {
  private readonly sinks = new Map<NodeId, TransportSink>();
  private readonly cut = new Set<string>();

  endpoint(id: NodeId): NodeTransport & { bind(sink: TransportSink): void } {
    const net = this;
    return {
      bind(sink: TransportSink) {
        net.sinks.set(id, sink);
      },
      send(messages: Message[]) {
        for (const m of messages) {
          if (net.cut.has(`${m.from}->${m.to}`)) {
            // The core needs an outcome for every snapshot it sends, lost ones included.
            if (m.type === 'snap') setImmediate(() => net.sinks.get(m.from)?.onSnapshotStatus(m.to, false));
            continue;
          }
          setImmediate(() => {
            if (net.cut.has(`${m.from}->${m.to}`)) return;
            net.sinks.get(m.to)?.onMessage(m);
            if (m.type === 'snap') net.sinks.get(m.from)?.onSnapshotStatus(m.to, true);
          });
        }
      },
      addPeer() {},
      removePeer() {},
      async close() {
        net.sinks.delete(id);
      },
    };
  }

  isolate(id: NodeId, others: NodeId[]): void {
    for (const o of others) {
      this.cut.add(`${id}->${o}`);
      this.cut.add(`${o}->${id}`);
    }
  }

  heal(): void {
    this.cut.clear();
  }
}
