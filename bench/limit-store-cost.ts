/**
 * `npm run bench:limit-store-cost -- [--rounds R] [--batch N]`: what a non-binding limit costs
 * Postgres per task (issue 28, W1L), statement by statement. In a fresh schema, R rounds of N
 * tasks each are submitted, claimed and completed on one connection, through the store as a
 * node calls it; every second round's tasks name one limit and are claimed with its grants (the
 * fenced claim), as W1L's limited runs are. Prints the backend's CPU µs per task of each
 * statement, plain and limited, read from /proc around each statement (10 ms ticks: the rounds
 * average them out; about ±1.5 µs between runs on a busy machine).
 */
import { parseArgs } from 'node:util';
import { leaseTokenDigest } from '../src/domain/lease-token.js';
import type { Completion, NewTask } from '../src/domain/model.js';
import { openPostgres } from '../src/store/db.js';
import { migrate } from '../src/store/migrate.js';
import { SqlSnapshotStore } from '../src/store/snapshot-store.js';
import { SqlTaskStore } from '../src/store/task-store.js';
import { cpuMs } from './cluster-nodes.js';
import { POSTGRES_URL } from './stores.js';
import { pendingTask } from './store-tasks.js';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '160' }, batch: { type: 'string', default: '1000' } },
});
const rounds = Number(values.rounds);
const batch = Number(values.batch);
const KEY = 'w1-nonbinding';
const STEPS = ['submit', 'claim', 'complete'] as const;

const schema = `bench_limit_cost_${Math.random().toString(36).slice(2, 8)}`;
const db = openPostgres({ url: POSTGRES_URL, schema, poolSize: 1 });
try {
  await db.exec(`CREATE SCHEMA ${schema}`);
  await migrate(db, schema);
  const store = new SqlTaskStore(db);
  const { epoch } = await new SqlSnapshotStore(db).acquire('limit', KEY, 'bench', Date.now());
  const pid = (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const spent = { plain: [0, 0, 0], limited: [0, 0, 0] };
  const timed = async <T>(side: 'plain' | 'limited', step: number, work: () => Promise<T>): Promise<T> => {
    const before = cpuMs(pid);
    const out = await work();
    spent[side][step]! += cpuMs(pid) - before;
    return out;
  };
  for (let round = 0; round < rounds; round++) {
    const side = round % 2 === 1 ? 'limited' : 'plain';
    const now = Date.now();
    const tasks: NewTask[] = Array.from({ length: batch }, () =>
      pendingTask('bench.limitcost', now, { payload: { n: round }, ...(side === 'limited' ? { limits: [KEY] } : {}) }),
    );
    await timed(side, 0, () => store.submit(tasks, now));
    const ids = tasks.map((t) => t.id);
    const grants = side === 'limited' ? ids.map((taskId) => ({ taskId, key: KEY, epoch })) : undefined;
    const claimed = await timed(side, 1, () => store.claim(ids, 'bench-worker', now + 1, grants));
    if (claimed.length !== batch) throw new Error(`round ${round}: claimed ${claimed.length} of ${batch}`);
    const results: Completion[] = claimed.map((t) => ({
      taskId: t.id,
      tokenDigest: leaseTokenDigest(t.leaseToken) as Uint8Array,
      outcome: 'succeeded',
      error: null,
      retryable: true,
    }));
    await timed(side, 2, () => store.complete(results, now + 2, { baseMs: 1000, maxMs: 8000 }));
  }
  const perTask = (ms: number): number => (ms * 1000) / ((rounds / 2) * batch);
  console.log(`Postgres backend CPU per task, ${rounds / 2} rounds of ${batch} each side (µs)`);
  console.log('step       plain  limited  limited − plain');
  STEPS.forEach((step, i) => {
    const plain = perTask(spent.plain[i]!);
    const limited = perTask(spent.limited[i]!);
    console.log(
      `${step.padEnd(9)} ${plain.toFixed(1).padStart(6)} ${limited.toFixed(1).padStart(8)} ${(limited - plain).toFixed(1).padStart(16)}`,
    );
  });
} finally {
  await db.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
  await db.close();
}
