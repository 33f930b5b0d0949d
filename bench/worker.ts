/**
 * A benchmark worker process: runs no-op tasks with the SDK and records when each handler
 * started. Started by the harness with `fork` (IPC); reports progress while it runs and
 * everything it recorded when told to stop.
 */
import { createWorker } from '../src/worker/index.js';
import type { BenchWorkerConfig, FromWorker, ToWorker, WorkerResult } from './protocol.js';
import { PROGRESS_EVERY_MS } from './protocol.js';
import { rssKiB } from './rss.js';

const config = JSON.parse(process.argv[2] ?? '{}') as BenchWorkerConfig;
const send = (message: FromWorker, then?: () => void): void => {
  process.send?.(message, undefined, {}, () => then?.());
};

const lagsMs: number[] = [];
let firstStartMs = Number.NaN;
let lastStartMs = Number.NaN;
let errors = 0;

const worker = createWorker({
  url: config.url,
  taskTypes: [config.taskType],
  concurrency: config.concurrency,
  pollers: config.pollers,
  // The bench node runs with the default 30 s long-poll maximum; a shorter wait keeps stop() quick.
  pollWaitMs: 5_000,
  handler: async ({ payload }) => {
    const now = Date.now();
    if (Number.isNaN(firstStartMs)) firstStartMs = now;
    lastStartMs = now;
    const dueMs = (payload as { due_ms?: unknown } | null)?.due_ms;
    if (typeof dueMs === 'number') lagsMs.push(now - dueMs);
  },
  onError: (error, context) => {
    if (errors++ < 20) process.stderr.write(`bench worker: ${context}: ${error instanceof Error ? error.message : String(error)}\n`);
  },
});

let maxRssKiB = 0;
let lastReported = 0;
let lastReportedMs = Number.NaN;
let lastStarted = 0;
const progress = setInterval(() => {
  const { started, reported } = worker.stats;
  const now = Date.now();
  if (reported !== lastReported) lastReportedMs = now;
  if (started !== lastStarted || reported !== lastReported) send({ type: 'progress', started, reported, atMs: now });
  lastStarted = started;
  lastReported = reported;
}, PROGRESS_EVERY_MS);
const rssTimer = setInterval(() => {
  maxRssKiB = Math.max(maxRssKiB, rssKiB(process.pid) ?? 0);
}, 250);

process.on('message', (message: ToWorker) => {
  if (message.type !== 'stop') return;
  void worker.stop().then(() => {
    clearInterval(progress);
    clearInterval(rssTimer);
    const s = worker.stats;
    if (s.reported !== lastReported) lastReportedMs = Date.now();
    const result: WorkerResult = {
      started: s.started,
      succeeded: s.succeeded,
      failed: s.failed,
      reported: s.reported,
      discarded: s.discarded,
      completionRequests: s.completionRequests,
      polls: s.polls,
      lagsMs,
      firstStartMs,
      lastStartMs,
      lastReportedMs,
      maxRssMiB: Math.max(maxRssKiB, rssKiB(process.pid) ?? 0) / 1024,
    };
    send({ type: 'result', result }, () => process.disconnect?.());
  });
});
// The harness going away (killed, timed out) must not leave this process polling.
process.on('disconnect', () => process.exit(0));

worker.start();
send({ type: 'ready', workerId: worker.workerId });
