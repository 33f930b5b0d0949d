-- 000001_init: tasks, their executions, idempotency keys and actor snapshots.
--
-- Applied by src/store/migrate.ts inside one transaction, under an advisory lock, with
-- search_path set to the Wheelhouse schema: no name here is schema-qualified.
-- Append-only: never edit this file once it has landed; add 000002_….sql instead.
--
-- Times are timestamptz written from the application's clock (never now()), always whole
-- milliseconds, so that a Unix-ms value read back compares equal to the one written.

-- The system of record for tasks. One row per task (a cron schedule is one row too).
--
-- fillfactor 80: a task row is inserted once and then updated several times in quick
-- succession (claim, heartbeats, complete). Leaving a fifth of each page free lets a
-- heartbeat, which changes no indexed column, be a HOT update (no index writes), and lets
-- the non-HOT status changes put the new row version on the same page instead of
-- extending the table and touching the free-space map. Status changes cannot be HOT:
-- `status` appears in the (status, id) index and in the partial-index predicates.
CREATE TABLE tasks (
  id               uuid        PRIMARY KEY,
  task_type        text        NOT NULL,
  status           text        NOT NULL CHECK (status IN (
                     'blocked', 'pending', 'running', 'succeeded', 'failed', 'cancelled',
                     'active', 'paused')),
  version          integer     NOT NULL DEFAULT 0,
  schedule_type    text        NOT NULL CHECK (schedule_type IN ('immediate', 'delayed', 'cron')),
  due_time         timestamptz NOT NULL,
  priority         smallint    NOT NULL CHECK (priority BETWEEN 0 AND 9),
  partition        smallint    NOT NULL CHECK (partition >= 0),
  max_retries      integer     NOT NULL CHECK (max_retries >= 0),
  timeout_seconds  integer     NOT NULL CHECK (timeout_seconds > 0),
  -- Attempts started so far; the running attempt's number while running.
  attempts         integer     NOT NULL DEFAULT 0,
  lease_expires_at timestamptz,
  -- The worker of the latest attempt (kept after it ends, for the execution row).
  worker_id        text,
  cancel_requested boolean     NOT NULL DEFAULT false,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  started_at       timestamptz,
  completed_at     timestamptz,
  idempotency_key  text,
  last_error       text,
  schedule         jsonb,
  payload          jsonb       NOT NULL DEFAULT 'null'
) WITH (fillfactor = 80);

-- Rebuilding a partition's time buckets (DESIGN.md "level 3 polling", recovery only):
-- pending tasks of one partition in due order. Partial, so claimed and finished tasks
-- (the vast majority of rows) are not in it.
CREATE INDEX tasks_pending_due_idx ON tasks (partition, due_time, id) WHERE status = 'pending';

-- Lease recovery after a restart: the running tasks of one partition.
CREATE INDEX tasks_running_idx ON tasks (partition) WHERE status = 'running';

-- Listing, newest first, walks the primary key backwards (ids are UUID v7, so id order is
-- creation order) and filters by status as it goes. A (status, id) index would be written
-- by every claim and every completion for the sake of a listing; measured, it cost more on
-- the hot path than the filtered walk costs the listing.

-- One row per attempt that the task outlived (a retry, an expired lease); the attempt that
-- ended the task is read from the task row. The primary key (task_id, attempt) serves history
-- (newest first = a backward scan). No foreign key to tasks: the RI trigger would add a
-- lookup and a row lock on the hot completion path, and tasks are never deleted while
-- their executions are kept.
--
-- An execution's id is not stored: it is derived from the key, nameUuid(`${task_id}:${attempt}`)
-- in src/ids.ts, so the running attempt (which has no row yet) and its row once written
-- carry the same id. Computing it in SQL (sha256 + bit twiddling) cost about a quarter of
-- the completion statement's server time.
CREATE TABLE executions (
  task_id      uuid        NOT NULL,
  attempt      integer     NOT NULL,
  status       text        NOT NULL CHECK (status IN ('succeeded', 'failed', 'timed_out', 'cancelled')),
  due_time     timestamptz NOT NULL,
  started_at   timestamptz,
  completed_at timestamptz NOT NULL,
  worker_id    text,
  error        text,
  PRIMARY KEY (task_id, attempt)
);

-- Idempotency keys, unique per task type. A key whose expires_at has passed may be taken
-- over by a new submission (24 h window).
CREATE TABLE idempotency_keys (
  task_type    text        NOT NULL,
  key          text        NOT NULL,
  request_hash text        NOT NULL,
  task_id      uuid        NOT NULL,
  expires_at   timestamptz NOT NULL,
  PRIMARY KEY (task_type, key)
);

-- Durable actor state with fenced ownership: acquiring bumps epoch, every save carries
-- the epoch it was acquired at and is refused once a newer one exists.
CREATE TABLE actor_snapshots (
  kind       text        NOT NULL,
  key        text        NOT NULL,
  owner_node text,
  epoch      bigint      NOT NULL DEFAULT 0,
  version    bigint      NOT NULL DEFAULT 0,
  state      jsonb,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (kind, key)
);
