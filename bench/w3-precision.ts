import { percentiles } from './stats.js';
import { submitTasks } from './submit.js';
import { WorkerFleet } from './worker-process.js';
import { verifyAllSucceeded, workerTraffic, type RunContext, type RunFigures, type Workload } from './workload.js';

/** W3: timing precision of delayed tasks with idle workers. */
const TASK_TYPE = 'bench.w3';
const CONCURRENCY = 100;
/** Gap between submitting and the first possible due time, ms. */
const LEAD_MS = 3_000;

/** W3's shape, shared with BullMQ's run of it under `--peers`. */
export function w3Shape(quick: boolean): { count: number; spreadMs: number; leadMs: number; concurrency: number } {
  return { count: quick ? 200 : 1_000, spreadMs: quick ? 5_000 : 30_000, leadMs: LEAD_MS, concurrency: CONCURRENCY };
}

export const w3Precision: Workload = {
  id: 'W3',
  title: 'precision',
  definitions: [
    'W3: N = 1 000 (quick: 200) delayed no-op tasks with due_time at uniformly random millisecond offsets over a window ' +
      `(30 s; quick: 5 s) starting ${LEAD_MS / 1000} s after submission, run by an idle worker process (${CONCURRENCY} slots). ` +
      'Lag = handler start (Date.now() in the worker) − due_time, same machine clock.',
  ],
  metrics: [
    { key: 'p50Ms', label: 'start − due p50', unit: 'ms', digits: 1 },
    {
      key: 'p99Ms',
      label: 'start − due p99',
      unit: 'ms',
      digits: 1,
      bar: { op: '<=', value: 10, reference: 'BullMQ p99 100 ms' },
    },
    { key: 'maxMs', label: 'start − due max', unit: 'ms', digits: 1, bar: { op: '<=', value: 25 } },
    { key: 'minMs', label: 'start − due min', unit: 'ms', digits: 1 },
    { key: 'rssMiB', label: 'node max RSS', unit: 'MiB', digits: 0 },
  ],
  async run(ctx: RunContext): Promise<RunFigures> {
    const { count, spreadMs } = w3Shape(ctx.quick);
    const node = await ctx.startNode();
    const fleet = await WorkerFleet.start(ctx.workers, {
      url: node.url,
      taskType: TASK_TYPE,
      concurrency: CONCURRENCY,
      pollers: ctx.pollers,
    });
    try {
      node.rss.reset();
      const baseMs = Date.now() + LEAD_MS;
      const dues = Array.from({ length: count }, () => baseMs + Math.floor(Math.random() * spreadMs));
      const submitted = await submitTasks(node.url, count, (i) => {
        const dueMs = dues[i] as number;
        return {
          task_type: TASK_TYPE,
          payload: { due_ms: dueMs },
          schedule: { type: 'delayed', due_time: new Date(dueMs).toISOString() },
        };
      });
      const notes: string[] = [];
      if (submitted.lastAnsweredMs > baseMs)
        notes.push(`INVALID: submission ended ${submitted.lastAnsweredMs - baseMs} ms after the first due time`);
      await fleet.until((f) => f.reported >= count, spreadMs + LEAD_MS + 60_000, `${count} W3 results`);
      const results = await fleet.stop();
      const lags = results.flatMap((r) => r.lagsMs);
      notes.push(workerTraffic(results));
      const [min, p50, p99, max] = percentiles(lags, [0, 50, 99, 100]) as [number, number, number, number];
      const check = await verifyAllSucceeded(ctx, node, TASK_TYPE, count);
      if (lags.length !== count)
        notes.push(`worker saw ${lags.length} starts for ${count} tasks (retries or duplicates)`);
      return {
        values: { p50Ms: p50, p99Ms: p99, maxMs: max, minMs: min, rssMiB: node.rss.maxMiB },
        notes: [...notes, ...check.notes],
        verified: check.verified,
      };
    } catch (error) {
      fleet.kill();
      throw error;
    }
  },
};
