/**
 * What the servers need to change state kept beside the leases (users and permissions): the Raft node
 * (built-in store) or an EtcdStateNode (etcd store). Reads stay local: every node applies (Raft) or
 * watches (etcd) the changes.
 */
export interface StoreStateNode {
  propose(command: Uint8Array): Promise<unknown>;
  /** Resolves once this node is confirmed to serve writes and has every change made before the call. */
  linearizableRead(): Promise<void>;
  isLeader(): boolean;
  notLeaderError(): Error;
}
