/**
 * What retention costs, for docs/decisions/0015-retention.md: `node dist/bench/retention-cost.js
 * [--finished N] [--rounds R]` (after `npm run build`). Each part runs in a fresh schema on the
 * test Postgres (dropped after) and prints its figures:
 *
 * 1. delete throughput: N finished tasks (10 % with two execution rows, 64 partitions), removed
 *    by the sweep's batch statement (`removeFinished`) partition by partition, for two batch
 *    sizes: rows/s and the median and largest batch in ms;
 * 2. the completion path with and without `tasks_finished_idx`, and on the alternative layout
 *    (`tasks` partitioned by completion time: a completion moves the row out of the default
 *    partition): R rounds, the variants' order alternating, each claims 20 000 tasks and times
 *    their completion in batches of 500 (`complete`, asynchronous commit as a node runs it), on
 *    a table that already holds N finished tasks: median ms per batch and µs per task;
 * 3. size: cycles of insert 200 000 + finish + sweep + VACUUM (what autovacuum runs; the test
 *    server runs with autovacuum off), with the table's and indexes' size after each;
 * 4. idempotency keys: 2 M live keys and 20 000 expired ones scattered through the table, purged
 *    in batches of 10 000 with `idempotency_keys_expires_idx` and as before it: keys/s.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { openPostgres, type Db } from '../src/store/db.js';
import { migrate } from '../src/store/migrate.js';
import { SqlTaskStore } from '../src/store/task-store.js';
import { uuidv7 } from '../src/lib/ids.js';
import { leaseTokenDigest } from '../src/domain/lease-token.js';
import type { Completion } from '../src/domain/model.js';
import { POSTGRES_URL } from './stores.js';
import { median, spaced } from './stats.js';

const PARTITIONS = 64;
const DAY_MS = 86_400_000;
const BACKOFF = { baseMs: 1000, maxMs: 60_000 };

async function scratch<T>(label: string, fn: (db: Db, leases: Db) => Promise<T>): Promise<T> {
  const schema = `retention_${label}_${randomBytes(4).toString('hex')}`;
  const db = openPostgres({ url: POSTGRES_URL, schema, poolSize: 2 });
  const leases = openPostgres({ url: POSTGRES_URL, schema, poolSize: 2, asynchronousCommit: true });
  try {
    await migrate(db, schema);
    return await fn(db, leases);
  } finally {
    await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await leases.close();
    await db.close();
  }
}

/**
 * Inserts `n` finished tasks that ended over the day before `endMs` (whole milliseconds, as the
 * store writes them), 10 % with two execution rows. `order`: `heap` ends them in the order they
 * sit in the table (as tasks that run soon after they are submitted do: a row is updated on its
 * page); `random` ends them in no relation to it (the worst case for the sweep's reads).
 */
async function loadFinished(db: Db, n: number, endMs: number, order: 'heap' | 'random' = 'heap'): Promise<void> {
  for (let from = 0; from < n; from += 500_000) {
    const count = Math.min(500_000, n - from);
    const ended =
      order === 'random'
        ? `round($2::float8 - random() * ${DAY_MS} + g * 0 * $3::float8)`
        : `round($2::float8 - ${DAY_MS} + (${from} + g)::float8 * ${DAY_MS} / $3::float8 + random() * 1000)`;
    await db.query(
      `INSERT INTO tasks (id, task_type, status, version, schedule_type, due_time, priority, partition, max_retries,
                          timeout_seconds, attempts, created_at, updated_at, started_at, completed_at, payload)
       SELECT gen_random_uuid(), 'cost', 'succeeded', 3, 'immediate', c - interval '1 second', 5,
              (g % ${PARTITIONS})::smallint, 3, 60, CASE WHEN g % 10 = 0 THEN 3 ELSE 1 END, c - interval '2 seconds',
              c, c - interval '1 second', c, '{"n": 1}'
       FROM generate_series(1, $1::int) g,
            LATERAL (SELECT to_timestamp(${ended} / 1000) AS c) t`,
      [count, endMs, n],
    );
  }
  await db.query(
    `INSERT INTO executions (task_id, attempt, status, due_time, started_at, completed_at, worker_id, error)
     SELECT t.id, a, 'failed', t.due_time, t.started_at, t.completed_at, 'w', 'boom'
     FROM tasks t, generate_series(1, 2) a WHERE t.attempts = 3`,
  );
  await db.query('ANALYZE tasks');
  await db.query('ANALYZE executions');
}

/** Sweeps every partition in batches of `limit`; answers rows/s and per-batch times. */
async function sweep(
  store: SqlTaskStore,
  horizonMs: number,
  limit: number,
): Promise<{ removed: number; seconds: number; batchesMs: number[] }> {
  const batchesMs: number[] = [];
  let removed = 0;
  const started = performance.now();
  for (let partition = 0; partition < PARTITIONS; partition++) {
    let after = null;
    for (;;) {
      const t = performance.now();
      const batch = await store.removeFinished({ partition, horizonMs, nowMs: horizonMs, after, limit });
      batchesMs.push(performance.now() - t);
      removed += batch.removed;
      if (batch.next === null) break;
      after = batch.next;
    }
  }
  return { removed, seconds: (performance.now() - started) / 1000, batchesMs };
}

async function deleteThroughput(
  finished: number,
  runs: readonly (readonly ['heap' | 'random', number])[],
): Promise<void> {
  for (const [order, limit] of runs) {
    await scratch('delete', async (db) => {
      const now = Date.now();
      await loadFinished(db, finished, now - 8 * DAY_MS, order);
      await db.query('CHECKPOINT');
      const store = new SqlTaskStore(db);
      const run = await sweep(store, now - 7 * DAY_MS, limit);
      const left = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM tasks`);
      const execs = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM executions`);
      console.log(
        `delete, ended in ${order} order, batches of ${limit}: ${spaced(run.removed)} tasks (+ ${spaced(finished / 5)} executions) in ` +
          `${run.seconds.toFixed(1)} s = ${spaced(Math.round(run.removed / run.seconds))} tasks/s; batch median ` +
          `${median(run.batchesMs).toFixed(1)} ms, max ${Math.max(...run.batchesMs).toFixed(1)} ms ` +
          `(${run.batchesMs.length} batches); left: ${left.rows[0]?.n} tasks, ${execs.rows[0]?.n} executions`,
      );
    });
  }
}

/** Submits `n` pending tasks due now and claims them: answers their results, all succeeded. */
async function claimed(store: SqlTaskStore, n: number, nowMs: number): Promise<Completion[]> {
  const ids: string[] = [];
  const tasks = Array.from({ length: n }, (_, i) => {
    const id = uuidv7(nowMs);
    ids.push(id);
    return {
      id,
      taskType: 'cost',
      payload: { n: i },
      scheduleType: 'immediate' as const,
      schedule: null,
      status: 'pending' as const,
      dueMs: nowMs,
      priority: 5,
      maxRetries: 3,
      timeoutSeconds: 60,
      partition: i % PARTITIONS,
      idempotencyKey: null,
      requestHash: null,
    };
  });
  for (let i = 0; i < n; i += 1000) await store.submit(tasks.slice(i, i + 1000), nowMs);
  const results: Completion[] = [];
  for (let i = 0; i < n; i += 500) {
    for (const c of await store.claim(ids.slice(i, i + 500), 'w1', nowMs)) {
      results.push({
        taskId: c.id,
        tokenDigest: leaseTokenDigest(c.leaseToken)!,
        outcome: 'succeeded',
        error: null,
        retryable: false,
        result: { ok: true },
      });
    }
  }
  return results;
}

/** Times completing `results` in batches of 500: ms per batch. */
async function completeAll(store: SqlTaskStore, results: Completion[], nowMs: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < results.length; i += 500) {
    const t = performance.now();
    await store.complete(results.slice(i, i + 500), nowMs, BACKOFF);
    times.push(performance.now() - t);
  }
  return times;
}

/** WAL that a statement wrote, as EXPLAIN (ANALYZE, WAL) counts it: the server's own figure, whatever the load. */
interface WalUse {
  records: number;
  fpi: number;
  bytes: number;
}

/**
 * Completes `results` (one batch) through a connection that runs the completion statement
 * under EXPLAIN (ANALYZE, WAL), and answers the WAL it wrote. The statement runs for real.
 */
async function completionWal(db: Db, results: Completion[], nowMs: number): Promise<WalUse> {
  let wal: WalUse | null = null;
  const explaining = Object.create(db) as Db;
  explaining.query = async <R>(text: string, params?: readonly unknown[]) => {
    const { rows } = await db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (ANALYZE, WAL, FORMAT JSON) ${text}`, params);
    const plan = (rows[0]?.['QUERY PLAN'] as { Plan: Record<string, number> }[])[0]!.Plan;
    wal = { records: plan['WAL Records']!, fpi: plan['WAL FPI']!, bytes: plan['WAL Bytes']! };
    return { rows: [] as R[], rowCount: 0 };
  };
  await new SqlTaskStore(explaining).complete(results, nowMs, BACKOFF);
  if (wal === null) throw new Error('the completion ran no statement');
  return wal;
}

type Variant = 'with index' | 'without index' | 'partitioned';

/**
 * Rounds of 20 000 completions in each variant, the order alternating round by round: the
 * plain schema with and without `tasks_finished_idx`, and a schema partitioned by completion.
 */
async function completionCost(finished: number, rounds: number): Promise<void> {
  await scratch('complete', async (plainDb, plainLeases) => {
    await scratch('partitioned', async (partDb, partLeases) => {
      const now = Date.now();
      await partitionByCompletion(partDb, now);
      await loadFinished(plainDb, finished, now - DAY_MS);
      await loadFinished(partDb, finished, now - DAY_MS);
      const plain = new SqlTaskStore(plainDb, plainLeases);
      const part = new SqlTaskStore(partDb, partLeases);
      const variants: Variant[] = ['with index', 'without index', 'partitioned'];
      const per = new Map<Variant, number[]>(variants.map((v) => [v, []]));
      const wal = new Map<Variant, WalUse[]>(variants.map((v) => [v, []]));
      for (let r = 0; r < rounds; r++) {
        for (const variant of r % 2 === 0 ? variants : [...variants].reverse()) {
          if (variant === 'without index') await plainDb.query('DROP INDEX IF EXISTS tasks_finished_idx');
          if (variant === 'with index') await plainDb.query(FINISHED_INDEX);
          const [db, store, leases] =
            variant === 'partitioned' ? [partDb, part, partLeases] : [plainDb, plain, plainLeases];
          // A checkpoint first: the submits and claims write the pages' full images, as they do
          // on a node (a task is claimed shortly before it completes); its completion does not.
          await db.query('CHECKPOINT');
          const results = await claimed(store, 20_500, now);
          const times = await completeAll(store, results.slice(0, 20_000), now + 1000);
          per.get(variant)!.push(...times);
          wal.get(variant)!.push(await completionWal(leases, results.slice(20_000), now + 1000));
          await db.query('VACUUM tasks');
        }
      }
      for (const variant of variants) {
        const times = per.get(variant)!;
        const m = median(times);
        const w = wal.get(variant)!;
        const bytes = median(w.map((x) => x.bytes / 500));
        const records = median(w.map((x) => x.records / 500));
        console.log(
          `complete, batches of 500, on ${spaced(finished)} finished tasks, ${variant === 'partitioned' ? 'tasks partitioned by completed_at' : `${variant} tasks_finished_idx`}: ` +
            `median ${m.toFixed(2)} ms per batch (${((m * 1000) / 500).toFixed(1)} µs/task) over ${times.length} batches; ` +
            `WAL ${records.toFixed(2)} records, ${bytes.toFixed(0)} bytes per task (full-page images ${w.map((x) => x.fpi).join(', ')})`,
        );
      }
    });
  });
}

const FINISHED_INDEX = `CREATE INDEX IF NOT EXISTS tasks_finished_idx ON tasks (partition, completed_at, id)
  WHERE status IN ('succeeded', 'failed', 'cancelled')`;

/**
 * The alternative layout: `tasks` partitioned by range of completed_at, a default partition
 * for the unfinished (completed_at NULL) and one per day. A primary key must hold the
 * partition column and completed_at is NULL until the end, so id is only indexed, not unique.
 */
async function partitionByCompletion(db: Db, nowMs: number): Promise<void> {
  await db.query(`ALTER TABLE tasks RENAME TO tasks_plain`);
  await db.query(
    `CREATE TABLE tasks (LIKE tasks_plain INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (completed_at)`,
  );
  await db.query(`CREATE TABLE tasks_live PARTITION OF tasks DEFAULT WITH (fillfactor = 80)`);
  for (let d = -3; d <= 2; d++) {
    const from = new Date(nowMs + d * DAY_MS).toISOString().slice(0, 10);
    const to = new Date(nowMs + (d + 1) * DAY_MS).toISOString().slice(0, 10);
    await db.query(`CREATE TABLE tasks_d${d + 3} PARTITION OF tasks FOR VALUES FROM ('${from}') TO ('${to}')`);
  }
  await db.query(`CREATE INDEX ON tasks (id)`);
  await db.query(`CREATE INDEX ON tasks (partition, due_time, id) WHERE status = 'pending'`);
  await db.query(`CREATE INDEX ON tasks (partition) WHERE status = 'running'`);
  await db.query(`DROP TABLE tasks_plain`);
}

async function sizeCycles(): Promise<void> {
  await scratch('size', async (db) => {
    const store = new SqlTaskStore(db);
    const sizes: string[] = [];
    for (let cycle = 1; cycle <= 6; cycle++) {
      const now = Date.now();
      await loadFinished(db, 200_000, now - 8 * DAY_MS);
      const run = await sweep(store, now - 7 * DAY_MS, 5000);
      await db.query('VACUUM executions');
      await db.query('VACUUM tasks');
      const { rows } = await db.query<{ heap: string; idx: string; finished: string; execs: string }>(
        `SELECT pg_size_pretty(pg_relation_size('tasks')) AS heap, pg_size_pretty(pg_indexes_size('tasks')) AS idx,
                pg_size_pretty(pg_relation_size('tasks_finished_idx')) AS finished,
                pg_size_pretty(pg_total_relation_size('executions')) AS execs`,
      );
      const r = rows[0]!;
      sizes.push(
        `cycle ${cycle} (${spaced(run.removed)} removed): heap ${r.heap}, indexes ${r.idx} (finished ${r.finished}), executions ${r.execs}`,
      );
    }
    for (const line of sizes) console.log(`size after insert 200 000 + finish + sweep + VACUUM, ${line}`);
  });
}

/** The purge as it was before 000008: no index on expires_at, a scan until the batch is found. */
const PURGE_WITHOUT_INDEX = `
  DELETE FROM idempotency_keys
  WHERE ctid IN (SELECT ctid FROM idempotency_keys WHERE expires_at < to_timestamp($1::float8 / 1000) LIMIT $2)`;

/**
 * 2 M live keys with 20 000 expired ones scattered among them (as after days of purges whose
 * freed space new keys reused; at steady state a minute's keys expire among 24 h of them),
 * purged batch after batch of 10 000 until none is left.
 */
async function keyPurge(): Promise<void> {
  for (const indexed of [true, false]) {
    await scratch('keys', async (db) => {
      if (!indexed) await db.query('DROP INDEX idempotency_keys_expires_idx');
      const now = Date.now();
      await db.query(
        `INSERT INTO idempotency_keys (task_type, key, request_hash, task_id, expires_at)
         SELECT 'cost', 'k' || g, 'h', gen_random_uuid(),
                CASE WHEN g % 101 = 0 THEN to_timestamp($1::float8 / 1000) - random() * interval '1 minute'
                     ELSE to_timestamp($1::float8 / 1000) + random() * interval '24 hours' END
         FROM generate_series(1, 2020000) g ORDER BY random()`,
        [now],
      );
      await db.query('VACUUM ANALYZE idempotency_keys');
      const store = new SqlTaskStore(db);
      const purge = async (): Promise<number> =>
        indexed
          ? store.purgeExpiredIdempotencyKeys(now, 10_000)
          : (await db.query(PURGE_WITHOUT_INDEX, [now, 10_000])).rowCount;
      const times: number[] = [];
      let purged = 0;
      const started = performance.now();
      for (;;) {
        const t = performance.now();
        const n = await purge();
        times.push(performance.now() - t);
        purged += n;
        if (n < 10_000) break;
      }
      const seconds = (performance.now() - started) / 1000;
      console.log(
        `idempotency keys ${indexed ? 'with' : 'without'} the expires_at index: ${spaced(purged)} expired among 2 000 000 purged in ` +
          `${seconds.toFixed(2)} s = ${spaced(Math.round(purged / seconds))} keys/s; ${times.length} batches, median ${median(times).toFixed(0)} ms`,
      );
    });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      finished: { type: 'string', default: '1000000' },
      rounds: { type: 'string', default: '5' },
      only: { type: 'string', default: 'delete,delete-random,complete,size,keys' },
    },
  });
  const finished = Number(values.finished);
  const rounds = Number(values.rounds);
  const only = new Set(values.only.split(','));
  if (only.has('delete'))
    await deleteThroughput(finished, [
      ['heap', 1000],
      ['heap', 2000],
      ['heap', 5000],
    ]);
  if (only.has('delete-random')) await deleteThroughput(finished, [['random', 2000]]);
  if (only.has('complete')) await completionCost(finished, rounds);
  if (only.has('size')) await sizeCycles();
  if (only.has('keys')) await keyPurge();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
