/**
 * A benchmark worker process: runs no-op tasks with the SDK and records when each handler
 * started. Started by the harness with `fork` (IPC); reports progress while it runs and
 * everything it recorded when told to stop.
 */
import { createWorker, type Worker } from '../src/worker/index.js';
import type { BenchWorkerConfig, FromWorker, PerUrlStats, StartRecord, ToWorker, WorkerResult } from './protocol.js';
import { PROGRESS_EVERY_MS } from './protocol.js';
import { rssKiB } from './rss.js';
import { BENCH_ADMIN_TOKEN } from './auth.js';
import { sleep } from './time.js';

const config = JSON.parse(process.argv[2] ?? '{}') as BenchWorkerConfig;
const send = (message: FromWorker, then?: () => void): void => {
  process.send?.(message, undefined, {}, () => then?.());
};

const lagsMs: number[] = [];
/** With `streamLags`: lags not yet sent, and when their handlers started. */
const unsent = { startMs: [] as number[], lagMs: [] as number[] };
let firstStartMs = Number.NaN;
let lastStartMs = Number.NaN;
let errors = 0;
const starts: StartRecord | undefined = config.recordStarts
  ? { taskIds: [], startMs: [], attempts: [], via: [] }
  : undefined;

// One SDK worker per node URL (`urls`), or the one worker on `url` as before.
const urls = config.urls ?? [config.url];
const spread = config.urls !== undefined;
const workers: Worker[] = urls.map((url, via) =>
  createWorker({
    url,
    // Its own node first; over the channel, a worker whose node dies reconnects to the others.
    ...(spread ? { urls } : {}),
    ...(BENCH_ADMIN_TOKEN === undefined ? {} : { token: BENCH_ADMIN_TOKEN }),
    // BENCH_WORKER_TRANSPORT=http runs the SDK on the HTTP long-poll instead of the channel.
    ...(process.env.BENCH_WORKER_TRANSPORT === 'http' ? { transport: 'http' as const } : {}),
    ...(spread ? { workerId: `bench-${process.pid}-${via}` } : {}),
    taskTypes: [config.taskType],
    concurrency: spread ? Math.ceil(config.concurrency / urls.length) : config.concurrency,
    pollers: config.pollers,
    // The bench node runs with the default 30 s long-poll maximum; a shorter wait keeps stop() quick.
    pollWaitMs: 5_000,
    handler: async ({ taskId, attempt, payload }) => {
      const now = Date.now();
      if (Number.isNaN(firstStartMs)) firstStartMs = now;
      lastStartMs = now;
      const dueMs = (payload as { due_ms?: unknown } | null)?.due_ms;
      if (typeof dueMs === 'number' && config.streamLags) {
        unsent.startMs.push(now);
        unsent.lagMs.push(now - dueMs);
      } else if (typeof dueMs === 'number') lagsMs.push(now - dueMs);
      if (starts) {
        starts.taskIds.push(taskId);
        starts.startMs.push(now);
        starts.attempts.push(attempt);
        starts.via.push(via);
      }
      if (config.handlerSleepMs !== undefined) await sleep(config.handlerSleepMs);
    },
    onError: (error, context) => {
      if (errors++ < 20)
        process.stderr.write(`bench worker: ${context}: ${error instanceof Error ? error.message : String(error)}\n`);
    },
  }),
);
/** This process's counters, summed over its SDK workers. */
const totals = (): {
  started: number;
  succeeded: number;
  failed: number;
  reported: number;
  discarded: number;
  completionRequests: number;
  polls: number;
  resultFrames: number;
  reconnects: number;
} => {
  const sum = {
    started: 0,
    succeeded: 0,
    failed: 0,
    reported: 0,
    discarded: 0,
    completionRequests: 0,
    polls: 0,
    resultFrames: 0,
    reconnects: 0,
  };
  for (const w of workers) {
    const s = w.stats;
    sum.started += s.started;
    sum.succeeded += s.succeeded;
    sum.failed += s.failed;
    sum.reported += s.reported;
    sum.discarded += s.discarded;
    sum.completionRequests += s.completionRequests;
    sum.polls += s.polls;
    sum.resultFrames += s.resultFrames;
    sum.reconnects += s.reconnects;
  }
  return sum;
};

let maxRssKiB = 0;
let lastReported = 0;
let lastReportedMs = Number.NaN;
let lastStarted = 0;
const progress = setInterval(() => {
  const { started, reported } = totals();
  const now = Date.now();
  if (reported !== lastReported) lastReportedMs = now;
  if (unsent.lagMs.length > 0) {
    send({ type: 'progress', started, reported, atMs: now, lags: { startMs: unsent.startMs, lagMs: unsent.lagMs } });
    unsent.startMs = [];
    unsent.lagMs = [];
  } else if (started !== lastStarted || reported !== lastReported)
    send({ type: 'progress', started, reported, atMs: now });
  lastStarted = started;
  lastReported = reported;
}, PROGRESS_EVERY_MS);
const rssTimer = setInterval(() => {
  maxRssKiB = Math.max(maxRssKiB, rssKiB(process.pid) ?? 0);
}, 250);

process.on('message', (message: ToWorker) => {
  if (message.type !== 'stop') return;
  void Promise.all(workers.map((w) => w.stop())).then(() => {
    clearInterval(progress);
    clearInterval(rssTimer);
    const s = totals();
    if (s.reported !== lastReported) lastReportedMs = Date.now();
    const result: WorkerResult = {
      started: s.started,
      succeeded: s.succeeded,
      failed: s.failed,
      reported: s.reported,
      discarded: s.discarded,
      completionRequests: s.completionRequests,
      polls: s.polls,
      resultFrames: s.resultFrames,
      reconnects: s.reconnects,
      lagsMs,
      firstStartMs,
      lastStartMs,
      lastReportedMs,
      maxRssMiB: Math.max(maxRssKiB, rssKiB(process.pid) ?? 0) / 1024,
      ...(starts ? { starts } : {}),
      ...(spread ? { perUrl: workers.map((w, i) => perUrl(w, urls[i] as string)) } : {}),
    };
    send({ type: 'result', result }, () => process.disconnect?.());
  });
});
// The harness going away (killed, timed out) must not leave this process polling.
process.on('disconnect', () => process.exit(0));

for (const w of workers) w.start();
send({ type: 'ready', workerId: workers.map((w) => w.workerId).join(',') });

function perUrl(w: Worker, url: string): PerUrlStats {
  const s = w.stats;
  return {
    url,
    workerId: w.workerId,
    started: s.started,
    reported: s.reported,
    discarded: s.discarded,
    polls: s.polls,
    completionRequests: s.completionRequests,
  };
}
