import {
  isFamily,
  TYPE_LIMIT_PREFIX,
  type LimitDeclaration,
  type LimitSpec,
  type OnLimit,
} from '../../domain/limits.js';
import type { DueEntry } from '../../domain/model.js';
import { isUuid } from '../../lib/ids.js';
import type { Db } from '../db.js';
import type { LimitPage, LiveTasks } from '../limit-types.js';
import { msOf, statusIs, tsParam } from './columns.js';

/**
 * Flow control's statements (docs/decisions/0023-flow-control.md): the declarations in
 * `limits`, and what a key's actor reads of the task table. A `type:<t>` key is every task of
 * type `t` (tasks never name it), read through the partial indexes on `pending` and `running`
 * rows; any other key is the tasks whose `limits` name it, read through the GIN partial indexes
 * `tasks_pending_limits_idx` and `tasks_running_limits_idx` (000023, 000024). No statement here
 * reads finished tasks.
 */

const DECLARATION_COLUMNS = `l.name, l.concurrency, l.rate_limit, l.rate_period_ms, l.rate_burst, l.on_limit,
  l.weight, ${msOf('l.created_at')} AS created_ms, ${msOf('l.updated_at')} AS updated_ms`;

/** Creates or changes a declaration; a change keeps its creation time. */
const PUT = `
  INSERT INTO limits AS l (name, concurrency, rate_limit, rate_period_ms, rate_burst, on_limit, weight,
                           created_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, ${tsParam(8)}, ${tsParam(8)})
  ON CONFLICT (name) DO UPDATE
    SET concurrency = excluded.concurrency, rate_limit = excluded.rate_limit,
        rate_period_ms = excluded.rate_period_ms, rate_burst = excluded.rate_burst,
        on_limit = excluded.on_limit, weight = excluded.weight, updated_at = excluded.updated_at
  RETURNING ${DECLARATION_COLUMNS}`;

const GET = `SELECT ${DECLARATION_COLUMNS} FROM limits l WHERE l.name = $1`;

/** A page in name order (the primary key's), one more than asked to tell the last page. */
const LIST = `
  SELECT ${DECLARATION_COLUMNS} FROM limits l
  WHERE ($1::text IS NULL OR l.name > $1) AND ($2::text IS NULL OR starts_with(l.name, $2))
  ORDER BY l.name
  LIMIT $3`;

const REMOVE = `DELETE FROM limits WHERE name = $1`;

/**
 * The catalog's version: the number of declarations, the latest change, and an
 * order-independent sum of a hash of every row's values. The count alone misses a delete
 * followed by a put, the latest change alone misses a delete (and a put stamped by a node
 * whose clock is behind); the hash sum changes with any of them. One row comes back: the
 * table is read, but it holds what operators declared, not tasks.
 */
const VERSION = `
  SELECT count(*)::int AS n, coalesce(max(${msOf('l.updated_at')}), 0) AS latest_ms,
         coalesce(sum(hashtext(concat_ws('|', l.name, l.concurrency, l.rate_limit, l.rate_period_ms,
                  l.rate_burst, l.on_limit, l.weight, ${msOf('l.updated_at')}))::bigint), 0)::text AS hash_sum
  FROM limits l`;

const ALL = `SELECT ${DECLARATION_COLUMNS} FROM limits l ORDER BY l.name`;

/**
 * Whether waiting tasks take part in a named key: pending rows through the GIN partial index,
 * blocked rows (waiting for predecessors) through their own partial index.
 */
const IN_USE_KEY = `
  SELECT EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'pending' AND t.limits @> ARRAY[$1::text])
      OR EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'blocked' AND t.deps_total > 0
                 AND t.limits @> ARRAY[$1::text]) AS used`;

/** The same for a family: any key under its prefix. A scan; DELETE of a family is rare. */
const IN_USE_FAMILY = `
  SELECT EXISTS (SELECT 1 FROM tasks t, unnest(t.limits) AS k(name)
                 WHERE t.status IN ('pending', 'blocked') AND t.limits IS NOT NULL
                   AND starts_with(k.name, $1)) AS used`;

/** A type's key (or a family of them: `type:billing:*`): the waiting tasks of the type(s). */
const IN_USE_TYPE = `
  SELECT EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'pending' AND t.task_type = $1)
      OR EXISTS (SELECT 1 FROM tasks t WHERE t.status = 'blocked' AND t.deps_total > 0 AND t.task_type = $1) AS used`;

const IN_USE_TYPE_FAMILY = `
  SELECT EXISTS (SELECT 1 FROM tasks t WHERE t.status IN ('pending', 'blocked') AND starts_with(t.task_type, $1)) AS used`;

/**
 * A named key's pending rows (`key`: SQL), through `tasks_pending_limits_idx` alone: `OFFSET 0`
 * keeps the planner from folding the key's `due_time` filter in and scanning
 * `tasks_pending_due_idx` instead, as it did on fresh statistics (a flood inserted seconds
 * before), reading every due pending row of every key to find one key's: in W6, 45 ms per quiet
 * key's activation with 20 000 of another key's tasks due, and the keys read together waited.
 */
const pendingOf = (key: string): string => `(
  SELECT t.id, t.version, t.started_at, t.task_type, t.priority, t.due_time, t.limits
  FROM tasks t
  WHERE t.limits IS NOT NULL AND t.status = 'pending' AND t.limits @> ARRAY[${key}]
  OFFSET 0)`;

/**
 * The running rows naming any of `keys` (SQL `text[]`), a row per (key, task), in one scan of
 * `tasks_running_limits_idx` for all the keys: its lookups read its whole pending list (000024,
 * decision 0052), so a merged activation read looks its keys up together, not one by one.
 */
const runningNaming = (keys: string): string => `
  SELECT k.key, t.id, t.version, ${msOf('t.started_at')} AS started_ms
  FROM (SELECT t.id, t.version, t.started_at, t.limits
        FROM tasks t
        WHERE t.limits IS NOT NULL AND t.status = 'running' AND t.limits && ${keys}
        OFFSET 0) t
  CROSS JOIN LATERAL unnest(t.limits) AS k(key)
  WHERE k.key = ANY(${keys})`;

/** A named key's holders: the running rows that name it. */
const RUNNING_NAMED = `SELECT r.id, r.version, r.started_ms FROM (${runningNaming('ARRAY[$1::text]')}) r`;

/** A type's holders: its running rows (`tasks_running_lease_idx`, filtered by type). */
const RUNNING_TYPE = `
  SELECT t.id, t.version, ${msOf('t.started_at')} AS started_ms
  FROM tasks t WHERE t.status = 'running' AND t.task_type = $1`;

const WAITING_COLUMNS = `t.id, t.task_type, t.priority, ${msOf('t.due_time')} AS due_ms, t.limits`;

/** A named key's due pending rows, most urgent first: the order its actor admits them in. */
const WAITING_NAMED = `
  SELECT ${WAITING_COLUMNS}
  FROM ${pendingOf('$1::text')} t
  WHERE t.due_time <= ${tsParam(2)}
  ORDER BY t.priority, t.due_time, t.id
  LIMIT $3`;

/** A type's due pending rows (`tasks_pending_due_idx`, filtered by type). */
const WAITING_TYPE = `
  SELECT ${WAITING_COLUMNS}
  FROM tasks t
  WHERE t.status = 'pending' AND t.task_type = $1 AND t.due_time <= ${tsParam(2)}
  ORDER BY t.priority, t.due_time, t.id
  LIMIT $3`;

const STILL_RUNNING = `
  SELECT t.id
  FROM tasks t JOIN unnest($1::uuid[]) AS h(id) ON t.id = h.id
  WHERE ${statusIs('t', 'running')}`;

const COUNTS_NAMED = `
  SELECT (SELECT count(*) FROM (${runningNaming('ARRAY[$1::text]')}) r)::int AS running,
         (SELECT count(*) FROM ${pendingOf('$1::text')} t)::int AS waiting`;

const COUNTS_TYPE = `
  SELECT (SELECT count(*) FROM tasks t WHERE t.status = 'running' AND t.task_type = $1)::int AS running,
         (SELECT count(*) FROM tasks t WHERE t.status = 'pending' AND t.task_type = $1)::int AS waiting`;

interface DeclarationRow {
  name: string;
  concurrency: number | null;
  rate_limit: number | null;
  rate_period_ms: number | null;
  rate_burst: number;
  on_limit: OnLimit;
  weight: number;
  created_ms: number;
  updated_ms: number;
}

function toDeclaration(row: DeclarationRow): LimitDeclaration {
  return {
    name: row.name,
    concurrency: row.concurrency,
    rate:
      row.rate_limit === null || row.rate_period_ms === null
        ? null
        : { limit: row.rate_limit, periodMs: row.rate_period_ms, burst: row.rate_burst },
    onLimit: row.on_limit,
    weight: Number(row.weight),
    createdMs: Number(row.created_ms),
    updatedMs: Number(row.updated_ms),
  };
}

/** The task type a `type:<t>` key stands for; null for a named key. */
function typeOf(key: string): string | null {
  return key.startsWith(TYPE_LIMIT_PREFIX) ? key.slice(TYPE_LIMIT_PREFIX.length) : null;
}

export async function putLimit(db: Db, name: string, spec: LimitSpec, nowMs: number): Promise<LimitDeclaration> {
  const { rows } = await db.query<DeclarationRow>(
    PUT,
    [
      name,
      spec.concurrency,
      spec.rate?.limit ?? null,
      spec.rate?.periodMs ?? null,
      spec.rate?.burst ?? 0,
      spec.onLimit,
      spec.weight,
      nowMs,
    ],
    'wh_limit_put',
  );
  return toDeclaration(rows[0]!);
}

export async function getLimit(db: Db, name: string): Promise<LimitDeclaration | null> {
  const { rows } = await db.query<DeclarationRow>(GET, [name], 'wh_limit_get');
  return rows[0] === undefined ? null : toDeclaration(rows[0]);
}

export async function listLimits(
  db: Db,
  filter: { prefix?: string; after?: string; limit: number },
): Promise<LimitPage> {
  const limit = Math.max(1, Math.floor(filter.limit));
  const { rows } = await db.query<DeclarationRow>(
    LIST,
    [filter.after ?? null, filter.prefix ?? null, limit + 1],
    'wh_limit_list',
  );
  const items = rows.slice(0, limit).map(toDeclaration);
  return { items, next: rows.length > limit ? items[items.length - 1]!.name : null };
}

export async function removeLimit(db: Db, name: string): Promise<boolean> {
  const { rowCount } = await db.query(REMOVE, [name], 'wh_limit_remove');
  return rowCount > 0;
}

export async function limitCatalog(
  db: Db,
  sinceVersion: string | null,
): Promise<{ version: string; declarations: LimitDeclaration[] | null }> {
  const { rows } = await db.query<{ n: number; latest_ms: number; hash_sum: string }>(VERSION, [], 'wh_limit_version');
  const row = rows[0]!;
  const version = `${row.n}:${Number(row.latest_ms)}:${row.hash_sum}`;
  if (version === sinceVersion) return { version, declarations: null };
  const all = await db.query<DeclarationRow>(ALL, [], 'wh_limit_all');
  // A change between the two reads shows as the old version with the new rows: the next
  // refresh sees a version that differs and reads them again, so nothing is missed.
  return { version, declarations: all.rows.map(toDeclaration) };
}

export async function limitInUse(db: Db, name: string): Promise<boolean> {
  const type = typeOf(name);
  const family = isFamily(name);
  // `customer:*` → `customer:`; `type:billing:*` → the types starting `billing:`.
  const prefix = (type ?? name).slice(0, family ? -1 : undefined);
  const text = type === null ? (family ? IN_USE_FAMILY : IN_USE_KEY) : family ? IN_USE_TYPE_FAMILY : IN_USE_TYPE;
  const statement = `wh_limit_in_use_${type === null ? 'key' : 'type'}${family ? '_family' : ''}`;
  const { rows } = await db.query<{ used: boolean }>(text, [prefix], statement);
  return rows[0]?.used === true;
}

interface WaitingRow {
  id: string;
  task_type: string;
  priority: number;
  due_ms: number;
  limits: string[] | null;
}

export async function liveTasks(db: Db, key: string, nowMs: number, maxWaiting: number): Promise<LiveTasks> {
  const [running, waiting] = await Promise.all([
    typeOf(key) === null
      ? db.query<HolderRow>(RUNNING_NAMED, [key], 'wh_limit_running_named').then(({ rows }) => rows.map(toHolder))
      : typeHolders(db, key),
    waitingOf(db, key, nowMs, Math.max(0, Math.floor(maxWaiting))),
  ]);
  return { running, ...waiting };
}

/** A key's due waiting tasks, at most `max` (and whether more wait), one statement. */
async function waitingOf(db: Db, key: string, nowMs: number, max: number): Promise<Omit<LiveTasks, 'running'>> {
  const type = typeOf(key);
  const { rows } = await db.query<WaitingRow>(
    type === null ? WAITING_NAMED : WAITING_TYPE,
    [type ?? key, nowMs, max + 1],
    type === null ? 'wh_limit_waiting_named' : 'wh_limit_waiting_type',
  );
  return { waiting: rows.slice(0, max).map(toWaitingEntry), truncated: rows.length > max };
}

/** Named keys' holders, many keys in one statement (one read of the running rows for all). */
export const RUNNING_NAMED_MANY = runningNaming('$1::text[]');

/**
 * Named keys' due pending rows, most urgent first, at most `$3` per key, many keys at once.
 * Exported with `RUNNING_NAMED_MANY` for the test of their plans (test/store/limit-live-plan.test.ts).
 */
export const WAITING_NAMED_MANY = `
  SELECT k.key, w.*
  FROM unnest($1::text[]) AS k(key),
  LATERAL (SELECT ${WAITING_COLUMNS} FROM ${pendingOf('k.key')} t
           WHERE t.due_time <= ${tsParam(2)}
           ORDER BY t.priority, t.due_time, t.id LIMIT $3) w`;

/**
 * The holders (running rows) of many keys, in the order of `keys`: one statement for the named
 * ones, each `type:<t>` key on its own. All an activation reads (decision 0041).
 */
export async function holdersMany(db: Db, keys: readonly string[]): Promise<LiveTasks['running'][]> {
  const named = [...new Set(keys.filter((k) => typeOf(k) === null))];
  const byKey = new Map<string, LiveTasks['running']>(named.map((key) => [key, []]));
  if (named.length > 0) {
    const { rows } = await db.query<HolderRow & { key: string }>(
      RUNNING_NAMED_MANY,
      [named],
      'wh_limit_running_named_many',
    );
    for (const r of rows) byKey.get(r.key)?.push(toHolder(r));
  }
  return Promise.all(keys.map(async (key) => byKey.get(key) ?? (await typeHolders(db, key))));
}

async function typeHolders(db: Db, key: string): Promise<LiveTasks['running']> {
  const { rows } = await db.query<HolderRow>(RUNNING_TYPE, [typeOf(key)], 'wh_limit_running_type');
  return rows.map(toHolder);
}

interface HolderRow {
  id: string;
  version: number;
  started_ms: number | null;
}

function toHolder(row: HolderRow): LiveTasks['running'][number] {
  return { taskId: row.id, version: row.version, startedMs: row.started_ms === null ? null : Number(row.started_ms) };
}

/**
 * The due waiting tasks of many keys, at most `maxWaiting` each, in the order of `keys`: one
 * statement for the named ones (the keys whose actors read together: a wheel firing tasks of
 * ten thousand keys of a family activates ten thousand actors at once, which one statement
 * each would queue the whole pool behind), each `type:<t>` key on its own.
 */
export async function waitingMany(
  db: Db,
  keys: readonly string[],
  nowMs: number,
  maxWaiting: number,
): Promise<Omit<LiveTasks, 'running'>[]> {
  const named = [...new Set(keys.filter((k) => typeOf(k) === null))];
  const max = Math.max(0, Math.floor(maxWaiting));
  const byKey = new Map<string, WaitingRow[]>(named.map((key) => [key, []]));
  if (named.length > 0) {
    const { rows } = await db.query<WaitingRow & { key: string }>(
      WAITING_NAMED_MANY,
      [named, nowMs, max + 1],
      'wh_limit_waiting_named_many',
    );
    for (const w of rows) byKey.get(w.key)?.push(w);
  }
  return Promise.all(
    keys.map(async (key) => {
      const found = byKey.get(key);
      if (found === undefined) return waitingOf(db, key, nowMs, max);
      return { waiting: found.slice(0, max).map(toWaitingEntry), truncated: found.length > max };
    }),
  );
}

/**
 * Limit keys whose actor was live on a node not among `live` (it died holding them): their
 * rows in `actor_snapshots` still name it. A scan of the kind's rows, once per ring change.
 */
const HELD_OUTSIDE = `
  SELECT s.key FROM actor_snapshots s
  WHERE s.kind = 'limit' AND s.owner_node IS NOT NULL AND NOT (s.owner_node = ANY($1::text[]))
  LIMIT $2`;

export async function keysHeldOutside(db: Db, live: readonly string[], max: number): Promise<string[]> {
  const { rows } = await db.query<{ key: string }>(HELD_OUTSIDE, [live, max], 'wh_limit_held_outside');
  return rows.map((r) => r.key);
}

function toWaitingEntry(row: WaitingRow): DueEntry {
  const entry: DueEntry = {
    taskId: row.id,
    taskType: row.task_type,
    priority: row.priority,
    dueMs: Number(row.due_ms),
  };
  if (row.limits !== null && row.limits.length > 0) entry.limits = row.limits;
  return entry;
}

export async function stillRunning(db: Db, taskIds: readonly string[]): Promise<Set<string>> {
  const valid = taskIds.filter((id) => isUuid(id));
  if (valid.length === 0) return new Set();
  const { rows } = await db.query<{ id: string }>(STILL_RUNNING, [valid], 'wh_limit_still_running');
  return new Set(rows.map((r) => r.id));
}

export async function limitCounts(db: Db, key: string): Promise<{ running: number; waiting: number }> {
  const type = typeOf(key);
  const { rows } = await db.query<{ running: number; waiting: number }>(
    type === null ? COUNTS_NAMED : COUNTS_TYPE,
    [type ?? key],
    type === null ? 'wh_limit_counts_named' : 'wh_limit_counts_type',
  );
  return { running: rows[0]?.running ?? 0, waiting: rows[0]?.waiting ?? 0 };
}
