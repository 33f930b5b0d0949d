-- 000013_debounce: debounce on submit (issue 28, API.md "Flow control" → `debounce`).
--
-- A submit that carries `debounce: { key, seconds, max_wait_seconds }` merges into the task of
-- the same task type and key that is still `pending`: it replaces that task's payload and moves
-- its due time to now + seconds, never past `debounce_until` (its first submit +
-- max_wait_seconds). Once the task left `pending` (a claim took it, a cancel ended it) it is out
-- of the index below, and the next submit of the key makes a new task.
--
-- The unique partial index is what makes that one statement (src/store/sql/debounce.ts):
-- INSERT … ON CONFLICT on it DO UPDATE. Two concurrent submits of one key serialise on it (one
-- inserts, the other waits and updates that row); a claim that moved the row to `running`
-- first takes it out of the index, so the submit that waited on it inserts a new task. Only
-- debounced tasks are in it (every other task has no key), so it costs nothing elsewhere.
--
-- Nullable columns without defaults: adding them rewrites nothing.

ALTER TABLE tasks
  ADD COLUMN debounce_key text,
  ADD COLUMN debounce_until timestamptz;

CREATE UNIQUE INDEX tasks_debounce_idx ON tasks (task_type, debounce_key)
  WHERE status = 'pending' AND debounce_key IS NOT NULL;
