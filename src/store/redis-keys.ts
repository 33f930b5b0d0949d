/**
 * Key names of the fast index. Every key starts with `${prefix}:`. Keys that one script
 * touches together share a hash tag, so they would share a Redis Cluster slot: a
 * partition's buckets, index and marker use `{p<partition>}`, the ready queues `{rq}`.
 *
 * The exception is a partition's fence (`fenceKey`): the bucket scripts read it beside the
 * partition's buckets and the ready-queue push reads the fences of several partitions
 * beside the queues, so no one tag fits all of them. It carries none; the fast index runs
 * on a single Redis server (or primary), not on Redis Cluster.
 */

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
  const base = `${prefix}:{p${partition}}`;
  return { minutes: `${base}:minutes`, bucketPrefix: `${base}:b:`, intact: `${base}:intact` };
}

/** The keys of the ready queues. */
export interface ReadyKeys {
  /** SET of queue names `priority:taskType`, every queue pushed to. */
  registry: string;
  /** ZSET of taken, unacknowledged entries (score = taken at ms). */
  inFlight: string;
  /** A queue's key is this followed by its name `priority:taskType`. */
  queuePrefix: string;
}

/** The keys of the ready queues, all tagged `{rq}`. */
export function readyKeys(prefix: string): ReadyKeys {
  const base = `${prefix}:{rq}`;
  return { registry: `${base}:queues`, inFlight: `${base}:inflight`, queuePrefix: `${base}:q:` };
}

/**
 * A partition's fence: the highest ownership epoch claimed for the partition's wheel, as an
 * integer string; absent counts as 0. Read by every fenced write to the partition's buckets
 * and by fenced ready-queue pushes.
 */
export function fenceKey(prefix: string, partition: number): string {
  return `${prefix}:fence:${partition}`;
}

/**
 * The pub/sub channel on which ready queues announce pushes to one another. A message is
 * `senderId|taskType|taskType|…` (neither ids nor task types hold `|`).
 */
export function pushedChannel(prefix: string): string {
  return `${prefix}:pushed`;
}
