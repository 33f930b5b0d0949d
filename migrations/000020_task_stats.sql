-- 000020_task_stats: a kept history of task activity, per minute, task type and node (issue 30;
-- docs/decisions/0034-task-stats-rollup.md; GET /admin/stats, the dashboard's Activity page).
--
-- Each node counts in memory what its own events already say (submissions, claims, results,
-- expired leases and start deadlines; src/services/task-stats.ts) and adds its counts to its
-- own rows once per flush (every 10 s by default), in ONE statement for every row it touched:
-- the write cost does not grow with the task rate, only with the task types active in a flush.
-- A node writes only rows of its own `node_id`, so nodes never wait on each other's rows; a
-- reader sums the nodes.
--
-- `lag_buckets[i]` counts the attempts whose start lag (start - due) was at most the i-th bound
-- of START_LAG_BOUNDS_MS in src/domain/task-stats.ts (the last one: above every bound), so a
-- p50 or p99 over any range of rows is estimated from their sums. Rows older than
-- `statsRetentionDays` (7) are deleted by the flush, at most once an hour per node.
CREATE TABLE task_stats (
  minute      timestamptz NOT NULL,
  task_type   text        NOT NULL,
  node_id     text        NOT NULL,
  submitted   integer     NOT NULL DEFAULT 0,
  started     integer     NOT NULL DEFAULT 0,
  succeeded   integer     NOT NULL DEFAULT 0,
  failed      integer     NOT NULL DEFAULT 0,
  retried     integer     NOT NULL DEFAULT 0,
  cancelled   integer     NOT NULL DEFAULT 0,
  expired     integer     NOT NULL DEFAULT 0,
  lag_sum_ms  bigint      NOT NULL DEFAULT 0,
  lag_max_ms  integer     NOT NULL DEFAULT 0,
  lag_buckets integer[]   NOT NULL,
  -- The minute first: a range of time is one range of the key, and the trim deletes a prefix.
  PRIMARY KEY (minute, task_type, node_id)
);
