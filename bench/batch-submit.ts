/**
 * `npm run bench:batch -- [--batches N] [--warmup N]`: the cost of `POST /api/tasks/batch` with
 * 1 000 tasks, one request at a time against one node on Postgres + Redis. The tasks are
 * delayed an hour (a mix of plain, keyed, cron-free delayed and dependency-free tasks), so the
 * figure is validation, the insert and the answer, with no dispatch running beside it.
 * Prints the median, p90 and the tasks per second of the sequential run. With `BENCH_CLI` set
 * to another build's `dist/src/cli.js` the node runs from that build, for before/after figures.
 */
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { runNames, startBenchNode } from './node-process.js';
import { BenchStores } from './stores.js';

const { values } = parseArgs({
  options: { batches: { type: 'string', default: '40' }, warmup: { type: 'string', default: '5' } },
});
const batches = Number(values.batches);
const warmup = Number(values.warmup);

function batchBody(round: number): string {
  const tasks = [];
  for (let i = 0; i < 1000; i++) {
    const task: Record<string, unknown> = {
      task_type: i % 3 === 0 ? 'email.send' : 'report.build',
      payload: { user: `u${round}-${i}`, items: [1, 2, 3], note: 'a short note to make the payload realistic' },
      schedule: { type: 'delayed', delay_seconds: 3600 + (i % 60) },
      priority: i % 10,
    };
    if (i % 4 === 0) task.idempotency_key = `r${round}-${i}-${process.pid}`;
    if (i % 5 === 0) task.max_retries = 5;
    tasks.push(task);
  }
  return JSON.stringify({ tasks });
}

const names = runNames();
const node = await startBenchNode(names);
const ms: number[] = [];
try {
  for (let round = 0; round < warmup + batches; round++) {
    const body = batchBody(round);
    const started = performance.now();
    const res = await request(`${node.url}/api/tasks/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    const text = await res.body.text();
    const took = performance.now() - started;
    if (res.statusCode !== 201) throw new Error(`batch answered ${res.statusCode}: ${text.slice(0, 300)}`);
    if (round >= warmup) ms.push(took);
  }
} finally {
  await node.stop();
  const stores = new BenchStores();
  await stores.removeRun(names.schema, names.redisPrefix);
  await stores.close();
}
ms.sort((a, b) => a - b);
const at = (q: number): number => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))] ?? NaN;
const total = ms.reduce((a, b) => a + b, 0);
console.log(
  `batch-submit: ${batches} batches of 1000, median ${at(0.5).toFixed(1)} ms, p90 ${at(0.9).toFixed(1)} ms, ` +
    `${Math.round((batches * 1000) / (total / 1000))} tasks/s`,
);
