-- 000016_operations: operations on many tasks (issue 30; docs/decisions/0032-operations-as-a-ring-duty.md).
--
-- One row per operation (`POST /api/operations`): what it does, to which tasks, and how far it
-- got. The row is the record an operation resumes from: each page's action on the tasks and
-- the page's progress (`cursor`, `pages`, the counts) are written in one transaction, with the
-- row locked (`FOR UPDATE`), so whichever node runs the next page starts where the last
-- committed page ended, and no task is acted on twice.
--
-- `walk_before`: the walk by task id stops below it (the lowest UUID v7 of the millisecond
-- after the operation started), so tasks submitted after the start are not looked at and an
-- operation ends however fast tasks arrive. `filter` is the filter as the service holds it.
CREATE TABLE operations (
  id          uuid        PRIMARY KEY,
  action      text        NOT NULL CHECK (action IN ('cancel', 'retry', 'delete')),
  filter      jsonb       NOT NULL,
  state       text        NOT NULL CHECK (state IN ('running', 'done', 'cancelled', 'failed')),
  walk_before uuid        NOT NULL,
  cursor      uuid,
  pages       integer     NOT NULL DEFAULT 0,
  matched     bigint      NOT NULL DEFAULT 0,
  done        bigint      NOT NULL DEFAULT 0,
  failed      bigint      NOT NULL DEFAULT 0,
  error       text,
  started_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL,
  finished_at timestamptz
);

-- What each node reads every second to find the operations to run: the running ones only.
CREATE INDEX operations_running_idx ON operations (id) WHERE state = 'running';
