/**
 * The membership store's interface lives with the runtime that uses it, as `SnapshotStore`
 * does (`snapshots.ts`); `src/store/membership-store.ts` implements it over SQL.
 */

/**
 * A node's row in `cluster_nodes` (migrations/000004_cluster.sql). `live` → `left` on a
 * graceful shutdown; `leaving` is reserved for draining; a join makes any row `live` again.
 */
export type NodeState = 'live' | 'leaving' | 'left';

/** A node as the membership table holds it. Times are Unix ms on the database's clock. */
export interface ClusterNode {
  id: string;
  /** Where other nodes reach this one (the transport's base URL). */
  address: string;
  /** When this incarnation joined: a node restarted under the same id gets a new one. */
  startedMs: number;
  heartbeatMs: number;
  state: NodeState;
  /**
   * Whether the node's last heartbeat said it reaches Redis (true until it says otherwise).
   * The ring leaves out live nodes that do not, while some live node does.
   */
  redisReachable: boolean;
}

/** A node as the admin view shows it: its row, and whether it counts as live right now. */
export interface ClusterNodeStatus extends ClusterNode {
  /** State `live` and a heartbeat younger than the failure timeout. */
  live: boolean;
  /** How long ago the last heartbeat was, ms, on the database's clock. */
  heartbeatAgeMs: number;
}

/**
 * Cluster membership in the system of record (Postgres or PGlite). Heartbeats are stamped and
 * judged with the database's clock, never a node's, so nodes with skewed clocks still agree
 * on who is live (the migration explains the choice); no method therefore takes a `nowMs`.
 */
export interface MembershipStore {
  /**
   * Joins, or rejoins: upserts the row as `live` with `address`, a new `startedMs` and a fresh
   * heartbeat, whatever state it was in. Returns the row.
   */
  join(node: { id: string; address: string }): Promise<ClusterNode>;
  /**
   * Bumps the heartbeat of a node that is still in the cluster. False, writing nothing, when
   * the row is gone, `left`, or its last heartbeat is already older than `failureTimeoutMs`:
   * the others have declared it out (and may have taken over its actors), so it must not go
   * on acting as live but rejoin. A late heartbeat never silently revives a node. Records
   * `redisReachable` (default true) with it.
   */
  heartbeat(id: string, failureTimeoutMs: number, redisReachable?: boolean): Promise<boolean>;
  /** Marks the node `left`: out of the live set at once. Nothing happens for an unknown id. */
  leave(id: string): Promise<void>;
  /** The live set: state `live` and a heartbeat younger than `failureTimeoutMs`, in id order. */
  live(failureTimeoutMs: number): Promise<ClusterNode[]>;
  /** Every row, in id order, each with its liveness under `failureTimeoutMs`. */
  all(failureTimeoutMs: number): Promise<ClusterNodeStatus[]>;
}
