/**
 * A small worker process: runs every task of the given types by logging it, and succeeds.
 *
 *   npm start                                   # a node on 127.0.0.1:7070
 *   node dist/examples/worker.js --url http://127.0.0.1:7070 --types email.send
 *   curl -s localhost:7070/api/tasks -H 'content-type: application/json' \
 *     -d '{"task_type":"email.send","payload":{"to":"a@example.com"}}'
 *
 * Flags: --url (default http://127.0.0.1:7070), --types (comma-separated, required),
 * --concurrency (default 10), --token (an API key with the work scope, or WHEELHOUSE_API_KEY).
 * Ctrl-C stops it gracefully: running tasks finish and are reported first.
 */
import { parseArgs } from 'node:util';
import { createWorker } from '../src/worker/index.js';

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:7070' },
    types: { type: 'string' },
    concurrency: { type: 'string', default: '10' },
    token: { type: 'string' },
  },
});

if (values.types === undefined || values.types.trim() === '') {
  process.stderr.write(
    'usage: node dist/examples/worker.js --url http://127.0.0.1:7070 --types email.send[,other.type]\n',
  );
  process.exit(2);
}

const worker = createWorker({
  url: values.url,
  taskTypes: values.types
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t.length > 0),
  concurrency: Number(values.concurrency),
  token: values.token ?? process.env.WHEELHOUSE_API_KEY,
  handler: async (task) => {
    const at = new Date().toISOString();
    process.stdout.write(
      `${at} ran ${task.taskType} ${task.taskId} (attempt ${task.attempt}) payload=${JSON.stringify(task.payload)}\n`,
    );
  },
});

worker.start();
process.stdout.write(`worker ${worker.workerId} polling ${values.url} for ${values.types}\n`);

let stopping = false;
const stop = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  process.stdout.write(`${signal}: finishing running tasks…\n`);
  worker.stop().then(
    () => {
      const s = worker.stats;
      process.stdout.write(`stopped: ${s.succeeded} succeeded, ${s.failed} failed, ${s.reported} reported\n`);
      process.exit(0);
    },
    (error: unknown) => {
      process.stderr.write(`stop failed: ${String(error)}\n`);
      process.exit(1);
    },
  );
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
