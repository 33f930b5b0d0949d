-- 000023_limits_index_by_status: a limit key's holders are found among the running rows that
-- name it, not among all its live rows (issue 28, W6).
--
-- `tasks_live_limits_idx` held the pending and the running rows of every key together, so a
-- key's read of its holders (its running rows: at most its concurrency) went through all its
-- pending rows too: 200 000 heap rows for W6's flood key to find 50 running, 43 ms on an idle
-- machine and 400–500 ms at the top of the hour, while the 99 quiet keys' claims waited behind
-- it on two busy cores. Split by status, the holders' read costs the holders; the waiting read
-- costs the pending rows, as before. Every row version is in one of the two, as it was in the
-- one: a submit and a claim write the same number of entries as before.
-- (On a large table, build them beforehand with CREATE INDEX CONCURRENTLY under these names:
-- IF NOT EXISTS leaves them as they are.)
CREATE INDEX IF NOT EXISTS tasks_pending_limits_idx ON tasks USING gin (limits) WITH (fastupdate = off)
  WHERE limits IS NOT NULL AND status = 'pending';
CREATE INDEX IF NOT EXISTS tasks_running_limits_idx ON tasks USING gin (limits) WITH (fastupdate = off)
  WHERE limits IS NOT NULL AND status = 'running';
DROP INDEX IF EXISTS tasks_live_limits_idx;
