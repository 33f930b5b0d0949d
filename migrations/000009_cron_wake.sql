-- 000009_cron_wake: a cron schedule's actor leaves memory between fires; the wheel wakes it.
--
-- `wake_time` is when the schedule's actor must next act: the handling time of its current
-- instance (its due time, plus the spread of the next instance's write), written by every
-- schedule write that moves it. Each schedule row's wake is a due entry on the wheel partition
-- of the row (`partition`), which hands it to the actor when it comes instead of pushing it to
-- a ready queue; a partition that rebuilds reads the wakes back from here, as it reads the
-- pending tasks. A new schedule's wake is its submission time (its actor must create its first
-- instance). See docs/decisions/0016-cron-passivation.md.
--
-- Active schedules get their next nominal fire time: their actor wakes then and computes its
-- own handling time.

ALTER TABLE tasks ADD COLUMN wake_time timestamptz;

UPDATE tasks SET wake_time = due_time WHERE schedule_type = 'cron' AND status = 'active';

-- The wakes of a partition in time order: a partition's rebuild (its near window, or all of it)
-- and the overdue ones (a node taking over a partition; the safety net). Partial: only active
-- schedules have a wake.
CREATE INDEX tasks_cron_wake_idx ON tasks (partition, wake_time, id)
  WHERE schedule_type = 'cron' AND status = 'active';

-- Nodes no longer activate every active schedule at start: the index they read it by goes.
DROP INDEX tasks_active_cron_idx;
