import { parseArgs } from 'node:util';

import { createClient, type ClientOptions } from '../client/index.js';
import { Transport } from '../client/http.js';
import type { NewTask, Schedule, Task } from '../client/types.js';
import {
  cancelFromWire,
  executionFromWire,
  itemsOf,
  nextTokenFromWire,
  submittedFromWire,
  taskFromWire,
  taskToWire,
} from '../client/wire.js';
import { dagVerb, explainVerb } from './inspect.js';
import { runOperationVerb } from './operations.js';
import type { ProgressSink } from './progress.js';
import { MAX_BATCH_TASKS, submitFile, summaryJson, summaryText } from './submit-file.js';
import { table } from './table.js';
import { CONNECTION_OPTIONS, intFlag, nodeConnection, UsageError } from './usage.js';

/**
 * The verbs that talk to a running node through `wheelhouse/client`: submit, get, list,
 * history, cancel, retry, pause, resume, dag submit|get, explain. `--url` (or WHEELHOUSE_URL, default
 * http://127.0.0.1:7070) and `--token` or `--token-file` (or WHEELHOUSE_API_KEY) pick the
 * node; `--json` prints what the API answered, for scripts; otherwise a table or a few lines
 * for people.
 */

export const CLIENT_VERBS = [
  'submit',
  'get',
  'list',
  'history',
  'cancel',
  'retry',
  'delete',
  'pause',
  'resume',
  'dag',
  'explain',
] as const;
export type ClientVerb = (typeof CLIENT_VERBS)[number];

export const CLIENT_HELP = `Talking to a node (--url, default $WHEELHOUSE_URL or http://127.0.0.1:7070;
--token or --token-file <path>, default $WHEELHOUSE_API_KEY; --json for machine-readable output):
  wheelhouse submit --type <task_type> [--payload <json>] [--delay <s> | --at <iso> |
                    --cron <expr> [--timezone <tz>]] [--priority <0-9>] [--max-retries <n>]
                    [--idempotency-key <k>] [--wait]
  wheelhouse submit --file <tasks.ndjson | -> [--ids] [--batch-size <n>] [--concurrency <n>]
                    one POST /api/tasks body per line (- reads stdin), sent in batches of
                    up to 1000, 4 in flight; progress on stderr, then a summary. A line that
                    is not a task stops the run before its batch is sent (exit 1, naming the
                    line); --ids prints {"line","task_id",…} per task created, as JSON lines
  wheelhouse get <task_id>
  wheelhouse list [--status <s>] [--type <task_type>] [--limit <n>]
  wheelhouse history <task_id>
  wheelhouse cancel <task_id>      (a cron schedule: deletes it)
  wheelhouse retry <task_id>       (a failed or cancelled task runs again)
  wheelhouse cancel|retry|delete --filter <name=value,…> [--detach]
                    acts on every task the filter matches (POST /api/operations): names
                    status, task_type, created_after, created_before, due_after, due_before,
                    limit, error_contains, error_equals, parent_id; progress on stderr until
                    it ends, then a summary
                    (exit 1 if it was cancelled or failed); --detach prints its id and returns.
                    delete removes finished tasks and needs an admin key
  wheelhouse pause <task_id>       wheelhouse resume <task_id>
  wheelhouse dag submit <file.json> (a POST /api/dags body)
  wheelhouse dag get <dag_id>      each task's status and depends_on; the graph's status
  wheelhouse explain <task_id>     why the task is where it is: a sentence, then the facts
`;

export function isClientVerb(command: string): command is ClientVerb {
  return (CLIENT_VERBS as readonly string[]).includes(command);
}

/** Where a verb reads and writes besides its output: progress and notes (stderr), and stdin for `--file -`. */
export interface VerbStreams {
  stderr: ProgressSink;
  stdin: AsyncIterable<Buffer | string>;
}

/**
 * Runs one verb; writes its output to `out` and resolves with the exit code (1 when
 * `submit --file` did not submit every line). Throws `UsageError` for bad arguments, client
 * errors as they are.
 */
export async function runClientVerb(
  verb: ClientVerb,
  argv: string[],
  out: (text: string) => void,
  env: NodeJS.ProcessEnv = process.env,
  streams: VerbStreams = { stderr: process.stderr, stdin: process.stdin },
): Promise<number> {
  const { values, positionals } = parse(argv);
  const json = values.json === true;
  const connection = nodeConnection(values, env, (text) => streams.stderr.write(text));
  if (verb === 'submit' && values.file !== undefined) return submitFromFile(values, connection, out, streams);
  if (values.filter !== undefined || verb === 'delete') {
    if (verb !== 'cancel' && verb !== 'retry' && verb !== 'delete')
      throw new UsageError(`--filter goes with cancel, retry and delete, not ${verb}`);
    if (values.filter === undefined) throw new UsageError('wheelhouse delete needs --filter <name=value,…>');
    if (positionals.length > 0) throw new UsageError(`wheelhouse ${verb} takes a task id or --filter, not both`);
    const options = { json, detach: values.detach === true };
    return runOperationVerb(verb, values.filter, options, connection, out, streams.stderr);
  }
  // The answers are printed as the node wrote them (--json: the API's own field names, so a
  // script reads the CLI and the API alike); the client reads them only for the lines for people.
  const http = new Transport(connection);
  const print = (body: unknown, human: () => string): void =>
    out(json ? `${JSON.stringify(body, null, 2)}\n` : human());
  const taskPath = (tail = ''): string => {
    const taskId = positionals[0];
    if (taskId === undefined) throw new UsageError(`wheelhouse ${verb} needs a task id`);
    return `/api/tasks/${encodeURIComponent(taskId)}${tail}`;
  };
  const get = async (path: string): Promise<unknown> =>
    (await http.send({ method: 'GET', path, idempotent: true })).body;
  switch (verb) {
    case 'submit': {
      const task = newTask(values);
      const answer = await http.send({
        method: 'POST',
        path: '/api/tasks',
        body: taskToWire(task),
        idempotent: task.idempotencyKey !== undefined,
      });
      const submitted = submittedFromWire(answer.body);
      if (values.wait === true) {
        await createClient(connection).waitFor(submitted.taskId, ['succeeded', 'failed', 'cancelled', 'expired'], {
          timeoutMs: 600_000,
        });
        const body = await get(`/api/tasks/${encodeURIComponent(submitted.taskId)}`);
        print(body, () => taskLines(taskFromWire(body)));
      } else {
        print(answer.body, () => `${submitted.taskId}  ${submitted.status}  due ${submitted.dueTime ?? '-'}\n`);
      }
      return 0;
    }
    case 'get': {
      const body = await get(taskPath());
      print(body, () => taskLines(taskFromWire(body)));
      return 0;
    }
    case 'list': {
      const limit = values.limit === undefined ? 50 : intFlag(values.limit, '--limit', 1);
      // A page can be short, even empty, and still have a next one (it stops at the node's
      // page bytes, and a filter walks a bounded stretch a page): go on until `limit` tasks.
      const tasks: unknown[] = [];
      let nextToken: string | null = null;
      do {
        const query = {
          status: values.status,
          task_type: values.type,
          limit: limit - tasks.length,
          next_token: nextToken,
        };
        const { body } = await http.send({ method: 'GET', path: '/api/tasks', query, idempotent: true });
        tasks.push(...itemsOf((body as { tasks?: unknown }).tasks));
        nextToken = nextTokenFromWire(body);
      } while (nextToken !== null && tasks.length < limit);
      print({ tasks, next_token: nextToken }, () =>
        table(['TASK ID', 'TYPE', 'STATUS', 'DUE', 'ATTEMPTS'], tasks.map(taskFromWire).map(taskRow)),
      );
      return 0;
    }
    case 'history': {
      const executions: unknown[] = [];
      let nextToken: string | null = null;
      do {
        const query = { next_token: nextToken };
        const { body } = await http.send({ method: 'GET', path: taskPath('/history'), query, idempotent: true });
        executions.push(...itemsOf((body as { executions?: unknown }).executions));
        nextToken = nextTokenFromWire(body);
      } while (nextToken !== null);
      print({ executions, next_token: null }, () =>
        table(
          ['ATTEMPT', 'STATUS', 'STARTED', 'COMPLETED', 'WORKER', 'ERROR'],
          executions
            .map(executionFromWire)
            .map((e) => [
              String(e.attempt),
              e.status,
              e.startedAt ?? '-',
              e.completedAt ?? '-',
              e.workerId ?? '-',
              e.error ?? '',
            ]),
        ),
      );
      return 0;
    }
    case 'cancel': {
      const { body } = await http.send({ method: 'DELETE', path: taskPath(), idempotent: false });
      print(body, () => `cancelled (${cancelFromWire(body).cancelledInstances} instance(s))\n`);
      return 0;
    }
    case 'retry':
    case 'pause':
    case 'resume': {
      const { body } = await http.send({ method: 'POST', path: taskPath(`/${verb}`), idempotent: false });
      print(body, () => taskLines(taskFromWire(body)));
      return 0;
    }
    case 'dag':
      await dagVerb(http, positionals, print);
      return 0;
    case 'explain':
      await explainVerb(http, positionals, print);
      return 0;
  }
}

type Values = ReturnType<typeof parse>['values'];

function parse(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        ...CONNECTION_OPTIONS,
        type: { type: 'string' },
        payload: { type: 'string' },
        delay: { type: 'string' },
        at: { type: 'string' },
        cron: { type: 'string' },
        timezone: { type: 'string' },
        priority: { type: 'string' },
        'max-retries': { type: 'string' },
        'idempotency-key': { type: 'string' },
        wait: { type: 'boolean' },
        status: { type: 'string' },
        limit: { type: 'string' },
        file: { type: 'string' },
        ids: { type: 'boolean' },
        'batch-size': { type: 'string' },
        concurrency: { type: 'string' },
        filter: { type: 'string', multiple: true },
        detach: { type: 'boolean' },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/**
 * `submit --file`: the summary goes to stdout (one JSON line with `--json`), unless `--ids`
 * fills stdout with JSON lines and there is no `--json`: then the summary for people goes to
 * stderr, so stdout stays JSON lines.
 */
async function submitFromFile(
  values: Values,
  connection: ClientOptions,
  out: (text: string) => void,
  streams: VerbStreams,
): Promise<number> {
  const taskFlags = [
    'type',
    'payload',
    'delay',
    'at',
    'cron',
    'timezone',
    'priority',
    'max-retries',
    'idempotency-key',
    'wait',
  ] as const;
  const mixed = taskFlags.filter((flag) => values[flag] !== undefined);
  if (mixed.length > 0) {
    throw new UsageError(`--file takes each task from its line: drop ${mixed.map((f) => `--${f}`).join(', ')}`);
  }
  const summary = await submitFile(
    connection,
    {
      file: values.file as string,
      batchSize:
        values['batch-size'] === undefined
          ? MAX_BATCH_TASKS
          : intFlag(values['batch-size'], '--batch-size', 1, MAX_BATCH_TASKS),
      concurrency: values.concurrency === undefined ? 4 : intFlag(values.concurrency, '--concurrency', 1, 64),
      ids: values.ids === true,
    },
    { out, stderr: streams.stderr, stdin: streams.stdin },
  );
  if (values.json === true) out(`${JSON.stringify(summaryJson(summary))}\n`);
  else if (values.ids === true) streams.stderr.write(summaryText(summary));
  else out(summaryText(summary));
  return summary.failures.length > 0 ? 1 : 0;
}

function newTask(values: Values): NewTask {
  const fileFlags = (['ids', 'batch-size', 'concurrency'] as const).filter((flag) => values[flag] !== undefined);
  if (fileFlags.length > 0) throw new UsageError(`${fileFlags.map((f) => `--${f}`).join(', ')} go with --file`);
  if (values.type === undefined) throw new UsageError('wheelhouse submit needs --type <task_type>');
  const schedules = [values.delay, values.at, values.cron].filter((v) => v !== undefined);
  if (schedules.length > 1) throw new UsageError('give at most one of --delay, --at and --cron');
  let schedule: Schedule | undefined;
  if (values.delay !== undefined) schedule = { type: 'delayed', delaySeconds: nonNegative(values.delay, '--delay') };
  else if (values.at !== undefined) schedule = { type: 'delayed', dueTime: values.at };
  else if (values.cron !== undefined) {
    schedule = { type: 'cron', cronExpression: values.cron, ...(values.timezone ? { timezone: values.timezone } : {}) };
  }
  let payload: unknown;
  if (values.payload !== undefined) {
    try {
      payload = JSON.parse(values.payload);
    } catch (error) {
      throw new UsageError(`--payload is not JSON: ${(error as Error).message}`);
    }
  }
  return {
    taskType: values.type,
    ...(payload !== undefined ? { payload } : {}),
    ...(schedule ? { schedule } : {}),
    ...(values.priority !== undefined ? { priority: nonNegative(values.priority, '--priority') } : {}),
    ...(values['max-retries'] !== undefined ? { maxRetries: nonNegative(values['max-retries'], '--max-retries') } : {}),
    ...(values['idempotency-key'] !== undefined ? { idempotencyKey: values['idempotency-key'] } : {}),
  };
}

function taskRow(t: Task): string[] {
  return [t.taskId, t.taskType, t.status, t.dueTime ?? '-', String(t.attempts)];
}

function taskLines(t: Task): string {
  const lines: [string, string][] = [
    ['task', t.taskId],
    ['type', t.taskType],
    ['status', t.status],
    ['schedule', t.cronExpression ? `cron ${t.cronExpression} (${t.timezone ?? 'UTC'})` : t.scheduleType],
    ['due', t.nextDueTime ?? t.dueTime ?? '-'],
    ['attempts', `${t.attempts} of ${t.maxRetries + 1}`],
  ];
  if (t.startedAt) lines.push(['started', t.startedAt]);
  if (t.completedAt) lines.push(['completed', t.completedAt]);
  if (t.lastError) lines.push(['last error', t.lastError]);
  return lines.map(([k, v]) => `${k.padEnd(11)}${v}\n`).join('');
}

function nonNegative(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`${flag} must be a number ≥ 0, got "${text}"`);
  return n;
}
