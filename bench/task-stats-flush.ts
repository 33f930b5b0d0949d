/**
 * What the task activity rollup costs (docs/decisions/0034-task-stats-rollup.md), measured
 * without a node: a `TaskStatsRollup` is fed the events a node emits for `--rate` tasks a
 * second of `--types` task types (each submitted, claimed and completed; 5 % failing), in
 * batches as the node emits them, and flushed every `--flush-seconds` of that load, against
 * the machine's Postgres (a schema of its own, dropped after) and PGlite (in memory).
 *
 *   node dist/bench/task-stats-flush.js [--rate 2000] [--types 10] [--flushes 30]
 *
 * Prints, per backend: statements per flush (counted at the `Db` boundary), ms per flush
 * (median, p95, max), µs of listener time per task, and the table's size after the run.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { NodeEvents } from '../src/domain/events.js';
import type { Transition } from '../src/domain/model.js';
import { TypedEvents } from '../src/lib/events.js';
import { systemClock } from '../src/runtime/clock.js';
import { TaskStatsRollup } from '../src/services/task-stats.js';
import { openPostgres, type Db } from '../src/store/db.js';
import { openPglite } from '../src/store/db-pglite.js';
import { migrate } from '../src/store/migrate.js';
import { SqlTaskStatsStore } from '../src/store/task-stats-store.js';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '2000' },
    types: { type: 'string', default: '10' },
    flushes: { type: 'string', default: '30' },
    'flush-seconds': { type: 'string', default: '10' },
    postgres: {
      type: 'string',
      default: process.env.WHEELHOUSE_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    },
  },
});
const RATE = Number(values.rate);
const TYPES = Number(values.types);
const FLUSHES = Number(values.flushes);
const FLUSH_S = Number(values['flush-seconds']);
/** Events come in batches of this many tasks, as a claim or a completion batch does. */
const BATCH = 50;

/** Counts the statements that go through `db`. */
function counted(db: Db): { db: Db; statements: () => number } {
  let n = 0;
  const wrapped: Db = Object.create(db) as Db;
  wrapped.query = (text, params, name) => {
    n++;
    return db.query(text, params, name);
  };
  return { db: wrapped, statements: () => n };
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

async function run(label: string, raw: Db): Promise<void> {
  await migrate(raw);
  const { db, statements } = counted(raw);
  const events = new TypedEvents<NodeEvents>();
  const rollup = new TaskStatsRollup({
    store: new SqlTaskStatsStore(db),
    nodeId: 'bench',
    clock: systemClock,
    retentionMs: 7 * 86_400_000,
    maxTaskTypes: 100,
    events,
  });
  rollup.listen(events);
  const flushMs: number[] = [];
  const perFlush: number[] = [];
  let listenerNs = 0n;
  let tasks = 0;
  // Each flush's load is spread over FLUSH_S seconds of (simulated) minutes: the rows it
  // touches are the types × the minutes it spans, as on a node.
  let atMs = Date.now();
  for (let f = 0; f < FLUSHES; f++) {
    const n = Math.round(RATE * FLUSH_S);
    for (let done = 0; done < n; done += BATCH) {
      const size = Math.min(BATCH, n - done);
      const types = Array.from({ length: size }, (_, i) => `type.${(done + i) % TYPES}`);
      const ids = types.map(() => randomBytes(8).toString('hex'));
      atMs += (size / RATE) * 1000;
      const t0 = process.hrtime.bigint();
      events.emit('task:submitted', { taskIds: ids, taskTypes: types });
      events.emit('task:claimed', {
        workerId: 'w',
        taskIds: ids,
        tasks: types.map((taskType, i) => ({ taskType, dueMs: atMs - (i % 40) })),
        startedMs: atMs,
      });
      const transitions: Transition[] = types.map((taskType, i) => ({
        taskId: ids[i] as string,
        status: i % 20 === 0 ? 'failed' : 'succeeded',
        version: 3,
        requeued: null,
        notifyDependents: false,
        taskType,
        startedMs: atMs,
        endedMs: atMs + 5,
      }));
      events.emit('task:completed', { transitions });
      listenerNs += process.hrtime.bigint() - t0;
      tasks += size;
    }
    const before = statements();
    const t0 = performance.now();
    await rollup.flush();
    flushMs.push(performance.now() - t0);
    perFlush.push(statements() - before);
  }
  const sorted = [...flushMs].sort((a, b) => a - b);
  const { rows } = await raw.query<{ rows: number; bytes: number }>(
    `SELECT count(*)::integer AS rows, pg_total_relation_size('task_stats')::float8 AS bytes FROM task_stats`,
  );
  console.log(
    JSON.stringify({
      backend: label,
      rate: RATE,
      types: TYPES,
      flushSeconds: FLUSH_S,
      flushes: FLUSHES,
      statementsPerFlush: [...new Set(perFlush)],
      flushMs: {
        median: +quantile(sorted, 0.5).toFixed(2),
        p95: +quantile(sorted, 0.95).toFixed(2),
        max: +(sorted[sorted.length - 1] ?? NaN).toFixed(2),
      },
      listenerUsPerTask: +(Number(listenerNs) / 1000 / tasks).toFixed(3),
      tableRows: rows[0]?.rows,
      tableBytes: rows[0]?.bytes,
    }),
  );
}

const schema = `bench_stats_${randomBytes(4).toString('hex')}`;
const pg = openPostgres({ url: values.postgres, schema, poolSize: 2 });
try {
  await run('postgres', pg);
} finally {
  await pg.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
  await pg.close();
}
const lite = await openPglite({ dataDir: null, schema: 'wheelhouse' });
try {
  await run('pglite', lite);
} finally {
  await lite.close();
}
