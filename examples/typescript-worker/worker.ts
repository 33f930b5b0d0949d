/**
 * A worker on the worker channel: one WebSocket to a node of the cluster (reconnecting to
 * the next node of --urls when it loses it), tasks of type `example.greet` pushed to it up to
 * the credit it grants, results sent back in batches. Run it as the README beside it says.
 *
 * In your own project the import is `import { createWorker } from 'wheelhouse/worker'`.
 */
import { parseArgs } from 'node:util';

import { createWorker, PermanentTaskError } from '../../src/worker/index.js';

const { values } = parseArgs({
  options: {
    urls: { type: 'string', default: process.env.WHEELHOUSE_URL ?? 'http://127.0.0.1:7070' },
    concurrency: { type: 'string', default: '20' },
    'worker-id': { type: 'string' },
  },
});

const worker = createWorker({
  urls: values.urls.split(',').map((u) => u.trim()),
  ...(values['worker-id'] !== undefined ? { workerId: values['worker-id'] } : {}),
  token: process.env.WHEELHOUSE_API_KEY,
  taskTypes: ['example.greet'],
  concurrency: Number(values.concurrency),
  handler: async ({ taskId, payload, attempt, signal }) => {
    const name = (payload as { name?: unknown } | null)?.name;
    if (typeof name !== 'string') throw new PermanentTaskError('payload.name must be a string');
    // Work that takes a moment, and stops early when the task is cancelled or the worker stops.
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 50);
      signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason as Error)), { once: true });
    });
    process.stdout.write(`greeted ${name} (task ${taskId}, attempt ${attempt})\n`);
    return { greeting: `Hello, ${name}!` }; // stored as the task's result
  },
  onError: (error, context) => process.stderr.write(`worker: ${context}: ${String(error)}\n`),
});

worker.start();
process.stdout.write(`worker ${worker.workerId} started on ${values.urls}\n`);

const stop = (): void => {
  process.stdout.write('stopping: running tasks get 10 s to finish\n');
  void worker.stop({ timeoutMs: 10_000 }).then(() => {
    const s = worker.stats;
    process.stdout.write(
      `stopped: ${s.succeeded} succeeded, ${s.failed} failed, ${s.reported} reported, ${s.polls} polls, ${s.resultFrames} result frames\n`,
    );
    process.exit(0);
  });
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
