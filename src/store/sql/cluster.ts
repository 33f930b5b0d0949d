import { WheelhouseError } from '../../lib/errors.js';
import type { Db } from '../db.js';
import type { ClusterNode, ClusterNodeStatus, NodeState } from '../../runtime/membership-store.js';
import { msOf } from './columns.js';

/**
 * The membership statements over `cluster_nodes` (migrations/000004_cluster.sql).
 *
 * Every time here is the database's: `now()` stamps heartbeats and judges their age, so all
 * nodes measure liveness on one clock, whatever their own clocks say (the migration weighs
 * this against the application clock the rest of the schema uses). `now()` is the start of
 * the statement's transaction; each statement here runs on its own.
 */

/** SQL: the database's now, truncated to the whole millisecond like every stored time. */
const NOW = `date_trunc('milliseconds', now())`;

/** SQL: "this heartbeat is younger than the failure timeout in parameter `$n` (ms)". */
function fresh(n: number, alias = 'n'): string {
  return `${alias}.heartbeat_at > now() - $${n}::float8 * interval '1 millisecond'`;
}

/** SQL: "`$n` (a failure timeout, ms) before `at`". */
function timeoutBefore(at: string, n: number): string {
  return `${at} - $${n}::float8 * interval '1 millisecond'`;
}

/** SQL: "the store came back from an outage less than a failure timeout (`$n`) ago". */
function inGrace(n: number): string {
  return `EXISTS (SELECT 1 FROM cluster_store s WHERE s.store_resumed_at > ${timeoutBefore('now()', n)})`;
}

/**
 * SQL: live by its heartbeat; or, for a failure timeout after an outage of the store, by having
 * been live when the store went away (migrations/000019_cluster_store_gap.sql).
 */
function beating(n: number, alias = 'n'): string {
  return `(${fresh(n, alias)} OR EXISTS (
    SELECT 1 FROM cluster_store s
    WHERE s.store_resumed_at > ${timeoutBefore('now()', n)}
      AND ${alias}.heartbeat_at > ${timeoutBefore('s.last_beat_before', n)}))`;
}

const NODE_COLUMNS = `n.id, n.address, ${msOf('n.started_at')} AS started_ms, ${msOf('n.heartbeat_at')} AS heartbeat_ms, n.state, n.redis_reachable`;

/**
 * Join or rejoin, whatever the row's state. started_at is at least a millisecond past the
 * previous incarnation's, so it tells incarnations apart even when a restart lands in the
 * same millisecond or the database clock stepped back.
 */
const JOIN = `
  INSERT INTO cluster_nodes AS n (id, address, started_at, heartbeat_at, state, redis_reachable)
  VALUES ($1, $2, ${NOW}, ${NOW}, 'live', true)
  ON CONFLICT (id) DO UPDATE
    SET address = excluded.address,
        started_at = greatest(excluded.started_at, n.started_at + interval '1 millisecond'),
        heartbeat_at = excluded.heartbeat_at,
        state = 'live',
        redis_reachable = true
  RETURNING ${NODE_COLUMNS}`;

/**
 * The heartbeat is a compare-and-set on "still in the cluster": the same freshness test as the
 * live set, so it fails exactly when the other nodes already count this one out. The first
 * heartbeat that finds no live node fresh (the store was away from all of them: a failover, a
 * restart) opens the grace after an outage (`gap`), and is itself let in by it. A `leaving`
 * node (draining) still heartbeats. It says whether the node reaches Redis ($3: see
 * migration 000015). It changes no indexed column: a HOT update.
 *
 * `gap` is read through a one-row aggregate joined in FROM, so the main plan reads it before
 * it reaches the node's row. Read only from the WHERE (an `OR EXISTS` that runs when the node
 * is not beating), its first read could fall in the re-check Postgres makes after waiting on
 * a concurrent write to the row (EvalPlanQual), which fails with "ModifyTable should not be
 * called during EvalPlanQual": a rejoin seen as a store error.
 */
const HEARTBEAT = `
  WITH gap AS (
    UPDATE cluster_store s
    SET store_resumed_at = now(),
        last_beat_before = (SELECT max(o.heartbeat_at) FROM cluster_nodes o WHERE o.state = 'live')
    WHERE NOT EXISTS (SELECT 1 FROM cluster_nodes o WHERE o.state = 'live' AND ${fresh(2, 'o')})
      AND NOT ${inGrace(2)}
    RETURNING s.last_beat_before
  )
  UPDATE cluster_nodes n SET heartbeat_at = ${NOW}, redis_reachable = $3
  FROM (SELECT max(last_beat_before) AS last_beat_before FROM gap) g
  WHERE n.id = $1 AND n.state <> 'left'
    AND (${beating(2)} OR n.heartbeat_at > ${timeoutBefore('g.last_beat_before', 2)})
  RETURNING n.id`;

const LEAVE = `UPDATE cluster_nodes n SET state = 'left' WHERE n.id = $1 AND n.state <> 'left'`;

/**
 * Ordered by id under the "C" collation, byte order, which for the ASCII ids a node may have
 * is the order of JavaScript's sort: the list is the same on every node whatever the
 * database's collation, and already in the order RingPlacement sorts into.
 */
const LIVE = `
  SELECT ${NODE_COLUMNS} FROM cluster_nodes n
  WHERE n.state = 'live' AND ${beating(1)}
  ORDER BY n.id COLLATE "C"`;

const ALL = `
  SELECT ${NODE_COLUMNS}, n.state = 'live' AND ${beating(1)} AS live,
         greatest(0, round(date_part('epoch', now() - n.heartbeat_at) * 1000)) AS heartbeat_age_ms
  FROM cluster_nodes n
  ORDER BY n.id COLLATE "C"`;

interface NodeRow {
  id: string;
  address: string;
  started_ms: number;
  heartbeat_ms: number;
  state: NodeState;
  redis_reachable: boolean;
}

function toClusterNode(row: NodeRow): ClusterNode {
  return {
    id: row.id,
    address: row.address,
    startedMs: row.started_ms,
    heartbeatMs: row.heartbeat_ms,
    state: row.state,
    redisReachable: row.redis_reachable,
  };
}

function checkTimeout(failureTimeoutMs: number): void {
  if (!Number.isFinite(failureTimeoutMs) || failureTimeoutMs <= 0) {
    throw new WheelhouseError(
      'internal',
      `failureTimeoutMs must be a positive number of ms, got ${String(failureTimeoutMs)}.`,
    );
  }
}

/** See `MembershipStore.join`. */
export async function joinCluster(db: Db, node: { id: string; address: string }): Promise<ClusterNode> {
  if (node.id === '') throw new WheelhouseError('internal', 'A node id is empty.');
  const { rows } = await db.query<NodeRow>(JOIN, [node.id, node.address], 'wh_cluster_join');
  return toClusterNode(rows[0]!);
}

/** See `MembershipStore.heartbeat`. */
export async function heartbeat(db: Db, id: string, failureTimeoutMs: number, redisReachable = true): Promise<boolean> {
  checkTimeout(failureTimeoutMs);
  const { rows } = await db.query<{ id: string }>(
    HEARTBEAT,
    [id, failureTimeoutMs, redisReachable],
    'wh_cluster_heartbeat',
  );
  return rows.length > 0;
}

/** See `MembershipStore.leave`. */
export async function leaveCluster(db: Db, id: string): Promise<void> {
  await db.query(LEAVE, [id], 'wh_cluster_leave');
}

/** See `MembershipStore.live`. */
export async function liveNodes(db: Db, failureTimeoutMs: number): Promise<ClusterNode[]> {
  checkTimeout(failureTimeoutMs);
  const { rows } = await db.query<NodeRow>(LIVE, [failureTimeoutMs], 'wh_cluster_live');
  return rows.map(toClusterNode);
}

/** See `MembershipStore.all`. */
export async function allNodes(db: Db, failureTimeoutMs: number): Promise<ClusterNodeStatus[]> {
  checkTimeout(failureTimeoutMs);
  const { rows } = await db.query<NodeRow & { live: boolean; heartbeat_age_ms: number }>(
    ALL,
    [failureTimeoutMs],
    'wh_cluster_all',
  );
  return rows.map((row) => ({ ...toClusterNode(row), live: row.live, heartbeatAgeMs: row.heartbeat_age_ms }));
}
