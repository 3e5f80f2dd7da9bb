import { randomUUID } from 'node:crypto';
import type { Etcd3 } from 'etcd3';
import { isClusterUid } from '../../state/cluster/cluster-identity.js';

/**
 * The cluster's UUID on the etcd store (docs/cluster-identity.md): one key, created once by whichever node gets there
 * first (a transaction that writes only while the key does not exist, else reads it). Every node runs it at start
 * and retries until etcd answers; the UUID is named only once etcd holds it, and never changes afterwards: no
 * state machine, no restore, nothing another path could overwrite (review of the cluster identity, findings 2 and 3).
 */
/** The key holds something that is not a UUID (written by hand, or by another program): an operator must fix it. */
export class MalformedClusterUidError extends Error {
  constructor(
    readonly key: string,
    readonly held: string,
  ) {
    super(
      `etcd key ${key} holds ${JSON.stringify(held.slice(0, 64))}, not a cluster UUID: lease calls wait until it ` +
        'holds one (put the UUID `floe cluster uid` printed before, or delete the key so that a node mints one; ' +
        'docs/cluster-identity.md)',
    );
    this.name = 'MalformedClusterUidError';
  }
}

export class EtcdClusterIdentity {
  private current: string | undefined;
  /** The malformed value last reported: reported again only when it changes, not at every retry. */
  private reported: string | undefined;
  private closed = false;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly client: Etcd3,
    private readonly key: string,
    private readonly o: {
      mint?: () => string;
      retryMs?: number;
      onKnown?: (uid: string) => void;
      onError?: (what: string, err: unknown) => void;
    } = {},
  ) {}

  get uid(): string | undefined {
    return this.current;
  }

  /** Starts trying; resolves once etcd holds the UUID (or on close). */
  start(): void {
    void this.attempt();
  }

  private async attempt(): Promise<void> {
    if (this.closed || this.current !== undefined) return;
    try {
      const uid = await this.createOrRead();
      if (this.closed) return;
      this.current = uid;
      this.o.onKnown?.(uid);
    } catch (err) {
      if (this.closed) return;
      if (err instanceof MalformedClusterUidError) {
        if (this.reported !== err.held) this.o.onError?.('cluster identity: malformed etcd key', err);
        this.reported = err.held;
      } else this.o.onError?.('cluster identity: etcd did not answer', err);
      this.timer = setTimeout(() => void this.attempt(), this.o.retryMs ?? 1000);
      this.timer.unref();
    }
  }

  private async createOrRead(): Promise<string> {
    const mint = (this.o.mint ?? randomUUID)();
    const res = await this.client
      .if(this.key, 'Create', '==', 0)
      .then(this.client.put(this.key).value(mint))
      .else(this.client.get(this.key))
      .commit();
    if (res.succeeded) return mint;
    const kv = res.responses[0]?.response_range?.kvs[0];
    const held: string | undefined = kv?.value.toString();
    if (isClusterUid(held)) return held;
    throw new MalformedClusterUidError(this.key, held ?? '');
  }

  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
  }
}
