/**
 * What one pass of the safety nets costs on a big task table: `node dist/bench/safety-net-cost.js
 * [--pending N] [--running N] [--overdue N]` (after `npm run build`). It loads a fresh schema
 * with N pending tasks due over a week from an hour on, spread over 64 partitions, some running tasks
 * and (optionally) a backlog of overdue pending ones, then times the nets' statements as a
 * node runs them each pass: the expired leases of its partitions (one statement) and, per
 * partition, the oldest overdue pending tasks (a page of 100), and for a backlog the ready
 * queue check of those pages (Redis). Prints medians of 5 passes; drops the schema after.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { openPostgres } from '../src/store/db.js';
import { migrate } from '../src/store/migrate.js';
import { openRedis } from '../src/store/redis.js';
import { RedisReadyQueue } from '../src/store/redis-ready-queue.js';
import { SqlTaskStore } from '../src/store/task-store.js';
import { POSTGRES_URL, REDIS_URL } from './stores.js';
import { median, spaced } from './stats.js';

const PARTITIONS = 64;
/** As src/tasks/safety-net.ts reads them: expired leases in all, overdue pending per partition. */
const LEASE_PAGE = 500;
const PENDING_PAGE = 100;
const GRACE_MS = 10_000;
const PASSES = 5;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      pending: { type: 'string', default: '10000000' },
      running: { type: 'string', default: '10000' },
      overdue: { type: 'string', default: '300000' },
    },
  });
  const pending = Number(values.pending);
  const running = Number(values.running);
  const overdue = Number(values.overdue);
  const schema = `netcost_${randomBytes(4).toString('hex')}`;
  const prefix = `netcost${randomBytes(4).toString('hex')}`;
  const db = openPostgres({ url: POSTGRES_URL, schema, poolSize: 2 });
  const redis = openRedis({ url: REDIS_URL, prefix });
  try {
    await migrate(db, schema);
    const load = async (n: number, status: string, dueSql: string, extra = 'NULL'): Promise<void> => {
      for (let from = 0; from < n; from += 1_000_000) {
        const count = Math.min(1_000_000, n - from);
        await db.query(
          `INSERT INTO tasks (id, task_type, status, version, schedule_type, due_time, priority, partition, max_retries,
                              timeout_seconds, created_at, updated_at, lease_expires_at, payload)
           SELECT gen_random_uuid(), 'cost', $1, 1, 'delayed', ${dueSql}, 5, (g % ${PARTITIONS})::smallint, 3, 60, now(), now(), ${extra}, 'null'
           FROM generate_series(1, $2::int) g`,
          [status, count],
        );
      }
    };
    let started = Date.now();
    await load(pending, 'pending', `now() + interval '1 hour' + random() * interval '7 days'`);
    await load(running, 'running', 'now()', `now() + interval '60 seconds'`);
    await db.query('ANALYZE tasks');
    console.log(
      `loaded ${spaced(pending)} pending and ${spaced(running)} running tasks in ${((Date.now() - started) / 1000).toFixed(0)} s`,
    );
    const { rows } = await db.query<{ size: string }>(`SELECT pg_size_pretty(pg_total_relation_size('tasks')) AS size`);
    console.log(`tasks table with its indexes: ${rows[0]?.size}`);

    const tasks = new SqlTaskStore(db);
    const all = Array.from({ length: PARTITIONS }, (_, p) => p);
    const pass = async (): Promise<{ leasesMs: number; pendingMs: number; found: number }> => {
      const now = Date.now();
      let t = performance.now();
      await tasks.expiredLeases(all, now - GRACE_MS, LEASE_PAGE);
      const leasesMs = performance.now() - t;
      t = performance.now();
      let found = 0;
      for (const p of all) found += (await tasks.pendingInPartition(p, null, now - GRACE_MS, PENDING_PAGE)).length;
      return { leasesMs, pendingMs: performance.now() - t, found };
    };
    const report = async (label: string, withRedis: boolean): Promise<void> => {
      const passes = [];
      for (let i = 0; i < PASSES; i++) passes.push(await pass());
      let redisMs = Number.NaN;
      if (withRedis) {
        const ready = new RedisReadyQueue(redis, prefix);
        const page = await tasks.pendingInPartition(0, null, Date.now() - GRACE_MS, PENDING_PAGE);
        await ready.push(page);
        const times: number[] = [];
        for (let i = 0; i < PASSES; i++) {
          const t = performance.now();
          for (let p = 0; p < PARTITIONS; p++) await ready.held(page);
          times.push(performance.now() - t);
        }
        redisMs = median(times);
        await ready.close();
      }
      console.log(
        `${label}: expired leases ${median(passes.map((p) => p.leasesMs)).toFixed(1)} ms; overdue pending, 64 pages ` +
          `${median(passes.map((p) => p.pendingMs)).toFixed(1)} ms (${passes[0]?.found ?? 0} found)` +
          (withRedis ? `; ready-queue check of 64 × ${PENDING_PAGE} entries ${redisMs.toFixed(1)} ms` : ''),
      );
    };
    await report(`${spaced(pending)} pending, none overdue`, false);
    if (overdue > 0) {
      started = Date.now();
      await load(overdue, 'pending', `now() - interval '60 seconds'`);
      await db.query('ANALYZE tasks');
      console.log(
        `added ${spaced(overdue)} overdue pending tasks (a herd waiting for workers) in ${((Date.now() - started) / 1000).toFixed(0)} s`,
      );
      await report(`with a backlog of ${spaced(overdue)} overdue`, true);
    }
  } finally {
    await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await db.close();
    for (let cursor = '0'; ;) {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length > 0) await redis.unlink(...keys);
      cursor = next;
      if (cursor === '0') break;
    }
    redis.disconnect();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
