-- 000018_waiting: a parent waits for its children without holding a worker (issue 30;
-- docs/api.md, "Children of a running task"; docs/decisions/0033-waiting-for-children.md).
--
-- An attempt may end "waiting for my children": the task's status becomes `waiting` (no lease,
-- so no worker slot and no limit permit) and its unfinished children become its predecessors on
-- the dependency machinery of 000003 (task_dependencies edges, deps_total/deps_satisfied, the
-- outbox, the DAG node actor). When every edge is satisfied the task is `pending` again and runs
-- once more.
ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check CHECK (status IN (
  'blocked', 'pending', 'running', 'succeeded', 'failed', 'cancelled', 'expired',
  'active', 'paused', 'waiting'));

-- How many attempts ended waiting for children: those are not failures, so a retry is decided
-- on `attempts - child_waits`; non-zero also tells the claim to hand the children's summary on.
ALTER TABLE tasks ADD COLUMN child_waits integer NOT NULL DEFAULT 0;
-- What a child that does not succeed does to its waiting parent: `fail` it, or `continue`
-- (the edge is satisfied by any final state). NULL: the task never waited.
ALTER TABLE tasks ADD COLUMN on_child_failure text CHECK (on_child_failure IN ('fail', 'continue'));

-- The attempt that ended waiting keeps a row of its own in the history.
ALTER TABLE executions DROP CONSTRAINT executions_status_check;
ALTER TABLE executions ADD CONSTRAINT executions_status_check CHECK (status IN (
  'succeeded', 'failed', 'timed_out', 'cancelled', 'waiting'));

-- The safety-net sweep pages through every task that waits on edges, blocked or waiting.
CREATE INDEX tasks_awaiting_deps_idx ON tasks (id) WHERE status IN ('blocked', 'waiting') AND deps_total > 0;
DROP INDEX tasks_blocked_deps_idx;
