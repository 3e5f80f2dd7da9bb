import type { IKeyValue, ITxnResponse, Watcher } from 'etcd3';
import { ProposalOutcomeUnknownError } from '../../node/errors.js';
import type { StateMachine } from '../../node/state-machine.js';
import { StoreUnavailableError } from '../errors.js';
import type { EtcdLeaseStore } from './etcd-lease-store.js';

/** A write whose answer etcd did not give: it may or may not have been applied. */
class EtcdWriteOutcomeUnknownError extends ProposalOutcomeUnknownError {
  constructor(endpoints: readonly string[], cause: unknown) {
    super(
      'timeout',
      `etcd at ${endpoints.join(',')} did not answer a write (${cause instanceof Error ? cause.message : String(cause)})`,
    );
    this.name = 'ProposalOutcomeUnknownError';
  }
}

/**
 * A replicated state machine kept in etcd as one key (its snapshot), served by the etcd store's active
 * node: the node shape the sequence service expects (`propose`, `linearizableRead`, `isLeader`, `term`,
 * `onRoleChange`), so the same service code runs on both stores.
 *
 * - `linearizableRead` reads the key in a transaction that compares this node's `active` key (it proves
 *   the node was still active after the call) and, when etcd has a newer version than this node applied,
 *   restores the local state machine from it.
 * - `propose` applies the command to the local state machine brought up to date that way, and writes its
 *   snapshot back in one transaction guarded by the key's mod revision and the `active` key; a lost compare
 *   reloads and decides again, a lost `active` key deposes the node. Never a blind put.
 * - `term` is the active key's create revision: every election gives a larger one.
 * Suited to small state (sequences: one record per key); every write carries the whole snapshot.
 */
export class EtcdStateNode<R = unknown> {
  private loadedMod = '';
  private readonly empty: Uint8Array;
  private lastTerm = 0;
  private queue: Promise<unknown> = Promise.resolve();
  private watcher: Watcher | undefined;
  private closed = false;

  constructor(
    private readonly store: EtcdLeaseStore,
    private readonly key: string,
    private readonly sm: StateMachine<R>,
    emptyState: StateMachine<R>,
  ) {
    this.empty = emptyState.snapshot();
  }

  isLeader(): boolean {
    return this.store.activeRevision() !== undefined;
  }

  term(): number {
    const rev = this.store.activeRevision();
    if (rev !== undefined) this.lastTerm = Number(rev);
    return this.lastTerm;
  }

  notLeaderError(): Error {
    return this.store.notActiveError();
  }

  onRoleChange(cb: (leader: boolean) => void): () => void {
    let last: string | undefined = this.store.activeRevision();
    return this.store.routing.onChange(() => {
      const now = this.store.activeRevision();
      if (now === last) return;
      // A new election is a new term even without a step down in between: report the end of the old.
      if (last !== undefined) cb(false);
      last = now;
      if (now !== undefined) cb(true);
    });
  }

  async linearizableRead(): Promise<void> {
    await this.load();
  }

  /** One proposal at a time: each decides on the state the previous one wrote, so none is applied twice. */
  propose(command: Uint8Array): Promise<R> {
    const run = this.queue.then(
      () => this.proposeNow(command),
      () => this.proposeNow(command),
    );
    this.queue = run;
    return run;
  }

  private async proposeNow(command: Uint8Array): Promise<R> {
    for (let attempt = 1; attempt <= 32; attempt++) {
      const { rev, active } = await this.load();
      const r = this.sm.apply(command, { index: rev + 1, term: Number(active), leaderTimeMs: Date.now() });
      const c = this.store.client;
      let res: ITxnResponse;
      try {
        res = await c
          .if(this.store.keys.active, 'Create', '==', active)
          .and(this.key, 'Mod', '==', this.loadedMod === '' ? '0' : this.loadedMod)
          .then(c.put(this.key).value(Buffer.from(this.sm.snapshot())))
          .else(c.get(this.store.keys.active))
          .commit();
      } catch (err) {
        this.loadedMod = '-'; // unknown: reload before the next decision
        throw new EtcdWriteOutcomeUnknownError(this.store.endpoints, err);
      }
      if (res.succeeded) {
        this.loadedMod = String(res.header.revision);
        return r;
      }
      this.loadedMod = '-'; // the local state machine holds a decision that was not written
      const kv = res.responses[0]?.response_range?.kvs[0];
      if (!kv || kv.create_revision !== active) {
        this.store.lostActive(res);
        throw this.store.notActiveError();
      }
    }
    throw new StoreUnavailableError(
      this.store.endpoints,
      `writing ${this.key}`,
      new Error('32 compares lost'),
    );
  }

  /**
   * Keeps the local state machine up to date on every node, active or not (users and permissions are read
   * locally by every node's servers): a watch on the key, then one read of its current value. Failures are
   * retried every second and reported through `onError`.
   */
  watch(onError: (what: string, err: unknown) => void = () => {}): void {
    const attempt = async () => {
      if (this.closed) return;
      try {
        const w = await this.store.client.watch().key(this.key).create();
        if (this.closed) {
          await w.cancel();
          return;
        }
        this.watcher = w;
        w.on('put', (kv) => this.absorb(kv.mod_revision, kv.value));
        w.on('error', (err) => onError(`etcd watch of ${this.key} failed`, err));
        const kv = (await this.store.client.get(this.key).exec()).kvs[0];
        if (kv) this.absorb(kv.mod_revision, kv.value);
      } catch (err) {
        onError(`cannot watch ${this.key} in etcd yet; retrying`, err);
        setTimeout(() => void attempt(), 1000).unref();
      }
    };
    void attempt();
  }

  /**
   * Brings the local state machine up to etcd's current version on any node, active or not (a standby's read of
   * state it serves locally, such as Snowflake keys: "no such key" only after this). etcd's range reads are
   * linearizable, so every write acknowledged before the call is seen. Proves nothing about who is active.
   */
  async refresh(): Promise<void> {
    let kv: IKeyValue | undefined;
    try {
      kv = (await this.store.client.get(this.key).exec()).kvs[0];
    } catch (err) {
      throw new StoreUnavailableError(this.store.endpoints, `reading ${this.key}`, err);
    }
    if (kv) this.absorb(kv.mod_revision, kv.value);
  }

  close(): void {
    this.closed = true;
    void this.watcher?.cancel().catch(() => {});
  }

  /** A newer version of the key seen by the watch: restore it (older or own writes are skipped). */
  private absorb(mod: string, value: Buffer): void {
    const cur = Number(this.loadedMod);
    if (Number.isFinite(cur) && this.loadedMod !== '' && Number(mod) <= cur) return;
    this.sm.restore(new Uint8Array(value));
    this.loadedMod = mod;
  }

  /** Brings the local state machine up to etcd's version, proving this node active; returns the read revision. */
  private async load(): Promise<{ rev: number; active: string }> {
    const active = this.store.activeRevision();
    if (active === undefined) throw this.store.notActiveError();
    const c = this.store.client;
    let res: ITxnResponse;
    try {
      res = await c
        .if(this.store.keys.active, 'Create', '==', active)
        .then(c.get(this.key))
        .else(c.get(this.store.keys.active))
        .commit();
    } catch (err) {
      throw new StoreUnavailableError(this.store.endpoints, `reading ${this.key}`, err);
    }
    if (!res.succeeded) {
      this.store.lostActive(res);
      throw this.store.notActiveError();
    }
    const kv = res.responses[0]?.response_range?.kvs[0];
    const mod = kv ? kv.mod_revision : '0';
    if (mod !== this.loadedMod) {
      this.sm.restore(kv ? new Uint8Array(kv.value) : this.empty);
      this.loadedMod = mod;
    }
    return { rev: Number(res.header.revision), active };
  }
}
