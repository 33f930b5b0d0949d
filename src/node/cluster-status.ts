import { WHEEL } from '../actors/wheel-partition.js';
import type { Cluster } from '../runtime/cluster.js';
import type { ClusterNodeStatus } from '../runtime/membership-store.js';
import { formatSpread, type RingPlacement } from '../runtime/ring.js';
import type { SnapshotStore } from '../runtime/snapshots.js';

/** What `GET /admin/cluster` shows. */
export interface ClusterStatus {
  node_id: string;
  heartbeat_ms: number | null;
  failure_timeout_ms: number | null;
  ring_changes: number;
  nodes: {
    node_id: string;
    url: string;
    state: string;
    live: boolean;
    self: boolean;
    started_at: string | null;
    heartbeat_at: string | null;
    heartbeat_age_ms: number | null;
    /** What its last heartbeat said: false takes it out of the ring while another node reaches Redis. */
    redis_reachable: boolean | null;
  }[];
  ring: {
    nodes: readonly string[];
    vnodes_per_node: number;
    partitions_per_node: Record<string, number>;
    spread: string;
  };
  /**
   * Each wheel partition: `owner` is the node the ring names; `held_by` and `epoch` are the
   * fencing row in `actor_snapshots` (null `held_by`: released, its next owner not yet active).
   */
  partitions: { partition: number; owner: string; held_by: string | null; epoch: number | null }[];
}

export interface ClusterStatusSource {
  nodeId: string;
  url: string;
  partitions: number;
  ring: RingPlacement;
  /** null on the embedded backend, a cluster of one with no membership. */
  cluster: Cluster | null;
  heartbeatMs: number;
  snapshots: SnapshotStore;
}

/**
 * The cluster as any node sees it: the membership table, the ring this node routes by, and
 * for every wheel partition its ring owner next to the fencing row, so that an operator sees
 * a partition in hand-over (owner and holder differ) and how often it moved (its epoch).
 */
export async function clusterStatus(source: ClusterStatusSource): Promise<ClusterStatus> {
  const { ring, cluster } = source;
  const keys = Array.from({ length: source.partitions }, (_, p) => String(p));
  const [rows, members] = await Promise.all([
    source.snapshots.owners(WHEEL.name),
    cluster === null ? Promise.resolve(null) : cluster.nodes(),
  ]);
  const held = new Map(rows.map((row) => [row.key, row]));
  const spread = ring.spread(WHEEL.name, keys);
  return {
    node_id: source.nodeId,
    heartbeat_ms: cluster === null ? null : source.heartbeatMs,
    failure_timeout_ms: cluster?.failureTimeoutMs ?? null,
    ring_changes: cluster?.ringChanges ?? 0,
    nodes: members === null ? [selfOnly(source)] : members.map((m) => nodeView(m, source.nodeId)),
    ring: {
      nodes: ring.nodes(),
      vnodes_per_node: ring.vnodesPerNode,
      partitions_per_node: Object.fromEntries(spread),
      spread: formatSpread(spread),
    },
    partitions: keys.map((key) => {
      const row = held.get(key);
      return {
        partition: Number(key),
        owner: ring.ownerOf(WHEEL.name, key),
        held_by: row?.ownerNode ?? null,
        epoch: row?.epoch ?? null,
      };
    }),
  };
}

function nodeView(node: ClusterNodeStatus, selfId: string): ClusterStatus['nodes'][number] {
  return {
    node_id: node.id,
    url: node.address,
    state: node.state,
    live: node.live,
    self: node.id === selfId,
    started_at: new Date(node.startedMs).toISOString(),
    heartbeat_at: new Date(node.heartbeatMs).toISOString(),
    heartbeat_age_ms: node.heartbeatAgeMs,
    redis_reachable: node.redisReachable,
  };
}

function selfOnly(source: ClusterStatusSource): ClusterStatus['nodes'][number] {
  return {
    node_id: source.nodeId,
    url: source.url,
    state: 'live',
    live: true,
    self: true,
    started_at: null,
    heartbeat_at: null,
    heartbeat_age_ms: null,
    redis_reachable: null,
  };
}
