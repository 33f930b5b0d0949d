import { WheelhouseError } from '../../errors.js';
import type { Db, DbTx } from '../db.js';
import type { NewTask, SubmitResult, TaskRecord } from '../types.js';
import { IDEMPOTENCY_WINDOW_MS, taskColumns, toTaskRecord, tsParam, wholeMs, type TaskRow } from './columns.js';

/**
 * Submitting tasks. A batch without idempotency keys is one statement (the benchmark path:
 * 1 000 tasks, one round trip, no explicit transaction). A batch with keys is one
 * transaction of at most three statements: claim the keys, read the ones already taken,
 * insert the tasks.
 */

/**
 * Inserts tasks in one statement: each column travels as one array parameter and
 * `unnest` zips them back into rows, so the statement text (and its prepared plan) is the
 * same for 1 or 1 000 tasks. JSON travels as text[] and is cast per row, which both
 * drivers pass through untouched. Nothing is returned: the caller knows every value.
 */
const INSERT_TASKS = `
  INSERT INTO tasks (id, task_type, payload, status, schedule_type, schedule, due_time, priority,
                     max_retries, timeout_seconds, partition, idempotency_key, created_at, updated_at)
  SELECT u.id, u.task_type, u.payload::jsonb, u.status, u.schedule_type, u.schedule::jsonb,
         to_timestamp(u.due_ms / 1000), u.priority, u.max_retries, u.timeout_seconds, u.partition,
         u.idempotency_key, ${tsParam(13)}, ${tsParam(13)}
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[],
              $8::int2[], $9::int4[], $10::int4[], $11::int2[], $12::text[])
       AS u(id, task_type, payload, status, schedule_type, schedule, due_ms, priority, max_retries,
            timeout_seconds, partition, idempotency_key)`;

async function insertTasks(db: DbTx, tasks: NewTask[], nowMs: number): Promise<TaskRecord[]> {
  const n = tasks.length;
  const ids = new Array<string>(n);
  const types = new Array<string>(n);
  const payloads = new Array<string>(n);
  const statuses = new Array<string>(n);
  const scheduleTypes = new Array<string>(n);
  const schedules = new Array<string | null>(n);
  const dues = new Array<number>(n);
  const priorities = new Array<number>(n);
  const maxRetries = new Array<number>(n);
  const timeouts = new Array<number>(n);
  const partitions = new Array<number>(n);
  const keys = new Array<string | null>(n);
  const records = new Array<TaskRecord>(n);
  const createdMs = wholeMs(nowMs);
  for (let i = 0; i < n; i++) {
    const t = tasks[i]!;
    const dueMs = wholeMs(t.dueMs);
    ids[i] = t.id;
    types[i] = t.taskType;
    payloads[i] = JSON.stringify(t.payload ?? null);
    statuses[i] = t.status;
    scheduleTypes[i] = t.scheduleType;
    schedules[i] = t.schedule === null ? null : JSON.stringify(t.schedule);
    dues[i] = dueMs;
    priorities[i] = t.priority;
    maxRetries[i] = t.maxRetries;
    timeouts[i] = t.timeoutSeconds;
    partitions[i] = t.partition;
    keys[i] = t.idempotencyKey;
    records[i] = newRecord(t, dueMs, createdMs);
  }
  await db.query(
    INSERT_TASKS,
    [ids, types, payloads, statuses, scheduleTypes, schedules, dues, priorities, maxRetries, timeouts, partitions, keys, nowMs],
    'wh_insert_tasks',
  );
  return records;
}

/**
 * The record of a task just inserted, as `get` would read it back (payload and schedule are
 * the caller's values; the stored ones are their JSON round trip).
 */
function newRecord(t: NewTask, dueMs: number, nowMs: number): TaskRecord {
  return {
    id: t.id.toLowerCase(),
    taskType: t.taskType,
    payload: t.payload ?? null,
    status: t.status,
    version: 0,
    scheduleType: t.scheduleType,
    schedule: t.schedule,
    dueMs,
    priority: t.priority,
    maxRetries: t.maxRetries,
    timeoutSeconds: t.timeoutSeconds,
    attempts: 0,
    leaseExpiresMs: null,
    workerId: null,
    cancelRequested: false,
    partition: t.partition,
    idempotencyKey: t.idempotencyKey,
    createdMs: nowMs,
    updatedMs: nowMs,
    startedMs: null,
    completedMs: null,
    lastError: null,
    scheduleId: null,
    fireMs: null,
    lastFiredMs: null,
  };
}

/**
 * Takes idempotency keys. A new key is inserted; an expired one is taken over (DO UPDATE …
 * WHERE expired); a live one is left alone. RETURNING therefore names exactly the keys this
 * batch now owns. A concurrent batch holding the same key makes this wait for its commit,
 * then see the key as taken. Rows are inserted in key order so two batches sharing keys
 * lock them in the same order and cannot deadlock.
 */
const CLAIM_KEYS = `
  INSERT INTO idempotency_keys AS k (task_type, key, request_hash, task_id, expires_at)
  SELECT u.task_type, u.key, u.request_hash, u.task_id, ${tsParam(5)}
  FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[]) AS u(task_type, key, request_hash, task_id)
  ORDER BY u.task_type, u.key
  ON CONFLICT (task_type, key) DO UPDATE
    SET request_hash = excluded.request_hash, task_id = excluded.task_id, expires_at = excluded.expires_at
    WHERE k.expires_at <= ${tsParam(6)}
  RETURNING k.task_type, k.key`;

/**
 * Reads keys this batch could not take, with the task each one names. A separate statement
 * (not a CTE of CLAIM_KEYS) so that its snapshot includes keys committed by a concurrent
 * batch that CLAIM_KEYS waited for.
 */
const READ_KEYS = `
  SELECT k.task_type AS key_task_type, k.key AS key_name, k.request_hash, ${taskColumns('t')}
  FROM unnest($1::text[], $2::text[]) AS u(task_type, key)
  JOIN idempotency_keys k ON k.task_type = u.task_type AND k.key = u.key
  JOIN tasks t ON t.id = k.task_id`;

interface KeyRow extends TaskRow {
  key_task_type: string;
  key_name: string;
  request_hash: string;
}

const keyOf = (taskType: string, key: string): string => `${taskType}\u0000${key}`;

function conflict(index: number, key: string): WheelhouseError {
  return new WheelhouseError(
    'idempotency_conflict',
    `idempotency key "${key}" was used before with a different request`,
    { details: { index, idempotency_key: key } },
  );
}

/** See `TaskStore.submit`. */
export async function submitTasks(db: Db, tasks: NewTask[], nowMs: number): Promise<SubmitResult[]> {
  if (tasks.length === 0) return [];
  // Keys inside the batch first: the first task with a key leads; a later one with the same
  // key is a replay of it (same hash) or a conflict, found before anything is written.
  const leaderOf = new Map<string, number>();
  const followerOf = new Array<number | undefined>(tasks.length);
  tasks.forEach((t, i) => {
    if (t.idempotencyKey === null) return;
    const k = keyOf(t.taskType, t.idempotencyKey);
    const leader = leaderOf.get(k);
    if (leader === undefined) {
      leaderOf.set(k, i);
    } else if ((tasks[leader]!.requestHash ?? '') === (t.requestHash ?? '')) {
      followerOf[i] = leader;
    } else {
      throw conflict(i, t.idempotencyKey);
    }
  });

  if (leaderOf.size === 0) {
    const records = await insertTasks(db, tasks, nowMs);
    return records.map((task) => ({ task, created: true }));
  }

  return db.transaction(async (tx) => {
    const leaders = [...leaderOf.values()].map((i) => tasks[i]!);
    const claimed = await tx.query<{ task_type: string; key: string }>(
      CLAIM_KEYS,
      [
        leaders.map((t) => t.taskType),
        leaders.map((t) => t.idempotencyKey),
        leaders.map((t) => t.requestHash ?? ''),
        leaders.map((t) => t.id),
        nowMs + IDEMPOTENCY_WINDOW_MS,
        nowMs,
      ],
      'wh_claim_keys',
    );
    const fresh = new Set(claimed.rows.map((r) => keyOf(r.task_type, r.key)));

    const results = new Array<SubmitResult | undefined>(tasks.length);
    const taken = leaders.filter((t) => !fresh.has(keyOf(t.taskType, t.idempotencyKey!)));
    if (taken.length > 0) {
      const existing = await tx.query<KeyRow>(
        READ_KEYS,
        [taken.map((t) => t.taskType), taken.map((t) => t.idempotencyKey)],
        'wh_read_keys',
      );
      const byKey = new Map(existing.rows.map((r) => [keyOf(r.key_task_type, r.key_name), r]));
      for (const t of taken) {
        const k = keyOf(t.taskType, t.idempotencyKey!);
        const index = leaderOf.get(k)!;
        const row = byKey.get(k);
        if (row === undefined) {
          throw new WheelhouseError('internal', `idempotency key "${t.idempotencyKey}" names a task that does not exist`);
        }
        if (row.request_hash !== (t.requestHash ?? '')) throw conflict(index, t.idempotencyKey!);
        results[index] = { task: toTaskRecord(row), created: false };
      }
    }

    const toInsert: number[] = [];
    tasks.forEach((_, i) => {
      if (results[i] === undefined && followerOf[i] === undefined) toInsert.push(i);
    });
    if (toInsert.length > 0) {
      const records = await insertTasks(tx, toInsert.map((i) => tasks[i]!), nowMs);
      toInsert.forEach((i, j) => {
        results[i] = { task: records[j]!, created: true };
      });
    }
    return tasks.map((_, i) => {
      const leader = followerOf[i];
      if (leader === undefined) return results[i]!;
      return { task: results[leader]!.task, created: false };
    });
  });
}

/**
 * `$1` now, `$2` limit. Deletes a bounded batch so that a large backlog of expired keys is
 * cleared over several runs instead of in one long statement; the primary key is the only
 * index, so the expired rows are found by a scan of the (small, 24 h) key table.
 */
const PURGE_EXPIRED_KEYS = `
  DELETE FROM idempotency_keys
  WHERE ctid IN (SELECT ctid FROM idempotency_keys WHERE expires_at < ${tsParam(1)} LIMIT $2)`;

/** See `TaskStore.purgeExpiredIdempotencyKeys`. */
export async function purgeExpiredIdempotencyKeys(db: Db, nowMs: number, limit: number): Promise<number> {
  if (limit <= 0) return 0;
  const { rowCount } = await db.query(PURGE_EXPIRED_KEYS, [nowMs, Math.floor(limit)], 'wh_purge_expired_keys');
  return rowCount;
}
