import pg from 'pg';
import { Redis } from 'ioredis';

/**
 * The harness's own view of the stores: counting outcomes straight from the system of
 * record, watching the ready queues during the herd, and removing a run's schema and keys.
 * Loopback only.
 */
export const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = 'redis://127.0.0.1:6379';

/** One cron instance, as {@link BenchStores.cronInstances} reads it. */
export interface CronInstanceRow {
  scheduleId: string;
  status: string;
  /** Claims so far. */
  attempts: number;
  /** Nominal fire time, Unix ms. */
  fireMs: number;
  /** First claim − fire time, ms; null if never claimed. */
  lateMs: number | null;
}

/** One task of a DAG that has predecessors, as {@link BenchStores.dagDependents} reads it. */
export interface DagDependentRow {
  /** started_at (its claim) − the latest completed_at of its predecessors, ms; null if either is missing. */
  overheadMs: number | null;
  /** The latest completed_at of its predecessors, Unix ms; null if one has none. */
  readyMs: number | null;
  /** Its predecessors: the edges into it. */
  edges: number;
}

export class BenchStores {
  readonly pg = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
  readonly redis = new Redis(REDIS_URL, { lazyConnect: false, maxRetriesPerRequest: 2 });

  constructor() {
    // A restarted Postgres (npm run chaos -- --faults) ends idle connections: the pool drops
    // them and opens new ones; unheard, the 'error' event would end the harness.
    this.pg.on('error', () => undefined);
    this.redis.on('error', () => undefined);
  }

  /** Task counts by stored status, for one task type. */
  async countByStatus(schema: string, taskType: string): Promise<Record<string, number>> {
    const { rows } = await this.pg.query<{ status: string; n: string }>(
      `SELECT status, count(*) AS n FROM "${schema}".tasks WHERE task_type = $1 GROUP BY status`,
      [taskType],
    );
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  }

  /**
   * The cron instances of one task type whose nominal fire time is in [fromMs, toMs], one
   * row each. An instance claimed more than once has its earlier claims in `executions`;
   * its first claim is the earliest of those and the task row's `started_at` (node clock).
   * No index serves `fire_time`: a sequential scan of the run's own schema, after the run.
   */
  async cronInstances(schema: string, taskType: string, fromMs: number, toMs: number): Promise<CronInstanceRow[]> {
    const { rows } = await this.pg.query<CronInstanceRow>(
      `SELECT t.schedule_id AS "scheduleId", t.status, t.attempts,
              (extract(epoch FROM t.fire_time) * 1000)::float8 AS "fireMs",
              (extract(epoch FROM LEAST(t.started_at,
                 (SELECT min(e.started_at) FROM "${schema}".executions e WHERE e.task_id = t.id)) - t.fire_time) * 1000)::float8 AS "lateMs"
       FROM "${schema}".tasks t
       WHERE t.task_type = $1 AND t.schedule_id IS NOT NULL
         AND t.fire_time BETWEEN to_timestamp($2::float8 / 1000) AND to_timestamp($3::float8 / 1000)`,
      [taskType, fromMs, toMs],
    );
    return rows;
  }

  /** Counts by stored status of one task type's cron instances with fire times in [fromMs, toMs]. */
  async cronStatusCounts(
    schema: string,
    taskType: string,
    fromMs: number,
    toMs: number,
  ): Promise<Record<string, number>> {
    const { rows } = await this.pg.query<{ status: string; n: string }>(
      `SELECT status, count(*) AS n FROM "${schema}".tasks
       WHERE task_type = $1 AND schedule_id IS NOT NULL
         AND fire_time BETWEEN to_timestamp($2::float8 / 1000) AND to_timestamp($3::float8 / 1000)
       GROUP BY status`,
      [taskType, fromMs, toMs],
    );
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  }

  /** Task counts by stored status, over the tasks of the given DAGs (POST /api/dags). */
  async dagStatusCounts(schema: string, dagIds: readonly string[]): Promise<Record<string, number>> {
    const { rows } = await this.pg.query<{ status: string; n: string }>(
      `SELECT status, count(*) AS n FROM "${schema}".tasks WHERE dag_id = ANY($1::uuid[]) GROUP BY status`,
      [dagIds],
    );
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  }

  /** The latest completed_at among the tasks of the given DAGs (Unix ms, NaN for none) and how many have none. */
  async dagLastCompleted(
    schema: string,
    dagIds: readonly string[],
  ): Promise<{ lastMs: number; withoutCompletedAt: number }> {
    const { rows } = await this.pg.query<{ lastMs: number | null; missing: string }>(
      `SELECT (extract(epoch FROM max(completed_at)) * 1000)::float8 AS "lastMs",
              count(*) FILTER (WHERE completed_at IS NULL) AS missing
       FROM "${schema}".tasks WHERE dag_id = ANY($1::uuid[])`,
      [dagIds],
    );
    const row = rows[0];
    return { lastMs: row?.lastMs ?? Number.NaN, withoutCompletedAt: Number(row?.missing ?? 0) };
  }

  /**
   * Every task of the given DAGs that has predecessors (task_dependencies), one row each: how
   * long after its last predecessor completed it was claimed. Both times are the node's clock.
   */
  async dagDependents(schema: string, dagIds: readonly string[]): Promise<DagDependentRow[]> {
    const { rows } = await this.pg.query<DagDependentRow>(
      `SELECT (extract(epoch FROM t.started_at - max(p.completed_at)) * 1000)::float8 AS "overheadMs",
              (extract(epoch FROM max(p.completed_at)) * 1000)::float8 AS "readyMs",
              count(*)::int AS edges
       FROM "${schema}".tasks t
       JOIN "${schema}".task_dependencies d ON d.task_id = t.id
       JOIN "${schema}".tasks p ON p.id = d.predecessor_id
       WHERE t.dag_id = ANY($1::uuid[])
       GROUP BY t.id, t.started_at`,
      [dagIds],
    );
    return rows;
  }

  /**
   * Entries in one ready queue plus entries taken but not yet acknowledged (the node's key
   * layout, src/store/redis-keys.ts: `<prefix>:{rq}:q:<priority>:<type>` and `<prefix>:{rq}:inflight`).
   */
  async readyAndTaken(prefix: string, taskType: string, priority = 5): Promise<number> {
    const result = await this.redis
      .pipeline()
      .zcard(`${prefix}:{rq}:q:${priority}:${taskType}`)
      .zcard(`${prefix}:{rq}:inflight`)
      .exec();
    let total = 0;
    for (const [error, n] of result ?? []) {
      if (error) throw error;
      total += Number(n);
    }
    return total;
  }

  /** Status and attempts of some tasks, by id. */
  async taskStatuses(
    schema: string,
    ids: readonly string[],
  ): Promise<Map<string, { status: string; attempts: number }>> {
    const { rows } = await this.pg.query<{ id: string; status: string; attempts: number }>(
      `SELECT id::text, status, attempts FROM "${schema}".tasks WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    return new Map(rows.map((r) => [r.id, { status: r.status, attempts: r.attempts }]));
  }

  /** Drops a run's schema and deletes its Redis keys. */
  async removeRun(schema: string, prefix: string): Promise<void> {
    await this.pg.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await this.redis.unlink(...keys);
    } while (cursor !== '0');
  }

  /**
   * Ends Postgres's current checkpoint interval now (`CHECKPOINT`), so that a run that follows
   * starts where the one before it started: no checkpoint of an earlier run's WAL writing
   * beside it. false when the server refused (a role without the right).
   */
  async checkpoint(): Promise<boolean> {
    try {
      await this.pg.query('CHECKPOINT');
      return true;
    } catch {
      return false;
    }
  }

  /** A node's Postgres backends (its pools' `application_name` is `wheelhouse <node id>`). */
  async backendPids(nodeId: string): Promise<number[]> {
    const { rows } = await this.pg.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
      [`wheelhouse ${nodeId}`],
    );
    return rows.map((r) => r.pid);
  }

  /** Server versions, for the report. */
  async versions(): Promise<{ postgres: string; redis: string }> {
    const { rows } = await this.pg.query<{ v: string }>("SELECT current_setting('server_version') AS v");
    const info = await this.redis.info('server');
    const redis = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
    return { postgres: rows[0]?.v ?? 'unknown', redis };
  }

  async close(): Promise<void> {
    await this.pg.end();
    this.redis.disconnect();
  }
}
