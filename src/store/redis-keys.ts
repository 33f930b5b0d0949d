/**
 * Key names of the fast index. Every key starts with `${prefix}:`. Keys that one script (or
 * one MULTI) touches together share a hash tag, so they share a Redis Cluster slot:
 *
 * - `{p<partition>}`: a wheel partition's far buckets, their minute index, its intact marker
 *   and its fence — and, in the partitioned layout, its ready queues, their registry and its
 *   in-flight set. Every script that writes for a partition, fenced or not, checks the fence in
 *   the slot of what it writes.
 * - `{t:<taskType>}`: in the partitioned layout, the registry of the partitions whose ready
 *   queues of that type may hold entries, and its change counter.
 * - `{rq}`: in the single-server layout, every ready queue, their registry and the in-flight
 *   set; its push script also reads the fences of the partitions it pushes for, which lie in
 *   other slots, so this layout runs on one Redis server (or primary) only.
 *
 * Which layout a node uses: docs/decisions/0017-redis-cluster.md — the single-server one on a
 * Redis server (one script per claim), the partitioned one on Redis Cluster (`redisCluster`).
 */

/** The hash tag of a wheel partition's keys. */
function partitionBase(prefix: string, partition: number): string {
  return `${prefix}:{p${partition}}`;
}

/** The keys of one partition's far buckets. */
export interface BucketKeys {
  /** ZSET of the partition's bucket minutes (member = score = minute start ms). */
  minutes: string;
  /** A bucket's key is this followed by its minute start ms. */
  bucketPrefix: string;
  /** Present while the partition's buckets are complete (see `setIntact`). */
  intact: string;
}

/** The keys of a partition's far buckets, all tagged `{p<partition>}`. */
export function bucketKeys(prefix: string, partition: number): BucketKeys {
  const base = partitionBase(prefix, partition);
  return { minutes: `${base}:minutes`, bucketPrefix: `${base}:b:`, intact: `${base}:intact` };
}

/**
 * A partition's fence: the highest ownership epoch claimed for the partition's wheel, as an
 * integer string; absent counts as 0. Read by every fenced write to the partition's buckets
 * and by fenced ready-queue pushes. Tagged `{p<partition>}`, beside what it fences.
 */
export function fenceKey(prefix: string, partition: number): string {
  return `${partitionBase(prefix, partition)}:fence`;
}

/** The keys of a set of ready queues: all of them (single-server layout) or one partition's. */
export interface ReadyKeys {
  /** SET of queue names `priority:taskType`, every queue pushed to. */
  registry: string;
  /** ZSET of taken, unacknowledged entries (score = taken at ms). */
  inFlight: string;
  /** A queue's key is this followed by its name `priority:taskType`. */
  queuePrefix: string;
}

/** The single-server layout's ready queues, all tagged `{rq}`. */
export function readyKeys(prefix: string): ReadyKeys {
  const base = `${prefix}:{rq}`;
  return { registry: `${base}:queues`, inFlight: `${base}:inflight`, queuePrefix: `${base}:q:` };
}

/** The partitioned layout's ready queues of one partition, tagged `{p<partition>}` like its buckets and fence. */
export function partitionReadyKeys(prefix: string, partition: number): ReadyKeys {
  const base = partitionBase(prefix, partition);
  return { registry: `${base}:queues`, inFlight: `${base}:inflight`, queuePrefix: `${base}:q:` };
}

/** The keys of a task type's partition registry (partitioned layout). */
export interface TypeRegistryKeys {
  /**
   * ZSET of `priority:partition`, one per partition whose queue of the type at that priority
   * may hold entries; score = the registry's change counter when the member was last bumped.
   */
  partitions: string;
  /** The change counter: INCR'd by every bump, so a score is never given twice. */
  counter: string;
}

/** A task type's partition registry, tagged `{t:<taskType>}` (task types hold no braces). */
export function typeRegistryKeys(prefix: string, taskType: string): TypeRegistryKeys {
  const base = `${prefix}:{t:${taskType}}`;
  return { partitions: `${base}:partitions`, counter: `${base}:counter` };
}

/**
 * The pub/sub channel on which ready queues announce pushes to one another. A message is
 * `senderId|taskType|taskType|…` (neither ids nor task types hold `|`). A channel is no key:
 * on Redis Cluster a PUBLISH reaches the subscribers of every node.
 */
export function pushedChannel(prefix: string): string {
  return `${prefix}:pushed`;
}
