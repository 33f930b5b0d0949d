-- 000021_failed_idx: the dashboard's failures view (issue 30; `GET /admin/failures`).
--
-- The failed tasks, newest failure first. The view groups the newest failures by task type and
-- last error; without this index it would walk tasks_ended_idx, partition by partition, through
-- every succeeded and cancelled task too. Partial: a task enters it when it fails and leaves it
-- when it is retried or removed, so claims and successful completions never write it.
-- (On a large table, build it beforehand with CREATE INDEX CONCURRENTLY under this name: IF NOT
-- EXISTS leaves it as it is.)
CREATE INDEX IF NOT EXISTS tasks_failed_idx ON tasks (completed_at DESC, id DESC) WHERE status = 'failed';
