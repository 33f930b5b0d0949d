import type { Db } from './db.js';
import { allNodes, heartbeat, joinCluster, leaveCluster, liveNodes } from './sql/cluster.js';
import type { ClusterNode, ClusterNodeStatus, MembershipStore } from '../runtime/membership-store.js';

/**
 * Cluster membership over SQL, on Postgres and PGlite alike; the statements are in
 * `sql/cluster.ts`. Give it a pool of its own on Postgres: a heartbeat that queues behind a
 * burst of submissions for longer than the failure timeout would put a busy but healthy node
 * out of the ring.
 */
export class SqlMembershipStore implements MembershipStore {
  constructor(private readonly db: Db) {}

  join(node: { id: string; address: string }): Promise<ClusterNode> {
    return joinCluster(this.db, node);
  }

  heartbeat(id: string, failureTimeoutMs: number, redisReachable?: boolean): Promise<boolean> {
    return heartbeat(this.db, id, failureTimeoutMs, redisReachable);
  }

  leave(id: string): Promise<void> {
    return leaveCluster(this.db, id);
  }

  live(failureTimeoutMs: number): Promise<ClusterNode[]> {
    return liveNodes(this.db, failureTimeoutMs);
  }

  all(failureTimeoutMs: number): Promise<ClusterNodeStatus[]> {
    return allNodes(this.db, failureTimeoutMs);
  }
}
