/**
 * `npm run bench:claim-plan -- [--tasks N] [--sizes 250,1000,2000]`: what the claim statement
 * costs Postgres per claimed row, by the size of the claim and by the plan it runs with. N
 * pending tasks in a fresh schema; then claims of each size in turn, on one connection each,
 * with `plan_cache_mode` forced to a generic plan (what `pg`'s named statement settles on after
 * five runs) and to a plan made with the ids in hand (the first five runs; PGlite, which keeps
 * no statements). Prints the backend's CPU µs per claimed row, read from /proc. A claim whose
 * cost per row grows with its size has a plan that is not linear (docs/decisions/0012).
 */
import { parseArgs } from 'node:util';
import type { NewTask } from '../src/domain/model.js';
import { openPostgres, type Db } from '../src/store/db.js';
import { migrate } from '../src/store/migrate.js';
import { SqlTaskStore } from '../src/store/task-store.js';
import { cpuMs } from './cluster-nodes.js';
import { POSTGRES_URL } from './stores.js';
import { pendingTask } from './store-tasks.js';

const { values } = parseArgs({
  options: { tasks: { type: 'string', default: '60000' }, sizes: { type: 'string', default: '250,1000,2000' } },
});
const total = Number(values.tasks);
const sizes = values.sizes.split(',').map(Number);
const MODES = ['force_generic_plan', 'force_custom_plan'] as const;

const schema = `bench_claim_${Math.random().toString(36).slice(2, 8)}`;
const setup = openPostgres({ url: POSTGRES_URL, schema, poolSize: 1 });
const conns: Db[] = [];
try {
  await setup.exec(`CREATE SCHEMA ${schema}`);
  await migrate(setup, schema);
  const store = new SqlTaskStore(setup);
  const ids: string[] = [];
  const dueMs = Date.now() - 60_000;
  for (let made = 0; made < total; made += 1000) {
    const tasks: NewTask[] = Array.from({ length: Math.min(1000, total - made) }, () => {
      const task = pendingTask('bench.claim', dueMs);
      ids.push(task.id);
      return task;
    });
    await store.submit(tasks, dueMs);
  }
  await setup.exec('ANALYZE tasks');
  // One connection per plan mode, so each backend's CPU is that mode's alone.
  const runs = MODES.map((mode) => {
    const db = openPostgres({ url: POSTGRES_URL, schema, poolSize: 1, asynchronousCommit: true });
    conns.push(db);
    return { mode, db, store: new SqlTaskStore(db), pid: 0 };
  });
  for (const run of runs) {
    await run.db.exec(`SET plan_cache_mode = ${run.mode}`);
    run.pid = (await run.db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  }
  // Two rounds over every size and mode, interleaved; each claim takes fresh pending ids.
  const per = Math.floor(total / (2 * sizes.length * runs.length));
  let next = 0;
  for (const round of [1, 2]) {
    for (const size of sizes) {
      for (const run of runs) {
        const part = ids.slice(next, next + per);
        next += per;
        const before = cpuMs(run.pid);
        let claimed = 0;
        for (let at = 0; at < part.length; at += size) {
          const slice = part.slice(at, at + size);
          claimed += (
            await run.store.claimForWorkers(
              slice,
              slice.map((_, k) => `w${k % 8}`),
              Date.now(),
            )
          ).length;
        }
        const usPerRow = ((cpuMs(run.pid) - before) * 1000) / claimed;
        console.log(
          `claim-plan round ${round}: ${size} rows a claim, ${run.mode}: ${usPerRow.toFixed(1)} µs of Postgres CPU per claimed row (${claimed} rows)`,
        );
      }
    }
  }
} finally {
  for (const db of conns) await db.close();
  await setup.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await setup.close();
}
