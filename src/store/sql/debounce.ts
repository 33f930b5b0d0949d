import type { DbTx } from '../db.js';
import type { NewTask, SubmitResult } from '../../domain/model.js';
import { dueTimeSet, taskColumns, toTaskRecord, tsParam, wholeMs, type TaskRow } from './columns.js';
import { payloadText } from './insert.js';

/**
 * Debounced submits (`debounce: { key, seconds, max_wait_seconds }`, migrations/000013_debounce.sql):
 * one statement that inserts each task, or merges it into the `pending` task of its type and key.
 *
 * The merge is `ON CONFLICT` on the unique partial index `tasks_debounce_idx` (task type, key,
 * `pending` only): it replaces the payload and moves the due time to now + seconds, never past
 * `debounce_until` (the first submit + max wait) and never earlier than it was (a node whose
 * clock is a little behind must not pull a task forward). Nothing else of the waiting task
 * changes: priority, retries, timeouts, start deadline are its first submit's.
 *
 * Correct under concurrency by Postgres' own rules for `ON CONFLICT`: two submits of one key
 * serialise on the index entry (the second waits for the first to commit, then updates its
 * row); a claim that moved the row to `running` first takes it out of the partial index, so
 * the submit finds no conflict and inserts a new task; a submit that updated the row first
 * makes a concurrent claim re-check it after the lock, with the new due time, and refuse it.
 * The version is bumped with the update so that nothing holding the old row (a read of it)
 * can mistake the merged task for the one it read.
 *
 * The task's due entry of its earlier due time stays in its wheel or ready queue: the claim
 * refuses it (`due_time <= now` fails) and the dispatcher drops it (its due time is past, so
 * it is not put back, see `Dispatcher.notYetDue`). The service places the task again at its
 * new due time (`TaskService.submit`). Should the stale entry still be queued then, the
 * ready queue keeps it in place of the new one (a queue holds a task once) and the claim
 * takes it as it would the new one: the row decides, not the entry.
 *
 * Rows are inserted in (task type, key) order, so two batches sharing keys take the index
 * entries in the same order and cannot deadlock; the caller gives each (type, key) once
 * (one statement cannot insert and then update the same row).
 */
const UPSERT_DEBOUNCED = `
  INSERT INTO tasks AS t (id, task_type, payload, status, schedule_type, due_time, priority, max_retries,
                          timeout_seconds, partition, created_at, updated_at, max_timeout_seconds,
                          start_deadline_seconds, debounce_key, debounce_until, limits)
  SELECT u.id, u.task_type, u.payload::jsonb, 'pending', 'immediate', to_timestamp(u.due_ms / 1000),
         u.priority, u.max_retries, u.timeout_seconds, u.partition, ${tsParam(1)}, ${tsParam(1)},
         u.max_timeout_seconds, u.start_deadline_seconds, u.debounce_key,
         ${tsParam(1)} + u.max_wait_ms * interval '1 millisecond', string_to_array(u.limits, ' ')
  FROM unnest($2::uuid[], $3::text[], $4::text[], $5::float8[], $6::int2[], $7::int4[], $8::int4[],
              $9::int2[], $10::int4[], $11::int4[], $12::text[], $13::float8[], $14::text[])
       AS u(id, task_type, payload, due_ms, priority, max_retries, timeout_seconds, partition,
            max_timeout_seconds, start_deadline_seconds, debounce_key, max_wait_ms, limits)
  ORDER BY u.task_type, u.debounce_key
  ON CONFLICT (task_type, debounce_key) WHERE status = 'pending' AND debounce_key IS NOT NULL
  DO UPDATE SET payload = excluded.payload,
                ${dueTimeSet('greatest(t.due_time, least(excluded.due_time, t.debounce_until))')},
                updated_at = excluded.updated_at,
                version = t.version + 1
  RETURNING ${taskColumns('t')}`;

const keyOf = (t: NewTask): string => `${t.taskType}\u0000${t.debounce!.key}`;

/**
 * Inserts or merges the debounced `tasks` (each with `debounce`; no idempotency key, no
 * dependencies, not a schedule: validation refused those) in one statement, answered in the
 * order given. A (type, key) given more than once in one call is merged here first, the way
 * the statement would merge consecutive submits: the first task's id and settings, the last
 * one's payload and due time; every one after the first answers `debounced: true`.
 */
export async function upsertDebounced(db: DbTx, tasks: readonly NewTask[], nowMs: number): Promise<SubmitResult[]> {
  const firstOf = new Map<string, number>();
  const rows: NewTask[] = [];
  const rowOf = new Array<number>(tasks.length);
  tasks.forEach((t, i) => {
    const k = keyOf(t);
    const first = firstOf.get(k);
    if (first === undefined) {
      firstOf.set(k, i);
      rowOf[i] = rows.push(t) - 1;
    } else {
      const row = rowOf[first]!;
      const lead = rows[row]!;
      const dueMs = Math.min(t.dueMs, nowMs + lead.debounce!.maxWaitSeconds * 1000);
      // The payload and its JSON text go together: the lead's text would store the lead's payload.
      rows[row] = { ...lead, payload: t.payload, payloadJson: t.payloadJson, dueMs: Math.max(lead.dueMs, dueMs) };
      rowOf[i] = row;
    }
  });
  const { rows: stored } = await db.query<TaskRow>(
    UPSERT_DEBOUNCED,
    [
      nowMs,
      rows.map((t) => t.id),
      rows.map((t) => t.taskType),
      rows.map(payloadText),
      rows.map((t) => wholeMs(t.dueMs)),
      rows.map((t) => t.priority),
      rows.map((t) => t.maxRetries),
      rows.map((t) => t.timeoutSeconds),
      rows.map((t) => t.partition),
      rows.map((t) => t.maxTimeoutSeconds ?? null),
      rows.map((t) => t.startDeadlineSeconds ?? null),
      rows.map((t) => t.debounce!.key),
      rows.map((t) => Math.round(t.debounce!.maxWaitSeconds * 1000)),
      // The names joined by a space, as the ordinary insert sends them (src/store/sql/insert.ts).
      rows.map((t) => (t.limits && t.limits.length > 0 ? t.limits.join(' ') : null)),
    ],
    'wh_upsert_debounced',
  );
  const byKey = new Map(stored.map((r) => [`${r.task_type}\u0000${r.debounce_key}`, r]));
  return tasks.map((t, i) => {
    const row = byKey.get(keyOf(t));
    if (row === undefined) throw new Error(`the debounced submit of "${t.debounce!.key}" answered no row`);
    // A fresh id was made for every row sent: a row that answers another id is the waiting task.
    const merged = firstOf.get(keyOf(t)) !== i || row.id !== rows[rowOf[i]!]!.id;
    return { task: toTaskRecord(row), created: !merged, debounced: merged };
  });
}

/** The task carries `debounce`. */
export function isDebounced(task: NewTask): boolean {
  return task.debounce != null;
}

/**
 * A submission holding debounced tasks, in the caller's transaction `tx`: the debounced ones
 * through {@link upsertDebounced}, the others through `submitRest` (the ordinary path), the
 * answers in the order of `tasks`. All or nothing, as every batch.
 */
export async function submitWithDebounced(
  tx: DbTx,
  tasks: readonly NewTask[],
  nowMs: number,
  submitRest: (rest: NewTask[]) => Promise<SubmitResult[]>,
): Promise<SubmitResult[]> {
  const debounced: NewTask[] = [];
  const rest: NewTask[] = [];
  for (const t of tasks) (isDebounced(t) ? debounced : rest).push(t);
  const restResults = await submitRest(rest);
  const debouncedResults = await upsertDebounced(tx, debounced, nowMs);
  let d = 0;
  let r = 0;
  return tasks.map((t) => (isDebounced(t) ? debouncedResults[d++]! : restResults[r++]!));
}
