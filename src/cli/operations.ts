import { createClient, type ClientOptions } from '../client/index.js';
import type { Operation, OperationAction, OperationFilter } from '../client/operations.js';
import { count, perSecond, type ProgressSink } from './progress.js';
import { UsageError } from './usage.js';

/**
 * `wheelhouse cancel|retry|delete --filter status=failed,task_type=email.send`: starts an
 * operation on every task the filter matches (POST /api/operations) and shows its progress on
 * stderr until it ends — one line redrawn on a terminal, a line every few seconds otherwise —
 * then a summary on stdout (`--json`: the operation as the API answers it). `--detach` prints
 * the operation and returns at once. Exit 0 when it is done, 1 when it was cancelled or failed.
 */

/** The filter's fields, as `--filter` names them (the API's names; `type` for `task_type`). */
const FIELDS: Record<string, keyof OperationFilter> = {
  status: 'status',
  task_type: 'taskType',
  type: 'taskType',
  created_after: 'createdAfter',
  created_before: 'createdBefore',
  due_after: 'dueAfter',
  due_before: 'dueBefore',
  limit: 'limit',
  error_contains: 'errorContains',
  error_equals: 'errorEquals',
  parent_id: 'parentId',
};

/** A comma starts a new field only where a known name and `=` follow: an error text may hold commas. */
const FIELD_START = new RegExp(`,(?=(?:${Object.keys(FIELDS).join('|')})=)`);

/** `--filter` values (the flag may be given more than once) → the client's filter. */
export function parseFilter(values: readonly string[]): OperationFilter {
  const filter: OperationFilter = {};
  for (const part of values.flatMap((v) => v.split(FIELD_START))) {
    const eq = part.indexOf('=');
    const name = eq < 0 ? part : part.slice(0, eq);
    const field = FIELDS[name.trim()];
    if (field === undefined || eq < 0) {
      throw new UsageError(
        `--filter takes name=value pairs separated by commas, names among ${Object.keys(FIELDS).join(', ')}; got "${part}"`,
      );
    }
    filter[field] = part.slice(eq + 1);
  }
  if (Object.keys(filter).length === 0) throw new UsageError('--filter names no field');
  return filter;
}

/** How often the progress is read, ms (a terminal's line is redrawn as often). */
const READ_EVERY_MS = 500;
/** How often a plain progress line is written when stderr is not a terminal, ms. */
const PLAIN_EVERY_MS = 5_000;

export async function runOperationVerb(
  action: OperationAction,
  filterValues: readonly string[],
  options: { json: boolean; detach: boolean },
  connection: ClientOptions,
  out: (text: string) => void,
  stderr: ProgressSink,
): Promise<number> {
  const filter = parseFilter(filterValues);
  // The node answers a filter it cannot run (a status the action does not take, a bad time or id) with a 400.
  const client = createClient(connection);
  const started = await client.operations.start(action, filter);
  if (options.detach) {
    out(options.json ? `${JSON.stringify(started, null, 2)}\n` : `${started.operationId}  ${started.state}\n`);
    return 0;
  }
  const startedMs = Date.now();
  let lastPlainMs = startedMs;
  let drawn = false;
  const final = await client.operations.wait(started.operationId, {
    pollMs: READ_EVERY_MS,
    onProgress: (op) => {
      if (op.state !== 'running') return;
      const line = progressLine(op, Date.now() - startedMs);
      if (stderr.isTTY === true) {
        stderr.write(`\r\x1b[2K${line}`);
        drawn = true;
      } else if (Date.now() - lastPlainMs >= PLAIN_EVERY_MS) {
        stderr.write(`wheelhouse ${action}: ${line}\n`);
        lastPlainMs = Date.now();
      }
    },
  });
  if (drawn) stderr.write('\r\x1b[2K');
  out(options.json ? `${JSON.stringify(final, null, 2)}\n` : summary(final, Date.now() - startedMs));
  return final.state === 'done' ? 0 : 1;
}

/** `operation 0192… retry running · 12,000 matched · 11,500 done · 0 failed · 2,300 tasks/s`. */
export function progressLine(op: Operation, elapsedMs: number): string {
  return [
    `operation ${op.operationId} ${op.action} ${op.state}`,
    `${count(op.matched)} matched`,
    `${count(op.done)} done`,
    `${count(op.failed)} failed`,
    `${count(perSecond(op.done + op.failed, elapsedMs))} tasks/s`,
  ].join(' · ');
}

function summary(op: Operation, elapsedMs: number): string {
  const lines = [
    `operation ${op.operationId} ${op.action}: ${op.state} in ${(elapsedMs / 1000).toFixed(1)} s`,
    `matched ${count(op.matched)} · done ${count(op.done)} · failed ${count(op.failed)}`,
  ];
  if (op.error !== null) lines.push(`error: ${op.error}`);
  return lines.join('\n') + '\n';
}
