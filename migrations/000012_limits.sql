-- 000012_limits: flow control (issue 28, docs/decisions/0023-flow-control.md).
--
-- `limits` holds what operators declare: exact keys (`stripe-api`, `customer:42`,
-- `type:email.send`) and families (`customer:*`, the default of every `customer:<anything>`).
-- Nothing here counts: a key's running tasks are its live, fenced leases (the task rows in
-- `running` that name it) and its actor derives them on activation. The actor's fence is its
-- row in `actor_snapshots` (kind 'limit'), which every claim of a gated task locks FOR SHARE
-- and compares with the epoch its grant was made under.
--
-- `tasks.limits`: the names a task takes part in (sorted, without its type's `type:<t>`);
-- NULL for the tasks that name none, which keeps them out of the index below.

CREATE TABLE limits (
  name           text             PRIMARY KEY,
  concurrency    integer          CHECK (concurrency >= 0),
  rate_limit     integer          CHECK (rate_limit > 0),
  rate_period_ms integer          CHECK (rate_period_ms > 0),
  rate_burst     integer          NOT NULL DEFAULT 0 CHECK (rate_burst >= 0),
  on_limit       text             NOT NULL DEFAULT 'queue'
                   CHECK (on_limit IN ('queue', 'cancel_running', 'cancel_new', 'keep_latest_waiting')),
  weight         double precision NOT NULL DEFAULT 1 CHECK (weight > 0),
  created_at     timestamptz      NOT NULL,
  updated_at     timestamptz      NOT NULL,
  CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL))
);

ALTER TABLE tasks ADD COLUMN limits text[];

-- A key's live tasks (its holders and its waiting tasks), read by the key's actor when it
-- activates, and `GET /api/limits/{name}`'s counts. Partial: finished tasks, and every task
-- that names no limit, are not in it.
CREATE INDEX tasks_live_limits_idx ON tasks USING gin (limits)
  WHERE limits IS NOT NULL AND status IN ('pending', 'running');
