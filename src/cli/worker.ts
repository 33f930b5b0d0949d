import { constants } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

import {
  createWorker,
  LeaseLostError,
  TaskTimeoutError,
  WorkerStoppedError,
  type TaskContext,
  type Worker,
  type WorkerStats,
  type WorkerTransport,
} from '../worker/index.js';
import { loadHandlers, type ModuleHandler } from './handler-module.js';
import { CONNECTION_OPTIONS, intFlag, nodeConnection, UsageError } from './usage.js';
import { startTracing, stopTracing } from '../lib/otel.js';
import { WORKER_HELP } from './worker-help.js';

/**
 * `wheelhouse worker --handler ./tasks.js`: the worker SDK (`createWorker`) in a process of
 * its own, running the handlers a module exports (`handler-module.ts` says its shape), over the
 * worker channel (or HTTP long-poll with `--transport http`; `--url` may list several nodes,
 * comma-separated, for the channel to reconnect to). One line per task outcome on stderr —
 * for people, or JSON lines with `--json` — and a graceful stop on SIGINT or SIGTERM: no new
 * tasks, the running ones finish (within `--stop-grace` seconds when given) and their results
 * are reported (the SDK's `stop`). A second signal exits at once; the tasks still running are
 * handed to another worker when their leases run out.
 */

/** Where the worker's log lines go: stderr. */
export type LogSink = (text: string) => void;

/** Starts the worker; resolves with the exit code once a signal has stopped it. */
export async function runWorkerVerb(
  argv: string[],
  log: LogSink,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const values = parse(argv);
  if (values.handler === undefined)
    throw new UsageError('wheelhouse worker needs --handler <module>', { usage: WORKER_HELP });
  const handlers = await loadHandlers(values.handler);
  const taskTypes = selectTypes(handlers, values.types, values.handler);
  const concurrency = values.concurrency === undefined ? undefined : intFlag(values.concurrency, '--concurrency', 1);
  const { url, token } = nodeConnection(values, env, log);
  const urls = url
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u.length > 0);
  const transport = transportFlag(values.transport);
  const stopGraceMs =
    values['stop-grace'] === undefined ? undefined : intFlag(values['stop-grace'], '--stop-grace', 0, 86_400) * 1000;
  const write = values.json === true ? jsonLine(log) : humanLine(log);

  let worker: Worker;
  try {
    worker = createWorker({
      urls,
      transport,
      ...(token !== undefined ? { token } : {}),
      ...(values['worker-id'] !== undefined ? { workerId: values['worker-id'] } : {}),
      ...(concurrency !== undefined ? { concurrency } : {}),
      taskTypes,
      handler: (task) => runHandler(handlers, task, write),
      onError: (error, context) => write({ event: 'error', context, message: messageOf(error) }),
    });
  } catch (error) {
    // createWorker's option checks (a worker id too long, a URL that is not one).
    if (error instanceof TypeError) throw new UsageError(error.message, { usage: WORKER_HELP, cause: error });
    throw error;
  }
  // With an OTLP endpoint in the environment the worker's spans are exported (docs/metrics.md, Tracing).
  const tracing = await startTracing(env);
  worker.start();
  write({
    event: 'started',
    workerId: worker.workerId,
    url: urls.join(','),
    transport,
    taskTypes,
    concurrency: concurrency ?? null,
    handler: values.handler,
  });
  return new Promise((resolveExit) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (stopping) {
        write({ event: 'stopping', signal, running: worker.stats.running, now: true });
        process.exit(128 + (constants.signals[signal] ?? 0));
      }
      stopping = true;
      write({ event: 'stopping', signal, running: worker.stats.running, now: false });
      worker
        .stop({ timeoutMs: stopGraceMs })
        .then(() => (tracing ? stopTracing() : undefined))
        .then(
          () => {
            write({ event: 'stopped', ...worker.stats });
            resolveExit(0);
          },
          (error: unknown) => {
            write({ event: 'error', context: 'stop', message: messageOf(error) });
            resolveExit(1);
          },
        );
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

function parse(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      options: {
        handler: { type: 'string' },
        types: { type: 'string' },
        concurrency: { type: 'string' },
        'worker-id': { type: 'string' },
        ...CONNECTION_OPTIONS,
        transport: { type: 'string' },
        'stop-grace': { type: 'string' },
      },
    }).values;
  } catch (error) {
    throw new UsageError((error as Error).message, { usage: WORKER_HELP, cause: error });
  }
}

function transportFlag(value: string | undefined): WorkerTransport {
  if (value === undefined || value === 'channel' || value === 'http') return value ?? 'channel';
  throw new UsageError(`--transport must be channel or http, got "${value}"`, { usage: WORKER_HELP });
}

/** The module's task types, or those of `--types` (each must have a handler). */
function selectTypes(handlers: ReadonlyMap<string, ModuleHandler>, types: string | undefined, file: string): string[] {
  if (types === undefined) return [...handlers.keys()];
  const wanted = [
    ...new Set(
      types
        .split(',')
        .map((t) => t.trim())
        .filter((t) => t.length > 0),
    ),
  ];
  if (wanted.length === 0) throw new UsageError('--types names no task type', { usage: WORKER_HELP });
  const missing = wanted.filter((t) => !handlers.has(t));
  if (missing.length > 0) {
    throw new UsageError(
      `--handler ${file} has no handler for ${missing.map((t) => `"${t}"`).join(', ')} (it has ${[...handlers.keys()].join(', ')})`,
      { usage: null },
    );
  }
  return wanted;
}

/**
 * Runs the module's handler for one task and logs how it went; what it resolves with is the
 * task's result (the SDK stores it), a failure is rethrown for the SDK to report.
 */
async function runHandler(
  handlers: ReadonlyMap<string, ModuleHandler>,
  task: TaskContext,
  write: (event: LogEvent) => void,
): Promise<unknown> {
  const handler = handlers.get(task.taskType);
  const startedMs = performance.now();
  const done = (fields: Partial<TaskEvent>): void =>
    write({
      event: 'task',
      outcome: 'succeeded',
      taskType: task.taskType,
      taskId: task.taskId,
      attempt: task.attempt,
      durationMs: Math.round(performance.now() - startedMs),
      ...(task.signal.aborted ? { aborted: abortReason(task.signal) } : {}),
      ...fields,
    });
  try {
    if (handler === undefined) throw new Error(`no handler for ${task.taskType}`);
    const result = await handler(task.payload, task);
    done(result === undefined ? {} : { result });
    return result;
  } catch (error) {
    const permanent = (error as { retryable?: unknown } | null)?.retryable === false;
    done({ outcome: 'failed', error: messageOf(error), ...(permanent ? { retryable: false } : {}) });
    throw error;
  }
}

interface TaskEvent {
  event: 'task';
  outcome: 'succeeded' | 'failed';
  taskType: string;
  taskId: string;
  attempt: number;
  durationMs: number;
  result?: unknown;
  error?: string;
  retryable?: false;
  /** The task was taken away while it ran: its result is not recorded. */
  aborted?: 'lease lost' | 'cancelled' | 'timed out' | 'stopped';
}

type LogEvent =
  | TaskEvent
  | {
      event: 'started';
      workerId: string;
      url: string;
      transport: WorkerTransport;
      taskTypes: string[];
      concurrency: number | null;
      handler: string;
    }
  | { event: 'stopping'; signal: string; running: number; now: boolean }
  | ({ event: 'stopped' } & WorkerStats)
  | { event: 'error'; context: string; message: string };

/** Most characters of a result in a log line. */
const MAX_RESULT_CHARS = 200;
/** Most characters of a result kept as JSON in a JSON log line; a longer one is cut as text. */
const MAX_JSON_RESULT_CHARS = 4096;

/**
 * One JSON line per event, its fields in snake_case as the API writes its own (`task_id`,
 * `worker_id`, `duration_ms`), so a script reads the worker's log and the API alike. The
 * result is the handler's own value, left as it is.
 */
function jsonLine(log: LogSink): (event: LogEvent) => void {
  return (event) => {
    const line: Record<string, unknown> = { time: new Date().toISOString() };
    for (const [key, value] of Object.entries(event)) line[key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = value;
    if ('result' in event) {
      const json = resultJson(event.result);
      line.result = json !== undefined && json.length <= MAX_JSON_RESULT_CHARS ? event.result : preview(event.result);
    }
    log(`${JSON.stringify(line)}\n`);
  };
}

function humanLine(log: LogSink): (event: LogEvent) => void {
  return (event) => {
    const time = new Date().toISOString();
    switch (event.event) {
      case 'task': {
        const head = `${time} ${event.outcome === 'succeeded' ? 'ok    ' : 'failed'} ${event.taskType} ${event.taskId}`;
        let tail = ` attempt ${event.attempt} in ${event.durationMs} ms`;
        if (event.error !== undefined) tail += `: ${event.error}${event.retryable === false ? ' (permanent)' : ''}`;
        if (event.result !== undefined) tail += ` → ${preview(event.result)}`;
        if (event.aborted !== undefined) tail += ` [${event.aborted}: result not recorded]`;
        return log(`${head}${tail}\n`);
      }
      case 'started':
        return log(
          `wheelhouse worker: ${event.workerId} taking ${event.taskTypes.join(', ')} from ${event.url} ` +
            `over ${event.transport === 'channel' ? 'the worker channel' : 'HTTP long-poll'} ` +
            `(handlers from ${event.handler}${event.concurrency === null ? '' : `, concurrency ${event.concurrency}`})\n`,
        );
      case 'stopping':
        return log(
          event.now
            ? `wheelhouse worker: ${event.signal} again, exiting now; ${event.running} running task(s) go back to the queue when their leases run out\n`
            : `wheelhouse worker: ${event.signal}, finishing ${event.running} running task(s) (again to exit now)\n`,
        );
      case 'stopped':
        return log(
          `wheelhouse worker: stopped; ${event.succeeded} succeeded, ${event.failed} failed, ${event.reported} reported\n`,
        );
      case 'error':
        return log(`wheelhouse worker: ${event.context}: ${event.message}\n`);
    }
  };
}

function resultJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch {
    return undefined; // a cycle, a BigInt: shown as text instead
  }
}

function preview(value: unknown): string {
  const text = resultJson(value) ?? String(value);
  return text.length > MAX_RESULT_CHARS ? `${text.slice(0, MAX_RESULT_CHARS)}…` : text;
}

function abortReason(signal: AbortSignal): 'lease lost' | 'cancelled' | 'timed out' | 'stopped' {
  if (signal.reason instanceof LeaseLostError) return 'lease lost';
  if (signal.reason instanceof TaskTimeoutError) return 'timed out';
  if (signal.reason instanceof WorkerStoppedError) return 'stopped';
  return 'cancelled';
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message || error.name : String(error);
}
