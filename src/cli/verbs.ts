import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';

import { createClient, type ClientOptions, type WheelhouseClient } from '../client/index.js';
import type { Execution, NewDag, NewTask, Schedule, Task, TaskStatus } from '../client/types.js';
import type { ProgressSink } from './progress.js';
import { MAX_BATCH_TASKS, submitFile, summaryText } from './submit-file.js';
import { intFlag, nodeConnection, UsageError } from './usage.js';

/**
 * The verbs that talk to a running node through `wheelhouse/client`: submit, get, list,
 * history, cancel, retry, pause, resume, dag submit. `--url` (or WHEELHOUSE_URL, default
 * http://127.0.0.1:7070) and `--token` or `--token-file` (or WHEELHOUSE_API_KEY) pick the
 * node; `--json` prints what the API answered, for scripts; otherwise a table or a few lines
 * for people.
 */

export const CLIENT_VERBS = ['submit', 'get', 'list', 'history', 'cancel', 'retry', 'pause', 'resume', 'dag'] as const;
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
                    line); --ids prints {"line","taskId",…} per task created, as JSON lines
  wheelhouse get <task_id>
  wheelhouse list [--status <s>] [--type <task_type>] [--limit <n>]
  wheelhouse history <task_id>
  wheelhouse cancel <task_id>      (a cron schedule: deletes it)
  wheelhouse retry <task_id>       (a failed or cancelled task runs again)
  wheelhouse pause <task_id>       wheelhouse resume <task_id>
  wheelhouse dag submit <file.json> (a POST /api/dags body)
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
  const client = createClient(connection);
  const print = (value: unknown, human: () => string): void =>
    out(json ? `${JSON.stringify(value, null, 2)}\n` : human());
  const id = (): string => {
    const taskId = positionals[0];
    if (taskId === undefined) throw new UsageError(`wheelhouse ${verb} needs a task id`);
    return taskId;
  };
  switch (verb) {
    case 'submit': {
      const submitted = await client.submit(newTask(values));
      if (values.wait === true) {
        const task = await client.waitFor(submitted.taskId, ['succeeded', 'failed', 'cancelled'], {
          timeoutMs: 600_000,
        });
        print(task, () => taskLines(task));
      } else {
        print(submitted, () => `${submitted.taskId}  ${submitted.status}  due ${submitted.dueTime ?? '-'}\n`);
      }
      return 0;
    }
    case 'get': {
      const task = await client.get(id());
      print(task, () => taskLines(task));
      return 0;
    }
    case 'list': {
      const limit = values.limit === undefined ? 50 : intFlag(values.limit, '--limit', 1);
      const filter = {
        ...(values.status ? { status: values.status as TaskStatus } : {}),
        ...(values.type ? { taskType: values.type } : {}),
      };
      // A page can be short, even empty, and still have a next one (it stops at the node's
      // page bytes, and a filter walks a bounded stretch a page): go on until `limit` tasks.
      const tasks: Task[] = [];
      let nextToken: string | null = null;
      do {
        const next = await client.listPage({
          ...filter,
          limit: limit - tasks.length,
          ...(nextToken === null ? {} : { nextToken }),
        });
        tasks.push(...next.tasks);
        nextToken = next.nextToken;
      } while (nextToken !== null && tasks.length < limit);
      const page = { tasks, nextToken };
      print(page, () => table(['TASK ID', 'TYPE', 'STATUS', 'DUE', 'ATTEMPTS'], page.tasks.map(taskRow)));
      return 0;
    }
    case 'history': {
      const executions: Execution[] = [];
      for await (const e of client.history(id())) executions.push(e);
      print(executions, () =>
        table(
          ['ATTEMPT', 'STATUS', 'STARTED', 'COMPLETED', 'WORKER', 'ERROR'],
          executions.map((e) => [
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
      const result = await client.cancel(id());
      print(result, () => `cancelled (${result.cancelledInstances} instance(s))\n`);
      return 0;
    }
    case 'retry':
    case 'pause':
    case 'resume': {
      const task = await (verb === 'retry'
        ? client.retry(id())
        : verb === 'pause'
          ? client.pause(id())
          : client.resume(id()));
      print(task, () => taskLines(task));
      return 0;
    }
    case 'dag':
      await dagSubmit(client, positionals, print);
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
        url: { type: 'string' },
        token: { type: 'string' },
        'token-file': { type: 'string' },
        json: { type: 'boolean' },
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
  if (values.json === true) out(`${JSON.stringify(summary)}\n`);
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

async function dagSubmit(
  client: WheelhouseClient,
  positionals: string[],
  print: (value: unknown, human: () => string) => void,
): Promise<void> {
  const [sub, file] = positionals;
  if (sub !== 'submit' || file === undefined) throw new UsageError('usage: wheelhouse dag submit <file.json>');
  let body: { tasks?: unknown; idempotency_key?: unknown };
  try {
    body = JSON.parse(await readFile(file, 'utf8')) as typeof body;
  } catch (error) {
    throw new UsageError(`${file}: ${(error as Error).message}`);
  }
  if (!Array.isArray(body.tasks)) throw new UsageError(`${file}: needs "tasks", a list (the POST /api/dags body)`);
  const dag: NewDag = {
    tasks: (body.tasks as Record<string, unknown>[]).map((t) => ({
      ref: String(t.ref),
      taskType: String(t.task_type),
      ...(t.payload !== undefined ? { payload: t.payload } : {}),
      ...(Array.isArray(t.depends_on) ? { dependsOn: t.depends_on.map(String) } : {}),
      ...(typeof t.priority === 'number' ? { priority: t.priority } : {}),
      ...(typeof t.max_retries === 'number' ? { maxRetries: t.max_retries } : {}),
      ...(typeof t.timeout_seconds === 'number' ? { timeoutSeconds: t.timeout_seconds } : {}),
    })),
    ...(typeof body.idempotency_key === 'string' ? { idempotencyKey: body.idempotency_key } : {}),
  };
  const result = await client.submitDag(dag);
  print(
    result,
    () =>
      `dag ${result.dagId}\n${table(
        ['REF', 'TASK ID', 'STATUS'],
        result.tasks.map((t) => [t.ref, t.taskId, t.status]),
      )}`,
  );
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

/** Columns padded to their widest cell; an empty list says so. */
export function table(headers: string[], rows: string[][]): string {
  if (rows.length === 0) return '(none)\n';
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

function nonNegative(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`${flag} must be a number ≥ 0, got "${text}"`);
  return n;
}
