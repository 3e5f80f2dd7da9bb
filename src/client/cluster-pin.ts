import { bugOn } from '../testing/bug-switches.js';
import { ClientOptionError, ReplyMismatchError } from './errors.js';

/** The header every Floe node's HTTP answer names its cluster in (the UUID its first leader minted). */
export const CLUSTER_UID_HEADER = 'floe-cluster';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A cluster UUID as nodes name it (lower case). */
export const isClusterUid = (v: string): boolean => UUID.test(v);

/**
 * The one cluster a client talks to (review of FS-19: no answer named its cluster, so a client whose endpoints,
 * balancer or a redirect reached another Floe cluster was granted a worker ID there, one this cluster may have granted
 * to someone else). Pinned from the `clusterUid` option, else from a lease cache's record, else from the first
 * successful answer that names one; for the client's life. Answers of another cluster are refused (never a result); once pinned, a
 * successful answer that names no cluster is refused too.
 */
export class ClusterPin {
  private uid: string | undefined;
  /** Where the pinned cluster came from: only an operator's word (`clusterUid`) overrides a lease cache's. */
  private from: 'option' | 'cache' | 'answer' | undefined;
  /** A server's own client: the node's own UUID, once it knows it; nothing is pinned from an answer. */
  private readonly source: (() => string | undefined) | undefined;
  /** Answers refused because they named another cluster (or none, once pinned). */
  refused = 0;

  constructor(configured: string | (() => string | undefined) | undefined) {
    if (typeof configured === 'function') this.source = configured;
    else if (configured !== undefined) {
      if (typeof configured !== 'string' || !UUID.test(configured.toLowerCase()))
        throw new ClientOptionError(
          'clusterUid',
          "a UUID (`floe cluster` or GET /v1/cluster's `cluster`)",
          configured,
        );
      this.uid = configured.toLowerCase();
      this.from = 'option';
    }
    if (this.source) this.from = 'option';
  }

  /** Whether the cluster was given by the operator (`clusterUid`, a UUID or a node's own), not learned. */
  get configured(): boolean {
    return this.from === 'option';
  }

  /**
   * A node's own client whose node does not know its UUID yet: it must send nothing, since whatever cluster its
   * request reached would act on it, and no answer could be taken (review of 3775fb6, F3).
   */
  get waitingForOwn(): boolean {
    return this.source !== undefined && this.value === undefined;
  }

  /** The pinned cluster, if any yet. */
  get value(): string | undefined {
    if (this.uid === undefined && this.source) {
      const v = this.source()?.toLowerCase();
      if (v !== undefined && UUID.test(v)) this.uid = v;
    }
    return this.uid;
  }

  /**
   * Pins `uid` if nothing is pinned yet (a lease cache's record). Returns whether `uid` is now the pinned cluster:
   * false means the record was written against another cluster.
   */
  adopt(uid: string): boolean {
    if (!UUID.test(uid)) return false;
    if (this.value === undefined && this.source) return false;
    if (this.uid === undefined) {
      this.uid = uid;
      this.from = 'cache';
    }
    return this.uid === uid;
  }

  /**
   * Checks an answer's `floe-cluster` header: undefined when the answer may be used, else the error that refuses it.
   * `success`: a 2xx answer (a result); errors and redirects that name no cluster pass (a node that has not applied
   * the UUID yet), since what they lead to is checked in turn.
   */
  admit(path: string, header: string | null, success: boolean): ReplyMismatchError | undefined {
    if (bugOn('no-cluster-check')) return undefined;
    if (this.value === undefined && this.source && success) {
      this.refused++;
      return new ReplyMismatchError(path, 'cluster', 'this node’s own (not known yet)', header ?? 'none');
    }
    if (header === null) {
      if (!success || this.uid === undefined) return undefined;
      this.refused++;
      return new ReplyMismatchError(path, 'cluster', this.uid, 'none (the answer names no cluster)');
    }
    if (!UUID.test(header)) {
      this.refused++;
      return new ReplyMismatchError(path, 'cluster', this.uid ?? 'a UUID', header.slice(0, 64));
    }
    if (this.uid === undefined) {
      // Only a result pins: an error answer is not one, and what a redirect leads to is checked in turn.
      if (success) {
        this.uid = header;
        this.from = 'answer';
      }
      return undefined;
    }
    if (header === this.uid) return undefined;
    this.refused++;
    return new ReplyMismatchError(path, 'cluster', this.uid, header);
  }
}
