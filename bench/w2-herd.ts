import { percentiles } from './stats.js';
import { submitTasks } from './submit.js';
import { sleep } from './time.js';
import { WorkerFleet } from './worker-process.js';
import { verifyAllSucceeded, workerTraffic, type RunContext, type RunFigures, type Workload } from './workload.js';

/** W2: a thundering herd, every task due at the same instant T. */
const TASK_TYPE = 'bench.w2';
const CONCURRENCY = 1000;
/** Tasks submitted (due in an hour, never run) to measure the submission rate before T is chosen. */
const CALIBRATION_TASKS = 8_000;
/** Head room on the calibrated submission time, so T stays after the last submit. */
const SUBMIT_TIME_FACTOR = 1.3;
/** How often the ready queues are sampled around T, ms. */
const SAMPLE_EVERY_MS = 10;

/** W2's shape, shared with BullMQ's run of it under `--peers`. */
export function w2Shape(quick: boolean): {
  count: number;
  /** Gap planned between the end of submission and T, ms. */
  marginMs: number;
  /** Slots per worker process. */
  concurrency: number;
  calibrationTasks: number;
  submitTimeFactor: number;
} {
  return {
    count: quick ? 20_000 : 200_000,
    marginMs: quick ? 5_000 : 15_000,
    concurrency: CONCURRENCY,
    calibrationTasks: CALIBRATION_TASKS,
    submitTimeFactor: SUBMIT_TIME_FACTOR,
  };
}

export const w2Herd: Workload = {
  id: 'W2',
  title: 'thundering herd',
  definitions: [
    'W2: N = 200 000 (quick: 20 000) delayed no-op tasks all with due_time = T, submitted in batches before T. T is chosen before submitting: ' +
      'the harness first submits 2 × 4 000 tasks due in an hour (never run) to measure the submission rate, then sets ' +
      'T = now + 1.3 × N / rate + 15 s (quick: 5 s); the table gives the real gap between the last submit answer and T. ' +
      `The worker process (${CONCURRENCY} slots) idles until T.`,
    'W2 "all ready after T": from T, every 10 ms the harness adds the W2 ready queue depth and the in-flight entries ' +
      '(Redis, ZCARD) to the number of handlers the worker has started (reported ≤ 5 ms late over IPC); the first sample ' +
      'at which that sum reaches N, minus T. It is an upper bound: a task between claim and handler start is counted nowhere.',
    'W2 start lag: handler start (Date.now() in the worker) − T, over all N tasks.',
  ],
  metrics: [
    { key: 'allReadyS', label: 'all ready after T', unit: 's', digits: 3, bar: { op: '<=', value: 1 } },
    { key: 'p50S', label: 'start lag p50', unit: 's', digits: 3 },
    {
      key: 'p99S',
      label: 'start lag p99',
      unit: 's',
      digits: 3,
      bar: { op: '<=', value: 5.5, reference: 'BullMQ p99 11 s' },
    },
    { key: 'maxS', label: 'start lag max', unit: 's', digits: 3 },
    { key: 'marginS', label: 'last submit → T', unit: 's', digits: 1 },
    { key: 'rssMiB', label: 'node max RSS', unit: 'MiB', digits: 0 },
  ],
  async run(ctx: RunContext): Promise<RunFigures> {
    const { count, marginMs } = w2Shape(ctx.quick);
    const node = await ctx.startNode();
    const fleet = await WorkerFleet.start(ctx.workers, {
      url: node.url,
      taskType: TASK_TYPE,
      concurrency: CONCURRENCY,
      pollers: ctx.pollers,
    });
    try {
      node.rss.reset();
      const { dueMs, submitPerMs } = await chooseDueMs(node.url, TASK_TYPE, count, marginMs);
      const dueTime = new Date(dueMs).toISOString();
      const task = {
        task_type: TASK_TYPE,
        payload: { due_ms: dueMs },
        schedule: { type: 'delayed', due_time: dueTime },
      };
      ctx.log(
        `W2: submitting ${count} tasks due at ${dueTime} (calibrated at ${Math.round(submitPerMs * 1000)} submits/s)`,
      );
      const submitted = await submitTasks(node.url, count, () => task);
      const notes: string[] = [];
      const gapMs = dueMs - submitted.lastAnsweredMs;
      if (gapMs < 2_000) notes.push(`INVALID: submission ended only ${(gapMs / 1000).toFixed(1)} s before T`);
      if (submitted.retried > 0)
        notes.push(`${submitted.retried} submit requests were answered 429/503 and sent again`);
      if (fleet.started > 0) notes.push(`${fleet.started} tasks started before T`);

      const allReadyMs = await watchReady(ctx, node.redisPrefix, fleet, count, dueMs);
      await fleet.until((f) => f.reported >= count, 300_000, `${count} W2 results`);
      const results = await fleet.stop();
      const lags = results.flatMap((r) => r.lagsMs);
      notes.push(workerTraffic(results));
      const [p50, p99, max] = percentiles(lags, [50, 99, 100]) as [number, number, number];
      const check = await verifyAllSucceeded(ctx, node, TASK_TYPE, count);
      if (lags.length !== count)
        notes.push(`worker saw ${lags.length} starts for ${count} tasks (retries or duplicates)`);
      return {
        values: {
          allReadyS: allReadyMs / 1000,
          p50S: p50 / 1000,
          p99S: p99 / 1000,
          maxS: max / 1000,
          marginS: gapMs / 1000,
          rssMiB: node.rss.maxMiB,
        },
        notes: [...notes, ...check.notes],
        verified: check.verified,
      };
    } catch (error) {
      fleet.kill();
      throw error;
    }
  },
};

/**
 * T for a herd of `count` tasks. Every task carries T, so T is fixed before submitting: from a
 * measured submission rate, the second of two rounds of `CALIBRATION_TASKS / 2` tasks of
 * `<taskType>.calibration` due in an hour (never run; the first round warms the node up),
 * T = now + `marginMs` + 1.3 × `count` / rate. `extra(i)` adds fields to calibration task `i`
 * (0 … CALIBRATION_TASKS − 1), so that the calibration costs what the herd's submits will (an
 * idempotency key, say). Also shared by `npm run bench:herd-failover`.
 */
export async function chooseDueMs(
  url: string,
  taskType: string,
  count: number,
  marginMs: number,
  extra: (i: number) => Record<string, unknown> = () => ({}),
): Promise<{ dueMs: number; submitPerMs: number }> {
  const calibrationTask = (i: number): Record<string, unknown> => ({
    task_type: `${taskType}.calibration`,
    schedule: { type: 'delayed', delay_seconds: 3_600 },
    ...extra(i),
  });
  const half = CALIBRATION_TASKS / 2;
  await submitTasks(url, half, calibrationTask);
  const calibration = await submitTasks(url, half, (i) => calibrationTask(half + i));
  const submitPerMs = half / (calibration.lastAnsweredMs - calibration.firstSubmitMs);
  return { dueMs: Date.now() + marginMs + Math.ceil((count / submitPerMs) * SUBMIT_TIME_FACTOR), submitPerMs };
}

/** Samples from just before T until ready + in flight + started reaches `count`; returns that time − T, ms. */
async function watchReady(
  ctx: RunContext,
  prefix: string,
  fleet: WorkerFleet,
  count: number,
  dueMs: number,
): Promise<number> {
  const untilT = dueMs - Date.now() - 200;
  if (untilT > 0) await sleep(untilT);
  const deadline = dueMs + 120_000;
  while (Date.now() < deadline) {
    // Started first, then Redis: a started task left the queue and the in-flight set before
    // its poll was answered, so nothing is counted twice (a task that moves in between is
    // counted nowhere, which only makes the figure later).
    const started = fleet.started;
    const ready = await ctx.stores.readyAndTaken(prefix, TASK_TYPE);
    if (ready + started >= count) return Date.now() - dueMs;
    await sleep(SAMPLE_EVERY_MS);
  }
  throw new Error('W2: the herd was not all ready within 120 s of T');
}
