import { isUuid } from '../../lib/ids.js';
import { isRetryableConflict } from '../db-errors.js';
import type { Db, DbTx } from '../db.js';
import {
  scheduleWake,
  type DueEntry,
  type ExecutionRecord,
  type ScheduleRecord,
  type ScheduleStatus,
} from '../../domain/model.js';
import { cronScheduleOf } from './cron-json.js';
import type { HistoryCursor, PartitionCursor, ScheduleWrite, ScheduleWriteResult } from '../types.js';
import { dueTimeSet, msOf, toDueEntry, tsParam, validIds, type DueRow } from './columns.js';
import { dagEventsCte } from './outbox.js';
import { byPart, partitionPages, type FirstPageRequest } from './partition-pages.js';
import { MAX_ATTEMPT, historyOf } from './read.js';

/**
 * Cron schedules in the task table. A schedule is a `tasks` row (schedule_type 'cron'); its
 * instances are ordinary task rows with `schedule_id` set, inserted from the schedule row
 * in SQL so that the payload never travels through the schedule's actor.
 *
 * Every change goes through {@link writeSchedules}: a batch of compare-and-sets on the
 * schedule rows' versions, and — for the rows that matched only — the instance changes that
 * go with them, in one transaction. A write from an actor that lost its schedule (a second
 * activation bumped the version) therefore changes nothing at all.
 */

const SCHEDULE_COLUMNS = `t.id, t.status, t.version, t.schedule, ${msOf('t.due_time')} AS due_ms,
  ${msOf('t.last_fired_at')} AS last_fired_ms, ${msOf('t.wake_time')} AS wake_ms`;

interface ScheduleRow {
  id: string;
  status: ScheduleStatus;
  version: number;
  schedule: Record<string, unknown>;
  due_ms: number;
  last_fired_ms: number | null;
  wake_ms: number | null;
}

function toSchedule(row: ScheduleRow): ScheduleRecord {
  return {
    id: row.id,
    status: row.status,
    version: row.version,
    ...cronScheduleOf(row.schedule),
    nextFireMs: row.due_ms,
    lastFiredMs: row.last_fired_ms,
    wakeMs: row.wake_ms,
  };
}

const GET_SCHEDULE = `SELECT ${SCHEDULE_COLUMNS} FROM tasks t WHERE t.id = $1 AND t.schedule_type = 'cron'`;

export async function getSchedule(db: Db, id: string): Promise<ScheduleRecord | null> {
  if (!isUuid(id)) return null;
  const { rows } = await db.query<ScheduleRow>(GET_SCHEDULE, [id], 'wh_get_schedule');
  return rows[0] === undefined ? null : toSchedule(rows[0]);
}

/** Many schedules by id, one statement: the actors a wheel's tick wakes read their rows together. */
const GET_SCHEDULES = `SELECT ${SCHEDULE_COLUMNS} FROM tasks t WHERE t.id = ANY($1::uuid[]) AND t.schedule_type = 'cron'`;

/** See `ScheduleStore.getMany`. */
export async function getSchedules(db: Db, ids: readonly string[]): Promise<(ScheduleRecord | null)[]> {
  const valid = validIds(ids);
  if (valid.length === 0) return ids.map(() => null);
  const { rows } = await db.query<ScheduleRow>(GET_SCHEDULES, [valid], 'wh_get_schedules');
  const byId = new Map(rows.map((r) => [r.id, toSchedule(r)]));
  return ids.map((id) => (isUuid(id) ? (byId.get(id.toLowerCase()) ?? null) : null));
}

/** The wakes of a partition's active schedules, oldest first: the partial index (partition, wake_time, id). */
const WAKE_PAGES = partitionPages({
  name: 'wh_wakes_in_partition',
  columns: `t.id, ${msOf('t.wake_time')} AS wake_ms`,
  where: "t.schedule_type = 'cron' AND t.status = 'active'",
  time: 't.wake_time',
});

/** See `ScheduleStore.wakesInPartition`. */
export async function wakesInPartition(
  db: Db,
  partition: number,
  after: PartitionCursor | null,
  toMs: number,
  limit: number,
): Promise<DueEntry[]> {
  const rows = await WAKE_PAGES.read<{ id: string; wake_ms: number }>(db, partition, after, toMs, limit);
  return rows.map((r) => scheduleWake(r.id, r.wake_ms));
}

/** First pages of several partitions' wakes in one statement; answers in the requests' order (see `PartitionPages.readFirst`). */
export async function wakesFirstPages(db: Db, requests: readonly FirstPageRequest[]): Promise<DueEntry[][]> {
  const pages = await WAKE_PAGES.readFirst<{ id: string; wake_ms: number }>(db, requests);
  return pages.map((rows) => rows.map((r) => scheduleWake(r.id, r.wake_ms)));
}

/** See `ScheduleStore.wakesInPartitions`. */
export async function wakesInPartitions(
  db: Db,
  partitions: readonly number[],
  toMs: number,
  limit: number,
): Promise<Map<number, DueEntry[]>> {
  const rows = await WAKE_PAGES.readAcross<{ id: string; wake_ms: number }>(db, partitions, toMs, limit);
  return byPart(rows, (r) => scheduleWake(r.id, r.wake_ms));
}

/** Step 1: the compare-and-set on each schedule row. Only rows it returns go on. */
const UPDATE_SCHEDULES = `
  UPDATE tasks t
  SET version = t.version + 1,
      status = w.status,
      ${dueTimeSet('COALESCE(to_timestamp(w.next_ms / 1000), t.due_time)')},
      last_fired_at = COALESCE(to_timestamp(w.fired_ms / 1000), t.last_fired_at),
      wake_time = COALESCE(to_timestamp(w.wake_ms / 1000), t.wake_time),
      schedule = CASE WHEN w.generation IS NULL THEN t.schedule
                      ELSE jsonb_set(t.schedule, '{generation}', to_jsonb(w.generation)) END,
      completed_at = CASE WHEN w.status IN ('cancelled', 'succeeded') THEN ${tsParam(6)} ELSE NULL END,
      updated_at = ${tsParam(6)}
  FROM unnest($1::uuid[], $2::int4[], $3::text[], $4::float8[], $5::float8[], $7::int4[], $8::float8[])
       AS w(id, version, status, next_ms, fired_ms, generation, wake_ms)
  WHERE t.id = w.id AND t.version = w.version AND t.schedule_type = 'cron'
  RETURNING t.id, t.version`;

/**
 * Step 2: cancels pending or held instances — one (`w.instance_id`) or all of a schedule
 * (null). Through the (schedule_id, id) index. The rows are locked in id order first: a
 * worker's claim locks instances in id order too (its ids are sorted), and two multi-row
 * updates that lock in different orders deadlock — W4 found it, deleting schedules while
 * their instances were being claimed.
 */
// An instance that other tasks depend on leaves an outbox event when it is cancelled here;
// the node's outbox replay (every 2 s) takes it to the dependents.
const CANCEL_INSTANCES = `
  WITH doomed AS (
    SELECT c.id, w.reason
    FROM tasks c
    JOIN unnest($1::uuid[], $2::uuid[], $3::text[]) AS w(schedule_id, instance_id, reason)
      ON c.schedule_id = w.schedule_id AND (w.instance_id IS NULL OR c.id = w.instance_id)
    WHERE c.status IN ('pending', 'blocked')
    ORDER BY c.id
    FOR UPDATE OF c),
  done AS (
    UPDATE tasks c
    SET status = 'cancelled', version = c.version + 1, last_error = d.reason,
        completed_at = ${tsParam(4)}, updated_at = ${tsParam(4)}
    FROM doomed d
    WHERE c.id = d.id AND c.status IN ('pending', 'blocked')
    RETURNING c.id, c.status, c.has_dependents, c.schedule_id),
  ${dagEventsCte(4)}
  SELECT d.schedule_id FROM done d`;

/**
 * Step 3: releases held instances whose fire time came (overlap policy `skip`): `pending`,
 * or `cancelled` when another instance of the schedule is still pending or running.
 */
const RELEASE_INSTANCES = `
  WITH done AS (
  UPDATE tasks r
  SET status = CASE WHEN busy.any THEN 'cancelled' ELSE 'pending' END,
      version = r.version + 1,
      last_error = CASE WHEN busy.any
        THEN 'skipped: the previous instance of the schedule was still running (overlap_policy skip)' END,
      completed_at = CASE WHEN busy.any THEN ${tsParam(2)} END,
      updated_at = ${tsParam(2)}
  FROM unnest($1::uuid[], $3::uuid[]) AS w(id, schedule_id),
       LATERAL (SELECT EXISTS (
         SELECT 1 FROM tasks o
         WHERE o.schedule_id = w.schedule_id AND o.id <> w.id AND o.status IN ('pending', 'running')) AS any) busy
  WHERE r.id = w.id AND r.schedule_id = w.schedule_id AND r.status = 'blocked'
  RETURNING r.id, r.schedule_id, r.status, r.task_type, r.priority, ${msOf('r.due_time')} AS due_ms, r.has_dependents,
            r.limits, r.traceparent),
  ${dagEventsCte(2)}
  SELECT d.id, d.schedule_id, d.status, d.task_type, d.priority, d.due_ms, d.limits, d.traceparent FROM done d`;

/**
 * Step 4: inserts instances, copying the template (type, payload, priority, retries, trace context,
 * timeout, limits) from the schedule row. An instance whose id exists is left alone: its fire time
 * was reached before. (The same statement inserts the `ensure` instances between steps 1 and
 * 2, so that a cancel or a release of this write finds them.)
 */
const INSERT_INSTANCES = `
  INSERT INTO tasks (id, task_type, payload, status, schedule_type, schedule, due_time, priority,
                     max_retries, timeout_seconds, max_timeout_seconds, start_deadline_seconds,
                     partition, created_at, updated_at, schedule_id, fire_time, limits, traceparent)
  SELECT n.id, s.task_type, s.payload, n.status, 'delayed', NULL, to_timestamp(n.due_ms / 1000),
         s.priority, s.max_retries, s.timeout_seconds, s.max_timeout_seconds, s.start_deadline_seconds,
         n.partition, ${tsParam(7)}, ${tsParam(7)}, n.schedule_id, to_timestamp(n.fire_ms / 1000), s.limits,
         s.traceparent
  FROM unnest($1::uuid[], $2::uuid[], $3::float8[], $4::float8[], $5::int2[], $6::text[])
       AS n(id, schedule_id, fire_ms, due_ms, partition, status)
  JOIN tasks s ON s.id = n.schedule_id
  ON CONFLICT (id) DO NOTHING
  RETURNING id, schedule_id, status, task_type, priority, ${msOf('due_time')} AS due_ms, limits, traceparent`;

interface InstanceRow extends DueRow {
  schedule_id: string;
  status: string;
}

/**
 * See `ScheduleStore.write`. Writes to the same schedule in one batch (a stale activation's
 * and its successor's, merged by the batcher) go in successive rounds of the transaction, in
 * order, so that the compare-and-set lets at most one of those made at one version through.
 */
export async function writeSchedules(db: Db, writes: ScheduleWrite[], nowMs: number): Promise<ScheduleWriteResult[]> {
  if (writes.length === 0) return [];
  const rounds: ScheduleWrite[][] = [];
  const seen = new Map<string, number>();
  // Schedule rows are updated, and instance ids inserted, in id order within a round, so
  // that two batches in flight lock what they share in one order.
  for (const w of [...writes].sort((a, b) => compareIds(a.scheduleId, b.scheduleId))) {
    const id = w.scheduleId.toLowerCase();
    const round = seen.get(id) ?? 0;
    seen.set(id, round + 1);
    (rounds[round] ??= []).push(w);
  }
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction(async (tx) => {
        const results = new Map<ScheduleWrite, ScheduleWriteResult>();
        for (const round of rounds) {
          const answers = await writeRound(tx, round, nowMs);
          round.forEach((w, i) => results.set(w, answers[i]!));
        }
        return writes.map((w) => results.get(w)!);
      });
    } catch (error) {
      // A deadlock or serialization failure rolled the batch back whole: run it again.
      if (attempt >= WRITE_ATTEMPTS || !isRetryableConflict(error)) throw error;
    }
  }
}

/** How many times a batch of schedule writes is tried when Postgres aborts it as a conflict. */
const WRITE_ATTEMPTS = 3;

const compareIds = (a: string, b: string): number => {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  return x < y ? -1 : x > y ? 1 : 0;
};

/** One round: writes to distinct schedules. */
async function writeRound(tx: DbTx, writes: ScheduleWrite[], nowMs: number): Promise<ScheduleWriteResult[]> {
  const updated = await tx.query<{ id: string; version: number }>(
    UPDATE_SCHEDULES,
    [
      writes.map((w) => w.scheduleId),
      writes.map((w) => w.version),
      writes.map((w) => w.status),
      writes.map((w) => w.nextFireMs),
      writes.map((w) => w.lastFiredMs),
      nowMs,
      writes.map((w) => w.generation),
      writes.map((w) => w.wakeMs),
    ],
    'wh_update_schedules',
  );
  const versions = new Map(updated.rows.map((r) => [r.id, r.version]));
  const applied = writes.filter((w) => versions.has(w.scheduleId.toLowerCase()));
  const results = new Map<string, ScheduleWriteResult>();
  for (const w of applied) {
    const id = w.scheduleId.toLowerCase();
    results.set(id, { ok: true, version: versions.get(id)!, due: [], skipped: false, cancelled: 0 });
  }
  const resultOf = (scheduleId: string): ScheduleWriteResult => results.get(scheduleId)!;

  // The instances that should exist already, before the cancels and releases that may act on
  // them: an activation's first write makes sure of its current instance.
  const ensured = applied
    .flatMap((w) => (w.ensure === null ? [] : [{ ...w.ensure, scheduleId: w.scheduleId }]))
    .sort((a, b) => compareIds(a.id, b.id));
  if (ensured.length > 0) await insertInstances(tx, ensured, nowMs, resultOf);

  const cancels = applied.filter((w) => w.cancel !== null);
  if (cancels.length > 0) {
    const cancelled = await tx.query<{ schedule_id: string }>(
      CANCEL_INSTANCES,
      [
        cancels.map((w) => w.scheduleId),
        cancels.map((w) => w.cancel!.instanceId),
        cancels.map((w) => w.cancel!.reason),
        nowMs,
      ],
      'wh_cancel_instances',
    );
    for (const row of cancelled.rows) resultOf(row.schedule_id).cancelled++;
  }

  const releases = applied.filter((w) => w.release !== null);
  if (releases.length > 0) {
    const released = await tx.query<InstanceRow>(
      RELEASE_INSTANCES,
      [releases.map((w) => w.release), nowMs, releases.map((w) => w.scheduleId)],
      'wh_release_instances',
    );
    for (const row of released.rows) {
      const result = resultOf(row.schedule_id);
      if (row.status === 'pending') result.due.push(toDueEntry(row));
      else result.skipped = true;
    }
  }

  const instances = applied
    .flatMap((w) => w.instances.map((i) => ({ ...i, scheduleId: w.scheduleId })))
    .sort((a, b) => compareIds(a.id, b.id));
  if (instances.length > 0) await insertInstances(tx, instances, nowMs, resultOf);

  return writes.map(
    (w) =>
      results.get(w.scheduleId.toLowerCase()) ?? {
        ok: false,
        version: w.version,
        due: [],
        skipped: false,
        cancelled: 0,
      },
  );
}

async function insertInstances(
  tx: DbTx,
  instances: (ScheduleWrite['instances'][number] & { scheduleId: string })[],
  nowMs: number,
  resultOf: (scheduleId: string) => ScheduleWriteResult,
): Promise<void> {
  const inserted = await tx.query<InstanceRow>(
    INSERT_INSTANCES,
    [
      instances.map((i) => i.id),
      instances.map((i) => i.scheduleId),
      instances.map((i) => i.fireMs),
      instances.map((i) => i.dueMs),
      instances.map((i) => i.partition),
      instances.map((i) => i.status),
      nowMs,
    ],
    'wh_insert_instances',
  );
  for (const row of inserted.rows) {
    if (row.status === 'pending') resultOf(row.schedule_id).due.push(toDueEntry(row));
  }
}

/**
 * A page of a schedule's instances that have started at least once, newest first (the
 * (schedule_id, id) index backwards): each has at least one execution, so `limit` of them
 * hold at least `limit` executions.
 */
const STARTED_INSTANCES = `
  SELECT t.id FROM tasks t
  WHERE t.schedule_id = $1 AND t.id <= $2::uuid AND t.attempts > 0
  ORDER BY t.id DESC LIMIT $3`;

const MAX_UUID = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

/** See `ScheduleStore.history`. */
export async function scheduleHistory(
  db: Db,
  scheduleId: string,
  limit: number,
  before?: HistoryCursor,
): Promise<ExecutionRecord[]> {
  const max = Math.max(0, Math.min(1000, Math.floor(limit)));
  if (!isUuid(scheduleId) || max === 0 || (before !== undefined && !isUuid(before.taskId))) return [];
  const cursor = before === undefined ? undefined : { taskId: before.taskId.toLowerCase(), attempt: before.attempt };
  // One more instance than the page: the cursor's own instance may have no attempt left.
  const { rows } = await db.query<{ id: string }>(
    STARTED_INSTANCES,
    [scheduleId, cursor?.taskId ?? MAX_UUID, max + 1],
    'wh_started_instances',
  );
  if (rows.length === 0) return [];
  // Every attempt of the page's instances (at most 101 each), filtered to the cursor here.
  const executions = await historyOf(
    db,
    rows.map((r) => r.id),
    MAX_ATTEMPT,
    rows.length * 101,
  );
  const after = executions.filter(
    (e) =>
      cursor === undefined || e.taskId < cursor.taskId || (e.taskId === cursor.taskId && e.attempt < cursor.attempt),
  );
  return after.slice(0, max);
}
