/**
 * The TypeScript side of bench/python-drain.ts: `createWorker` on the channel with a no-op
 * handler, which exits once the node has acknowledged N results.
 * `node dist/bench/python-drain-ts-worker.js URL TASK_TYPE N CONCURRENCY`; prints one JSON line:
 * the drain's seconds (from the worker's start to the N-th ack) and the process's CPU seconds.
 */
import { createWorker } from '../src/worker/index.js';
import { BENCH_ADMIN_TOKEN } from './auth.js';
import { sleep } from './time.js';

const [url, taskType, totalText, concurrencyText] = process.argv.slice(2) as [string, string, string, string];
const total = Number(totalText);
const worker = createWorker({
  url,
  taskTypes: [taskType],
  concurrency: Number(concurrencyText),
  workerId: `bench-ts-${process.pid}`,
  ...(BENCH_ADMIN_TOKEN === undefined ? {} : { token: BENCH_ADMIN_TOKEN }),
  handler: async () => undefined,
});
const cpu = process.cpuUsage();
const started = performance.now();
worker.start();
while (worker.stats.reported + worker.stats.discarded < total) await sleep(2);
const seconds = (performance.now() - started) / 1000;
const used = process.cpuUsage(cpu);
await worker.stop({ timeoutMs: 5_000 });
console.log(JSON.stringify({ seconds, cpu_seconds: (used.user + used.system) / 1e6, stats: worker.stats }));
