import pg from 'pg';
import { Redis } from 'ioredis';

/**
 * The harness's own view of the stores: counting outcomes straight from the system of
 * record, watching the ready queues during the herd, and removing a run's schema and keys.
 * Loopback only.
 */
export const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = 'redis://127.0.0.1:6379';

export class BenchStores {
  readonly pg = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
  readonly redis = new Redis(REDIS_URL, { lazyConnect: false, maxRetriesPerRequest: 2 });

  /** Task counts by stored status, for one task type. */
  async countByStatus(schema: string, taskType: string): Promise<Record<string, number>> {
    const { rows } = await this.pg.query<{ status: string; n: string }>(
      `SELECT status, count(*) AS n FROM "${schema}".tasks WHERE task_type = $1 GROUP BY status`,
      [taskType],
    );
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
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
