import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';

import { createClient, type WheelhouseClient } from '../client/index.js';
import type { Execution, NewDag, NewTask, Schedule, Task, TaskStatus } from '../client/types.js';

/**
 * The verbs that talk to a running node through `wheelhouse/client`: submit, get, list,
 * history, cancel, pause, resume, dag submit. `--url` (or WHEELHOUSE_URL, default
 * http://127.0.0.1:7070) and `--token` (or WHEELHOUSE_AUTH_TOKEN) pick the node; `--json`
 * prints what the API answered, for scripts; otherwise a table or a few lines for people.
 */

export const CLIENT_VERBS = ['submit', 'get', 'list', 'history', 'cancel', 'pause', 'resume', 'dag'] as const;
export type ClientVerb = (typeof CLIENT_VERBS)[number];

export const CLIENT_HELP = `Talking to a node (--url, default $WHEELHOUSE_URL or http://127.0.0.1:7070;
--token, default $WHEELHOUSE_AUTH_TOKEN; --json for machine-readable output):
  wheelhouse submit --type <task_type> [--payload <json>] [--delay <s> | --at <iso> |
                    --cron <expr> [--timezone <tz>]] [--priority <0-9>] [--max-retries <n>]
                    [--idempotency-key <k>] [--wait]
  wheelhouse get <task_id>
  wheelhouse list [--status <s>] [--type <task_type>] [--limit <n>]
  wheelhouse history <task_id>
  wheelhouse cancel <task_id>      (a cron schedule: deletes it)
  wheelhouse pause <task_id>       wheelhouse resume <task_id>
  wheelhouse dag submit <file.json> (a POST /api/dags body)
`;

/** Something the user typed that cannot be run: printed with the usage, exit code 2. */
export class UsageError extends Error {}

export function isClientVerb(command: string): command is ClientVerb {
  return (CLIENT_VERBS as readonly string[]).includes(command);
}

/** Runs one verb; writes to `out`. Throws `UsageError` for bad arguments, client errors as they are. */
export async function runClientVerb(
  verb: ClientVerb,
  argv: string[],
  out: (text: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  const { values, positionals } = parse(argv);
  const client = createClient({
    url: values.url ?? env.WHEELHOUSE_URL ?? 'http://127.0.0.1:7070',
    ...((values.token ?? env.WHEELHOUSE_AUTH_TOKEN) ? { token: values.token ?? env.WHEELHOUSE_AUTH_TOKEN } : {}),
  });
  const json = values.json === true;
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
      return;
    }
    case 'get': {
      const task = await client.get(id());
      print(task, () => taskLines(task));
      return;
    }
    case 'list': {
      const limit = values.limit === undefined ? 50 : positiveInt(values.limit, '--limit');
      const page = await client.listPage({
        ...(values.status ? { status: values.status as TaskStatus } : {}),
        ...(values.type ? { taskType: values.type } : {}),
        limit,
      });
      print(page, () => table(['TASK ID', 'TYPE', 'STATUS', 'DUE', 'ATTEMPTS'], page.tasks.map(taskRow)));
      return;
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
      return;
    }
    case 'cancel': {
      const result = await client.cancel(id());
      print(result, () => `cancelled (${result.cancelledInstances} instance(s))\n`);
      return;
    }
    case 'pause':
    case 'resume': {
      const task = await (verb === 'pause' ? client.pause(id()) : client.resume(id()));
      print(task, () => taskLines(task));
      return;
    }
    case 'dag':
      return dagSubmit(client, positionals, print);
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
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

function newTask(values: Values): NewTask {
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

function positiveInt(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`${flag} must be a whole number ≥ 1, got "${text}"`);
  return n;
}
