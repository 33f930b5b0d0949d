-- 000007_results_progress: a task's result and its latest progress.
--
-- `result` is what the worker's succeeded attempt returned (any JSON, held to `maxResultBytes`
-- by the routes), written by the completion statement that ends the attempt. Only a succeeded
-- attempt has one, and a succeeded attempt always ends its task, so the result lives on the task
-- row and the history reads it from there: execution rows are written only for attempts the task
-- outlives (failures retried, leases expired), which never carry a result, so `executions` gains
-- no column.
--
-- `progress` is the latest progress a worker reported for the running attempt (any JSON, same
-- cap), `progress_at` when it was recorded. A retry clears both, so a new attempt does not show
-- the last one's; a task that ends keeps its last progress.
--
-- Nullable columns without defaults: adding them rewrites nothing. None is indexed, so a
-- progress update, like a heartbeat, changes no indexed column and can be a HOT update.

ALTER TABLE tasks
  ADD COLUMN result jsonb,
  ADD COLUMN progress jsonb,
  ADD COLUMN progress_at timestamptz;
