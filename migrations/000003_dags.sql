-- 000003_dags: task dependencies (DAGs).
--
-- A task that waits on predecessors is `blocked`. Its edges are rows of task_dependencies,
-- each with a `satisfied` flag; the task row counts them (deps_total) and the satisfied
-- ones (deps_satisfied). Flipping an edge and counting it happen in one statement, only for
-- an edge that was not yet satisfied, so a replayed "predecessor succeeded" never counts
-- twice. When deps_satisfied reaches deps_total the task becomes `pending` and takes the
-- ordinary wheel path.

ALTER TABLE tasks
  -- The graph a task was submitted in (POST /api/dags) and its local name there.
  ADD COLUMN dag_id uuid,
  ADD COLUMN dag_ref text,
  -- Predecessors, and how many of them have succeeded. 0/0 for a task without any.
  ADD COLUMN deps_total integer NOT NULL DEFAULT 0,
  ADD COLUMN deps_satisfied integer NOT NULL DEFAULT 0,
  -- Some task depends on this one. The completion path reads it from the row it already
  -- updates, so a task nobody waits for costs the dependency machinery nothing.
  ADD COLUMN has_dependents boolean NOT NULL DEFAULT false;

-- One row per edge. The primary key serves "my predecessors" (reconcile); the second index
-- "who waits on this predecessor" (the resolver). No foreign keys, as for executions: the
-- RI triggers would lock predecessor rows on the hot completion path.
CREATE TABLE task_dependencies (
  task_id        uuid    NOT NULL,
  predecessor_id uuid    NOT NULL,
  satisfied      boolean NOT NULL DEFAULT false,
  PRIMARY KEY (task_id, predecessor_id)
);
CREATE INDEX task_dependencies_predecessor_idx ON task_dependencies (predecessor_id);

-- The outbox of finished predecessors: written in the same statement that makes a task with
-- dependents final, deleted once every dependent has taken it in. A node that dies in
-- between leaves the row, and whoever replays it next reaches the dependents: nothing
-- waits for a sweep. Rows live for milliseconds; the table stays tiny.
CREATE TABLE dag_events (
  predecessor_id uuid        PRIMARY KEY,
  status         text        NOT NULL,
  created_at     timestamptz NOT NULL
);

-- A graph's tasks (GET /api/dags/{id}).
CREATE INDEX tasks_dag_idx ON tasks (dag_id) WHERE dag_id IS NOT NULL;

-- The safety-net sweep pages through the tasks that wait on predecessors. Partial: cron
-- instances held `blocked` for overlap have no predecessors and are not in it.
CREATE INDEX tasks_blocked_deps_idx ON tasks (id) WHERE status = 'blocked' AND deps_total > 0;
