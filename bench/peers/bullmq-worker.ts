/**
 * A BullMQ worker process for the peer bench (`npm run bench -- --peers`): BullMQ's own Worker
 * runs no-op jobs and records when each processor call started, the way bench/worker.ts does
 * for the SDK. It speaks the harness's protocol (bench/protocol.ts): `reported` counts jobs
 * BullMQ moved to completed, sampled on the same timer as the SDK worker's results.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker, type Job } from 'bullmq';
import { PROGRESS_EVERY_MS, type FromWorker, type ToWorker, type WorkerResult } from '../protocol.js';
import { rssKiB } from '../rss.js';
import { bullmqConnection, BULLMQ_PREFIX, type BullmqWorkerConfig } from './bullmq-config.js';

const config = JSON.parse(process.argv[2] ?? '{}') as BullmqWorkerConfig;
const send = (message: FromWorker, then?: () => void): void => {
  process.send?.(message, undefined, {}, () => then?.());
};

const lagsMs: number[] = [];
/** With `streamLags`: lags not yet sent, and when their processor calls started. */
let unsent: { startMs: number[]; lagMs: number[] } = { startMs: [], lagMs: [] };
let firstStartMs = Number.NaN;
let lastStartMs = Number.NaN;
let started = 0;
let completed = 0;
let failed = 0;
let errors = 0;

const worker = new Worker<{ due_ms?: number }>(
  config.queue,
  async (job: Job<{ due_ms?: number }>) => {
    const now = Date.now();
    started++;
    if (Number.isNaN(firstStartMs)) firstStartMs = now;
    lastStartMs = now;
    const dueMs = job.data.due_ms;
    if (typeof dueMs === 'number' && config.streamLags) {
      unsent.startMs.push(now);
      unsent.lagMs.push(now - dueMs);
    } else if (typeof dueMs === 'number') lagsMs.push(now - dueMs);
    if (config.handlerSleepMs !== undefined) await sleep(config.handlerSleepMs);
  },
  {
    connection: bullmqConnection(config.redisDb),
    prefix: BULLMQ_PREFIX,
    concurrency: config.concurrency,
    autorun: false,
  },
);
worker.on('completed', () => {
  completed++;
});
worker.on('failed', () => {
  failed++;
});
worker.on('error', (error) => {
  if (errors++ < 20) process.stderr.write(`bullmq worker: ${error.message}\n`);
});

let maxRssKiB = 0;
let lastReported = 0;
let lastReportedMs = Number.NaN;
let lastStarted = 0;
const progress = setInterval(() => {
  const now = Date.now();
  if (completed !== lastReported) lastReportedMs = now;
  if (unsent.lagMs.length > 0) {
    send({ type: 'progress', started, reported: completed, atMs: now, lags: unsent });
    unsent = { startMs: [], lagMs: [] };
  } else if (started !== lastStarted || completed !== lastReported)
    send({ type: 'progress', started, reported: completed, atMs: now });
  lastStarted = started;
  lastReported = completed;
}, PROGRESS_EVERY_MS);
const rssTimer = setInterval(() => {
  maxRssKiB = Math.max(maxRssKiB, rssKiB(process.pid) ?? 0);
}, 250);

process.on('message', (message: ToWorker) => {
  if (message.type !== 'stop') return;
  // close() lets the jobs in hand finish and be moved to completed.
  void worker.close().then(() => {
    clearInterval(progress);
    clearInterval(rssTimer);
    if (completed !== lastReported) lastReportedMs = Date.now();
    const result: WorkerResult = {
      started,
      succeeded: completed,
      failed,
      reported: completed,
      discarded: 0,
      completionRequests: 0,
      polls: 0,
      lagsMs,
      firstStartMs,
      lastStartMs,
      lastReportedMs,
      maxRssMiB: Math.max(maxRssKiB, rssKiB(process.pid) ?? 0) / 1024,
    };
    send({ type: 'result', result }, () => process.disconnect?.());
  });
});
// The harness going away (killed, timed out) must not leave this process taking jobs.
process.on('disconnect', () => process.exit(0));

await worker.waitUntilReady();
worker.run().catch((error: unknown) => {
  process.stderr.write(`bullmq worker: run: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
send({ type: 'ready', workerId: `bullmq-${process.pid}` });
