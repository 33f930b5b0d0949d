-- 000002_cron: cron schedules and their instances.
--
-- A cron schedule is one row of `tasks` (schedule_type 'cron', status active | paused |
-- cancelled | succeeded once it has no fire time left), its definition in `schedule` and its
-- next nominal fire time in `due_time`. Each fire time it reaches becomes one ordinary task
-- row, an instance, linked to the schedule by `schedule_id`. The instance's id is derived
-- from (schedule id, fire time) (src/ids.ts `instanceId`), so inserting an instance twice —
-- a second activation of the schedule's actor, a retried write — hits the primary key and
-- creates nothing.

ALTER TABLE tasks
  -- Instances: the schedule that made this task, and the nominal fire time it stands for
  -- (`due_time` is that time plus the schedule's jitter).
  ADD COLUMN schedule_id uuid,
  ADD COLUMN fire_time timestamptz,
  -- Schedules: the nominal fire time of the latest instance that fired.
  ADD COLUMN last_fired_at timestamptz;

-- A schedule's instances, newest first (ids sort by fire time): history, the overlap check
-- ("is an earlier instance still pending or running?") and cancelling on pause/delete.
-- Partial: ordinary tasks, the vast majority, are not in it.
CREATE INDEX tasks_schedule_instances_idx ON tasks (schedule_id, id) WHERE schedule_id IS NOT NULL;

-- The active schedules, which a starting node activates eagerly.
CREATE INDEX tasks_active_cron_idx ON tasks (id) WHERE schedule_type = 'cron' AND status = 'active';
