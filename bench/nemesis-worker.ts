/**
 * One worker process of the nemesis (bench/nemesis.ts): the SDK on the channel or on the HTTP
 * long-poll, running every nemesis task type with a handler that sleeps a little, and writing
 * what it did to a JSON-lines log that the history checker reads (bench/nemesis-history.ts):
 * `start` when a handler begins, `end` when it stops holding the task — `ok` when the handler
 * finished (the SDK then reports the result), `lease_lost` when the SDK aborted it because
 * the lease was no longer this worker's — and `answer` when the node's answer to a result is
 * known (`accepted`, `refused`, `dropped`: the SDK's `onResult`). Each line is written with a synchronous write, so a
 * SIGKILL loses at most the line being written, never one the harness thinks was written.
 *
 * Started by the harness with `fork`, its configuration as JSON in argv[2]; stops gracefully
 * on SIGTERM (finishes and reports what it holds) and dies on SIGKILL like any worker.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { createWorker } from '../src/worker/index.js';

export interface NemesisWorkerConfig {
  urls: string[];
  transport: 'channel' | 'http';
  workerId: string;
  logFile: string;
  taskTypes: string[];
  concurrency: number;
  /** A handler sleeps a random time in [min, max] ms. */
  sleepMs: [number, number];
}

const config = JSON.parse(process.argv[2] ?? '{}') as NemesisWorkerConfig;
const fd = openSync(config.logFile, 'a');
const write = (record: Record<string, unknown>): void => {
  writeSync(fd, `${JSON.stringify({ ...record, t: Date.now(), worker: config.workerId })}\n`);
};

/** The attempt of each task this worker holds or has a result out for (one at a time per task). */
const attempts = new Map<string, number>();

const worker = createWorker({
  urls: config.urls,
  transport: config.transport,
  workerId: config.workerId,
  taskTypes: config.taskTypes,
  concurrency: config.concurrency,
  pollWaitMs: 5_000,
  onError: () => undefined,
  onResult: (taskId, outcome) => {
    write({ ev: 'answer', task_id: taskId, attempt: attempts.get(taskId), outcome });
    attempts.delete(taskId);
  },
  handler: async ({ taskId, taskType, attempt, signal }) => {
    attempts.set(taskId, attempt);
    write({ ev: 'start', task_id: taskId, attempt, path: config.transport, task_type: taskType });
    const [min, max] = config.sleepMs;
    try {
      await delay(min + Math.random() * (max - min), undefined, { signal });
    } catch (error) {
      write({ ev: 'end', task_id: taskId, attempt, outcome: 'lease_lost' });
      attempts.delete(taskId);
      throw error;
    }
    write({ ev: 'end', task_id: taskId, attempt, outcome: 'ok' });
    return { by: config.workerId };
  },
});
worker.start();
process.send?.({ ready: true });

process.once('SIGTERM', () => {
  void worker.stop({ timeoutMs: 5_000 }).finally(() => {
    closeSync(fd);
    process.exit(0);
  });
});
