-- 000025_start_by_without_trigger: `start_by` is written by the statements that move a due
-- time, and the trigger of 000011_deadlines fires on INSERT only.
--
-- A BEFORE UPDATE row trigger costs more than its WHEN clause: Postgres locks the row it would
-- show the trigger before it looks at the trigger's column list or its WHEN (ExecBRUpdateTriggers
-- fetches the old row with a tuple lock), so every UPDATE of `tasks` — every claim, result,
-- heartbeat and progress report, of tasks with or without a start deadline — wrote a Heap/LOCK
-- record of its own before its Heap/UPDATE. Measured with pg_walinspect over submit → claim →
-- complete of 1 000-task batches: 1.80 lock records a task in the claim and 1.56 in the result
-- with the trigger, 0.80 and 0.56 without it (the rest are updates whose new version goes to
-- another page), 1 499 → 1 386 bytes of WAL a task (issue 31).
--
-- Every UPDATE that sets `due_time` now sets `start_by` beside it (`dueTimeSet` in
-- src/store/sql/columns.ts): a result's and an expiry's retry, a manual retry, a dependency
-- satisfied, a parent's wait for its children, a debounced merge, a cron schedule's next fire.
-- `start_deadline_seconds` is written only at insert. An insert still runs the trigger, whose
-- WHEN is tested without calling the function, and a BEFORE INSERT trigger takes no lock.

DROP TRIGGER tasks_start_by ON tasks;

CREATE TRIGGER tasks_start_by BEFORE INSERT ON tasks
  FOR EACH ROW WHEN (NEW.start_deadline_seconds IS NOT NULL) EXECUTE FUNCTION tasks_start_by();
