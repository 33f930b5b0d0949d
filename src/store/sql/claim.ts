import type { Db } from '../db.js';
import { isUuid } from '../../lib/ids.js';
import { LEASE_DIGEST_BYTES, mintLeaseTokens, type MintedLeaseToken } from '../../domain/lease-token.js';
import type { ChildrenSummary, ClaimedTask, DueEntry } from '../../domain/model.js';
import { CHILDREN_SUMMARY, INPUTS, taskInputs, type InputsRow } from './handed-on.js';
import type { ExtendedLease, LeaseHeartbeat, RunningLease } from '../types.js';
import type { LimitGrantRow } from '../limit-types.js';
import { fenceGroups } from './claim-fence.js';
import { WheelhouseError } from '../../lib/errors.js';
import { msOf, statusIs, toDueEntry, tsParam, validIds, type DueRow } from './columns.js';

/**
 * Claiming tasks and keeping their leases.
 */

/**
 * The claim: one UPDATE for the whole batch, and the compare-and-set of the edge
 * pending → running. The ids are sorted and whatever plan Postgres picks (a primary-key
 * scan visits them in key order, a bitmap scan in physical order), two overlapping claims
 * lock shared rows in the same order, so they cannot deadlock. A row another claim got
 * first is re-checked once its lock is released, fails `status = 'pending'` and is left
 * out.
 *
 * The status test is fenced ({@link statusIs}) so the plan stays a primary-key lookup of
 * the given ids. A task not yet due, blocked, running or finished is
 * left out the same way, and so is one past its start deadline (`start_by`): the node's sweep
 * ends it `expired` (src/store/sql/start-deadlines.ts). `attempts + 1` is the number of the
 * attempt starting now. The attempt's execution deadline is `timeout_seconds` from now, and
 * the lease runs to it: heartbeats keep the lease alive but never past `deadline_at`
 * (migrations/000011_deadlines.sql).
 *
 * One statement claims for many workers (the worker channel claims for every socket of a
 * task type at once): `$2` holds each worker once, and `$5` the 1-based position in `$2` of
 * the worker of each id, aligned with `$1`. The ids and the positions travel as array
 * literals the function writes itself (a UUID and a number need no escaping), where `pg`
 * would quote and escape each of 1 000 elements; the worker ids, which are free text, are
 * left to `pg`, once per worker rather than once per row.
 *
 * `$4` is the ids' lease token digests end to end, 32 bytes each in the order of `$1`: one
 * binary parameter, where an array of 1 000 `bytea` travels as hex text, encoded and parsed
 * (measured: about half of what the digests add to a claim of 1 000). The join with the unnest
 * pairs each row with its position `c.n`, and so with its digest, its worker and its token,
 * without a map.
 *
 * The rows are found through the join alone: the plan `pg`'s named statement settles on after
 * five runs (a generic plan, which cannot know the arrays' lengths and guesses 10 rows for the
 * unnest) is a nested loop over the sorted ids with a primary-key lookup each, which locks in
 * key order. This statement also said `t.id = ANY($1)`, to keep a primary-key scan of the ids
 * on offer; in the generic plan that became the inner side of the nested loop, materialized,
 * with a join filter comparing every id with every row — measured on 30 000 tasks, a claim of
 * 2 000 ran 185 ms instead of 28, and Postgres spent 42–70 µs of CPU per claimed row instead
 * of 13–18 (docs/decisions/0012-channel-claims.md). A plan made with the ids in hand (the first
 * five runs; PGlite, which does not keep statements) may hash the unnest against a scan of the
 * table when the claim is a large part of it, which locks in the physical order of that one
 * scan, as the statement could before.
 */
const CLAIM = `
  UPDATE tasks t
  SET status = 'running',
      attempts = t.attempts + 1,
      version = t.version + 1,
      started_at = ${tsParam(3)},
      updated_at = ${tsParam(3)},
      lease_expires_at = ${tsParam(3)} + t.timeout_seconds * interval '1 second',
      deadline_at = ${tsParam(3)} + t.timeout_seconds * interval '1 second',
      worker_id = ($2::text[])[c.w],
      lease_token_hash = substring($4::bytea FROM (c.n::int4 - 1) * ${LEASE_DIGEST_BYTES} + 1 FOR ${LEASE_DIGEST_BYTES})
  FROM unnest($1::uuid[], $5::int4[]) WITH ORDINALITY AS c(id, w, n)
  WHERE t.id = c.id
    AND ${statusIs('t', 'pending')}
    AND t.due_time <= ${tsParam(3)}
    AND (t.start_by IS NULL OR t.start_by > ${tsParam(3)})
  RETURNING t.id, t.task_type, t.payload, t.attempts, t.version, t.timeout_seconds, t.partition,
            ${msOf('t.lease_expires_at')} AS lease_expires_ms, ${msOf('t.due_time')} AS due_ms, c.n,
            ${CHILDREN_SUMMARY}, ${INPUTS}, t.traceparent`;

/**
 * The claim of tasks that hold limit grants (docs/decisions/0023-flow-control.md): the claim
 * above, and each task only if every grant it holds still carries its key's fence. The grants
 * come grouped (claim-fence.ts): `$6`, `$7`, `$8` are the (key, epoch) pairs of each group,
 * aligned, and `$9` each id's group (0: none), aligned with `$1`. The keys' rows in
 * `actor_snapshots` are locked FOR SHARE until the claim commits, so a new activation of a
 * key — which takes its row over with an UPDATE, then reads the key's running tasks — either
 * waits for this claim and sees its tasks running, or went first and this claim finds another
 * epoch and leaves the task out. A grant of an activation that is gone can never start a task.
 * The rows are locked in key order, as batched acquires and releases lock them
 * (`snapshot-batches.ts`), so that a claim and a batch never deadlock.
 *
 * The pairs are joined with the fence once, into the groups with a pair that no longer holds
 * (`stale`: none, nearly always), and each row is tested against that set, hashed. Each row
 * used to look its grants up in an unnest of them (`NOT EXISTS … WHERE g.task_id = t.id`): the
 * generic plan guesses 10 rows for an unnest and runs that as a nested loop over every grant
 * for every row, so a claim of 1 000 gated tasks compared a million pairs — 270–390 ms of
 * Postgres against 26–36 ms for the same claim ungated (W1L, issue 28).
 */
const CLAIM_FENCED = CLAIM.replace(
  'UPDATE tasks t',
  `WITH fence AS MATERIALIZED (
     SELECT s.key, s.epoch FROM actor_snapshots s
     WHERE s.kind = 'limit' AND s.key = ANY($6::text[])
     ORDER BY s.key
     FOR SHARE
   ),
   stale AS MATERIALIZED (
     SELECT p.g FROM unnest($6::text[], $7::int8[], $8::int4[]) AS p(key, epoch, g)
     WHERE NOT EXISTS (SELECT 1 FROM fence f WHERE f.key = p.key AND f.epoch = p.epoch)
   )
  UPDATE tasks t`,
)
  .replace(
    'FROM unnest($1::uuid[], $5::int4[]) WITH ORDINALITY AS c(id, w, n)',
    'FROM unnest($1::uuid[], $5::int4[], $9::int4[]) WITH ORDINALITY AS c(id, w, g, n)',
  )
  .replace(
    'WHERE t.id = c.id',
    `WHERE t.id = c.id
    AND c.g NOT IN (SELECT s.g FROM stale s)`,
  );

interface ClaimRow {
  id: string;
  task_type: string;
  payload: unknown;
  attempts: number;
  version: number;
  timeout_seconds: number;
  partition: number;
  lease_expires_ms: number;
  due_ms: number;
  /** 1-based position of the id in the claim's id array. */
  n: number;
  /** Set for a parent resumed after waiting for its children. */
  children: ChildrenSummary | null;
  /** Set for a task with predecessors: see {@link INPUTS}. */
  inputs: InputsRow | null;
  /** The task's stored trace context (migrations/000022); NULL: none. */
  traceparent: string | null;
}

/**
 * See `TaskStore.claim` and `TaskStore.claimForWorkers`: `workerIds` is one worker for every
 * id, or the worker of each id, aligned with `ids`. Each id gets a new token; only its digest
 * reaches the database. An id named twice is claimed once, for the first worker named with it.
 */
export async function claimTasks(
  db: Db,
  ids: readonly string[],
  workerIds: string | readonly string[],
  nowMs: number,
  grants: readonly LimitGrantRow[] = [],
): Promise<ClaimedTask[]> {
  if (typeof workerIds !== 'string' && workerIds.length !== ids.length)
    throw new WheelhouseError('internal', `a claim of ${ids.length} ids named ${workerIds.length} workers`);
  const byId = new Map<string, string>();
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as string;
    if (!isUuid(id)) continue;
    const key = id.toLowerCase();
    if (!byId.has(key)) byId.set(key, typeof workerIds === 'string' ? workerIds : (workerIds[i] as string));
  }
  if (byId.size === 0) return [];
  const wanted = [...byId.keys()].sort();
  const workers: string[] = [];
  const position = new Map<string, number>();
  const owners = wanted.map((id) => {
    const worker = byId.get(id) as string;
    let at = position.get(worker);
    if (at === undefined) position.set(worker, (at = workers.push(worker)));
    return at;
  });
  const tokens = mintLeaseTokens(wanted.length);
  const digests = Buffer.concat(tokens.map((t) => t.digest));
  const params: unknown[] = [`{${wanted.join(',')}}`, workers, nowMs, digests, `{${owners.join(',')}}`];
  if (grants.length > 0) {
    const fence = fenceGroups(grants, wanted);
    params.push(fence.keys, fence.epochs, fence.groupOf, `{${fence.idGroups.join(',')}}`);
  }
  const { rows } = await db.query<ClaimRow>(
    grants.length > 0 ? CLAIM_FENCED : CLAIM,
    params,
    grants.length > 0 ? 'wh_claim_fenced' : 'wh_claim',
  );
  return rows.map((r) => {
    const minted = tokens[r.n - 1] as MintedLeaseToken;
    const task: ClaimedTask = {
      id: r.id,
      taskType: r.task_type,
      payload: r.payload,
      attempt: r.attempts,
      version: r.version,
      leaseToken: minted.token,
      leaseTokenDigest: minted.digest,
      leaseExpiresMs: r.lease_expires_ms,
      // The claim writes the lease and the deadline from the same expression.
      deadlineMs: r.lease_expires_ms,
      timeoutSeconds: r.timeout_seconds,
      partition: r.partition,
      dueMs: r.due_ms,
    };
    // Set only when present, without spreads (one object a task on the claim's hot path).
    if (r.children !== null) task.children = r.children;
    if (r.inputs !== null) task.inputs = taskInputs(r.inputs);
    if (r.traceparent !== null) task.traceparent = r.traceparent;
    return task;
  });
}

/**
 * SQL: the deadline of the attempt of task `t` after heartbeat `h`: with `h.extend` (seconds),
 * at least now + extend, never past the attempt's start + `max_timeout_seconds`; a deadline
 * already later is kept. Without, the deadline as it is. `now` is the parameter `$3`.
 */
const EXTENDED_DEADLINE = `CASE WHEN h.extend IS NULL THEN t.deadline_at
    ELSE least(greatest(t.deadline_at, ${tsParam(3)} + h.extend * interval '1 second'),
               t.started_at + coalesce(t.max_timeout_seconds, t.timeout_seconds) * interval '1 second') END`;

/**
 * Heartbeats, many in one statement: each extends the lease of its task whose token digest
 * is its own, by the task's timeout but never past the attempt's deadline, which it pushes
 * later first when it asks to (`extend_seconds`, see `EXTENDED_DEADLINE`). The token stays
 * valid. A heartbeat that arrives after the lease ran out but before anyone expired it still
 * extends it — the task was not handed on — unless the deadline passed: then the attempt is
 * over, and the heartbeat is refused (its lease actor expires it as a timeout).
 *
 * `$1` ids, `$2` their digests end to end (32 bytes each, one binary parameter, as for the
 * claim), `$3` now, `$4` the extensions asked, seconds (null: none), aligned with `$1`.
 * Shaped as the claim is: the unnest pairs each id with its position and so with its digest,
 * and `id = ANY($1)` keeps the primary-key lookup on offer; the status test is fenced
 * ({@link statusIs}): unfenced, over 20 000 running rows never analysed, the plan went through
 * `tasks_running_lease_idx` too (a batch of 1 000 among 50 000 running: 6–17 ms against 6–12
 * fenced, both backends; test/store/by-ids-plan.test.ts). The caller sends each
 * (task, digest) once; RETURNING gives the row's digest so that each is answered by whether
 * its own digest is the lease's.
 */
export const HEARTBEATS = `
  UPDATE tasks t
  SET deadline_at = ${EXTENDED_DEADLINE},
      lease_expires_at = least(${tsParam(3)} + t.timeout_seconds * interval '1 second', ${EXTENDED_DEADLINE}),
      updated_at = ${tsParam(3)}
  FROM unnest($1::uuid[], $4::float8[]) WITH ORDINALITY AS h(id, extend, n)
  WHERE t.id = ANY($1::uuid[])
    AND t.id = h.id
    AND ${statusIs('t', 'running')}
    AND t.deadline_at > ${tsParam(3)}
    AND t.lease_token_hash = substring($2::bytea FROM (h.n::int4 - 1) * ${LEASE_DIGEST_BYTES} + 1 FOR ${LEASE_DIGEST_BYTES})
  RETURNING t.id, ${msOf('t.lease_expires_at')} AS lease_expires_ms, ${msOf('t.deadline_at')} AS deadline_ms,
            t.cancel_requested, t.lease_token_hash`;

/** See `TaskStore.heartbeats`. */
export async function heartbeatTasks(
  db: Db,
  leases: readonly LeaseHeartbeat[],
  nowMs: number,
): Promise<(ExtendedLease | null)[]> {
  // One row per (task, digest): two heartbeats of one lease in a batch become one, asking the
  // larger extension. Rows with other digests for the same task match nothing.
  const sent = new Map<string, LeaseHeartbeat>();
  for (const l of leases) {
    if (!isUuid(l.taskId) || l.tokenDigest.length !== LEASE_DIGEST_BYTES) continue;
    const key = `${l.taskId.toLowerCase()}:${Buffer.from(l.tokenDigest).toString('hex')}`;
    const seen = sent.get(key);
    if (seen === undefined || (l.extendSeconds ?? 0) > (seen.extendSeconds ?? 0)) sent.set(key, l);
  }
  if (sent.size === 0) return leases.map(() => null);
  const rowsSent = [...sent.values()];
  const { rows } = await db.query<{
    id: string;
    lease_expires_ms: number;
    deadline_ms: number;
    cancel_requested: boolean;
    lease_token_hash: Uint8Array;
  }>(
    HEARTBEATS,
    [
      rowsSent.map((l) => l.taskId),
      Buffer.concat(rowsSent.map((l) => l.tokenDigest)),
      nowMs,
      rowsSent.map((l) => l.extendSeconds ?? null),
    ],
    'wh_heartbeats',
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  return leases.map((l) => {
    const row = byId.get(l.taskId.toLowerCase());
    if (row === undefined || !Buffer.from(row.lease_token_hash).equals(l.tokenDigest)) return null;
    return { leaseExpiresMs: row.lease_expires_ms, deadlineMs: row.deadline_ms, cancelRequested: row.cancel_requested };
  });
}

/** The lease of a running task, for its lease actor: the primary key. */
export const RUNNING_LEASE = `
  SELECT t.version, ${msOf('t.lease_expires_at')} AS lease_expires_ms, t.lease_token_hash
  FROM tasks t
  WHERE t.id = $1 AND ${statusIs('t', 'running')}`;

/** See `TaskStore.runningLease`. */
export async function runningLease(db: Db, taskId: string): Promise<RunningLease | null> {
  if (validIds([taskId]).length === 0) return null;
  const { rows } = await db.query<{
    version: number;
    lease_expires_ms: number | null;
    lease_token_hash: Uint8Array | null;
  }>(RUNNING_LEASE, [taskId], 'wh_running_lease');
  const row = rows[0];
  if (row === undefined || row.lease_expires_ms === null) return null;
  return { version: row.version, leaseExpiresMs: row.lease_expires_ms, tokenDigest: row.lease_token_hash };
}

/**
 * Handing back claims that never reached a worker (its long-poll went away before the answer
 * was written): running → pending as if the claim had not happened — the attempt is not
 * counted, the due time is kept — with version + 1 and the token digest cleared, so the
 * lease token the claim made is dead. A compare-and-set on (running, version); a task whose
 * cancel was requested meanwhile is left to its lease, whose expiry cancels it.
 */
const RELEASE = `
  UPDATE tasks t
  SET status = 'pending',
      attempts = t.attempts - 1,
      version = t.version + 1,
      lease_expires_at = NULL,
      lease_token_hash = NULL,
      started_at = NULL,
      updated_at = ${tsParam(3)}
  FROM unnest($1::uuid[], $2::int4[]) AS r(id, version)
  WHERE t.id = r.id AND ${statusIs('t', 'running')} AND t.version = r.version AND NOT t.cancel_requested
  RETURNING t.id, t.task_type, t.priority, ${msOf('t.due_time')} AS due_ms, t.limits`;

/** See `TaskStore.release`. */
export async function releaseTasks(
  db: Db,
  claims: readonly { taskId: string; version: number }[],
  nowMs: number,
): Promise<DueEntry[]> {
  const valid = claims.filter((c) => validIds([c.taskId]).length === 1 && Number.isSafeInteger(c.version));
  if (valid.length === 0) return [];
  const { rows } = await db.query<DueRow>(
    RELEASE,
    [valid.map((c) => c.taskId), valid.map((c) => c.version), nowMs],
    'wh_release',
  );
  return rows.map(toDueEntry);
}

/**
 * The safety net's look at leases: running tasks of some partitions whose lease ran out
 * before `$2`. The partial index (partition, lease_expires_at) WHERE status = 'running' has
 * the expiry in its key, so a pass reads the expired entries only — not the entries every
 * claim leaves behind until VACUUM, which an index of the partition alone made it read
 * (migrations/000010_running_lease_idx.sql).
 */
export const EXPIRED_LEASES = `
  SELECT t.id, t.version, ${msOf('t.lease_expires_at')} AS lease_expires_ms
  FROM tasks t
  WHERE t.partition = ANY($1::int[]) AND t.status = 'running' AND t.lease_expires_at < ${tsParam(2)}
  ORDER BY t.lease_expires_at
  LIMIT $3`;

/** See `TaskStore.expiredLeases`. */
export async function expiredLeases(
  db: Db,
  partitions: readonly number[],
  beforeMs: number,
  limit: number,
): Promise<{ taskId: string; version: number; leaseExpiresMs: number }[]> {
  if (partitions.length === 0 || limit <= 0) return [];
  const { rows } = await db.query<{ id: string; version: number; lease_expires_ms: number }>(
    EXPIRED_LEASES,
    [partitions, beforeMs, Math.floor(limit)],
    'wh_expired_leases',
  );
  return rows.map((r) => ({ taskId: r.id, version: r.version, leaseExpiresMs: r.lease_expires_ms }));
}
