/**
 * Key names of the fast index. Every key starts with `${prefix}:`. Keys that one script
 * touches together share a hash tag, so they would share a Redis Cluster slot: a
 * partition's buckets, index and marker use `{p<partition>}`, the ready queues `{rq}`.
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
