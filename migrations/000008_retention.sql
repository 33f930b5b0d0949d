-- 000008_retention: finished tasks leave after `retentionSeconds`; expired idempotency keys
-- leave as soon as they expire (docs/decisions/0015-retention.md).
--
-- A finished task (succeeded, failed, cancelled) whose completed_at is older than now minus
-- the retention is deleted with its executions and its own dependency edges, in bounded
-- batches, by the node that owns its wheel partition (src/store/sql/retention.ts). Measured
-- against time-partitioned tables dropped whole, see the decision.
--
-- Both indexes use IF NOT EXISTS: on a large existing table, build them beforehand with
-- CREATE INDEX CONCURRENTLY under the same names and this migration leaves them as they are
-- (inside the migration's transaction an index build holds writes off the table until done).

-- The finished tasks of one partition in completion order: what the sweep walks. Partial, so
-- pending, blocked, running tasks and live schedules are not in it. Its one cost on the hot
-- path is one index entry written by the statement that ends a task (a status change is never
-- a HOT update, so that statement writes the other index entries anyway); claims, heartbeats
-- and retries write nothing here.
CREATE INDEX IF NOT EXISTS tasks_finished_idx ON tasks (partition, completed_at, id)
  WHERE status IN ('succeeded', 'failed', 'cancelled');

-- Expired idempotency keys, oldest first. Without it every purge batch read the table from
-- the start until it had found its batch: after a few rounds of deletes and reuse of the freed
-- space, expired keys sit scattered, and a batch read most of a table that holds 24 h of keys.
CREATE INDEX IF NOT EXISTS idempotency_keys_expires_idx ON idempotency_keys (expires_at);

-- The latest retention horizon a sweep applied: every finished task that ended before it may
-- be gone. One row. A read of a task that is not there, whose id (UUID v7: creation time)
-- is older than the horizon, is told that it may have passed retention, instead of a bare
-- "no task has this id"; nothing is kept per removed task (a tombstone per task would grow
-- again with the task count).
CREATE TABLE retention_horizon (
  singleton    boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
  horizon      timestamptz NOT NULL,
  -- The retention the sweep that set `horizon` applied, for the message.
  retention_ms bigint      NOT NULL
);
