import { ChannelWorker } from './channel-worker.js';
import { HttpWorker } from './http-worker.js';
import { compileWorkerOptions } from './options.js';
import type { Worker, WorkerOptions } from './types.js';

/**
 * Creates a worker that runs `taskTypes` tasks from the node at `url` (or the nodes of `urls`)
 * with `handler`: over a WebSocket channel by default (`channel-worker.ts`), or over the HTTP
 * worker endpoints with `transport: 'http'` (`http-worker.ts`). Nothing happens until `start()`.
 *
 * @example
 * ```ts
 * const worker = createWorker({
 *   url: 'http://127.0.0.1:7070',
 *   taskTypes: ['email.send'],
 *   concurrency: 20,
 *   handler: async ({ payload, signal }) => sendEmail(payload, { signal }),
 * });
 * worker.start();
 * process.on('SIGTERM', () => void worker.stop());
 * ```
 */
export function createWorker(options: WorkerOptions): Worker {
  const o = compileWorkerOptions(options);
  return o.transport === 'channel' ? new ChannelWorker(o) : new HttpWorker(o);
}
