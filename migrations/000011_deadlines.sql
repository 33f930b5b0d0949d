-- 000011_deadlines: every attempt ends, and a task may have to start in time.
--
-- The execution deadline (issue 27, docs/design.md "Leases and deadlines"). `timeout_seconds`
-- used to be the lease's length, and a lease is extended by every heartbeat — on the worker
-- channel the node heartbeats the leases of an open socket itself — so a handler that hung held
-- its task for ever. Now the claim also writes `deadline_at` (the claim's time + timeout_seconds),
-- and no heartbeat moves the lease past it: at the deadline the lease runs out and the attempt
-- ends as a timeout, whatever the worker or its socket does. A worker may push the deadline
-- later explicitly (`extend_seconds`), never past the attempt's start + `max_timeout_seconds`
-- (NULL: timeout_seconds, no extension). The lease stays the worker's liveness; the deadline
-- is the attempt's length.
--
-- The start deadline: `start_deadline_seconds` (NULL: none) is how long a task may wait to start
-- after its due time; one that has not started by then ends `expired`, a terminal status of its
-- own. `start_by` is that instant, kept in the row so that the node's sweep of expired tasks is
-- a range scan of an index keyed by it (below): a trigger writes it whenever `due_time` is
-- written (a submit, a dependency satisfied, a retry's backoff, a manual retry), so no
-- statement that moves a due time can forget it. The trigger's WHEN clause is tested in C,
-- without calling the function, so a task without a start deadline — nearly all of them —
-- pays a null test per insert and per update that sets `due_time`.
--
-- Nullable columns without defaults: adding them rewrites nothing.

ALTER TABLE tasks
  ADD COLUMN deadline_at timestamptz,
  ADD COLUMN max_timeout_seconds integer CHECK (max_timeout_seconds > 0),
  ADD COLUMN start_deadline_seconds integer CHECK (start_deadline_seconds > 0),
  ADD COLUMN start_by timestamptz;

-- Attempts running when this is applied get the deadline their lease length implied.
UPDATE tasks SET deadline_at = started_at + timeout_seconds * interval '1 second'
WHERE status = 'running' AND started_at IS NOT NULL;

CREATE FUNCTION tasks_start_by() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.start_by := NEW.due_time + NEW.start_deadline_seconds * interval '1 second';
  RETURN NEW;
END
$$;

CREATE TRIGGER tasks_start_by BEFORE INSERT OR UPDATE OF due_time, start_deadline_seconds ON tasks
  FOR EACH ROW WHEN (NEW.start_deadline_seconds IS NOT NULL) EXECUTE FUNCTION tasks_start_by();

-- `expired`: a task that did not start within its start deadline.
ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check CHECK (status IN (
  'blocked', 'pending', 'running', 'succeeded', 'failed', 'cancelled', 'expired',
  'active', 'paused'));

-- The pending tasks of a partition that carry a start deadline, by that deadline: the sweep
-- reads the entries whose deadline passed and no others. Partial: tasks without a start
-- deadline, and every task once it left `pending`, are not in it. It is read with an ordered
-- index scan (ORDER BY start_by LIMIT), which marks the entries of row versions that a claim
-- left dead as it passes them, so a pass does not re-read them (the bitmap scan of decision
-- 0020 never marked them).
CREATE INDEX tasks_start_by_idx ON tasks (partition, start_by)
  WHERE status = 'pending' AND start_by IS NOT NULL;

-- Retention walks finished tasks; `expired` is finished. The index of 000008 is replaced by one
-- whose predicate includes it (on a large table, build tasks_ended_idx beforehand with
-- CREATE INDEX CONCURRENTLY under this name: IF NOT EXISTS leaves it as it is).
CREATE INDEX IF NOT EXISTS tasks_ended_idx ON tasks (partition, completed_at, id)
  WHERE status IN ('succeeded', 'failed', 'cancelled', 'expired');
DROP INDEX tasks_finished_idx;
