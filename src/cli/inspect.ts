import { readFile } from 'node:fs/promises';

import type { Transport } from '../client/http.js';
import { explanationFromWire, type Explanation } from '../client/explain.js';
import { dagFromWire, dagSubmitFromWire } from '../client/wire.js';
import { table } from './table.js';
import { UsageError } from './usage.js';

/**
 * The verbs that look into the scheduler rather than act on it: `explain <task_id>` (why a
 * task is where it is) and `dag submit <file>` / `dag get <dag_id>`. `print` writes the API's
 * answer as it is with `--json`, else the lines for people.
 */
export type Print = (body: unknown, human: () => string) => void;

/** `explain <task_id>`: `GET /api/tasks/{id}/explain`, its sentence and the facts under it. */
export async function explainVerb(http: Transport, positionals: string[], print: Print): Promise<void> {
  const [taskId, extra] = positionals;
  if (taskId === undefined || extra !== undefined) throw new UsageError('usage: wheelhouse explain <task_id>');
  const { body } = await http.send({
    method: 'GET',
    path: `/api/tasks/${encodeURIComponent(taskId)}/explain`,
    idempotent: true,
  });
  print(body, () => explanationLines(explanationFromWire(body)));
}

/** `dag submit <file.json>` (a `POST /api/dags` body, sent as it is) or `dag get <dag_id>`. */
export async function dagVerb(http: Transport, positionals: string[], print: Print): Promise<void> {
  const [sub, arg, extra] = positionals;
  if (sub === 'get' && arg !== undefined && extra === undefined) {
    const { body } = await http.send({ method: 'GET', path: `/api/dags/${encodeURIComponent(arg)}`, idempotent: true });
    const dag = dagFromWire(body);
    const counts = Object.entries(dag.counts)
      .map(([status, n]) => `${status} ${String(n)}`)
      .join(', ');
    print(
      body,
      () =>
        `dag ${dag.dagId}  ${dag.status}  (${counts})\n${table(
          ['REF', 'TASK ID', 'TYPE', 'STATUS', 'DEPENDS ON', 'ATTEMPTS'],
          dag.tasks.map((t) => [
            t.ref,
            t.taskId,
            t.taskType,
            t.status,
            t.dependsOn.join(',') || '-',
            String(t.attempts),
          ]),
        )}`,
    );
    return;
  }
  if (sub !== 'submit' || arg === undefined || extra !== undefined) {
    throw new UsageError('usage: wheelhouse dag submit <file.json> | wheelhouse dag get <dag_id>');
  }
  let request: { tasks?: unknown; idempotency_key?: unknown };
  try {
    request = JSON.parse(await readFile(arg, 'utf8')) as typeof request;
  } catch (error) {
    throw new UsageError(`${arg}: ${(error as Error).message}`);
  }
  if (typeof request !== 'object' || request === null || !Array.isArray(request.tasks)) {
    throw new UsageError(`${arg}: needs "tasks", a list (the POST /api/dags body)`);
  }
  const answer = await http.send({
    method: 'POST',
    path: '/api/dags',
    body: request,
    idempotent: typeof request.idempotency_key === 'string',
  });
  const result = dagSubmitFromWire(answer.body, answer.status === 201);
  print(
    answer.body,
    () =>
      `dag ${result.dagId}\n${table(
        ['REF', 'TASK ID', 'STATUS'],
        result.tasks.map((t) => [t.ref, t.taskId, t.status]),
      )}`,
  );
}

/** The sentence, then a line per fact that applies. */
function explanationLines(e: Explanation): string {
  const lines: [string, string][] = [
    ['task', e.taskId],
    ['status', `${e.status} (${e.state})`],
  ];
  if (e.due) {
    const epoch = e.due.epoch === null ? '' : `, epoch ${String(e.due.epoch)}`;
    lines.push(['due', `${e.due.dueAt} (partition ${String(e.due.partition)} on ${e.due.ownerNode}${epoch})`]);
  }
  if (e.startBy) lines.push(['start by', e.startBy]);
  if (e.dependencies) {
    lines.push(['waits on', e.dependencies.map((d) => `${d.taskId} ${d.status}`).join(', ') || '-']);
  }
  if (e.queue) {
    const w = e.queue.workers;
    const ahead = e.queue.ahead === null ? '?' : String(e.queue.ahead);
    lines.push([
      'queue',
      `${e.queue.taskType} priority ${String(e.queue.priority)}, ${ahead} ahead; workers ${String(w.connected)} connected, ${String(w.polling)} polling`,
    ]);
  }
  if (e.lease) {
    lines.push([
      'lease',
      `${e.lease.workerId ?? '?'} since ${e.lease.since ?? '?'}, expires ${e.lease.leaseExpiresAt ?? '?'}, on ${e.lease.ownerNode ?? '?'}`,
    ]);
  }
  for (const l of e.limits ?? []) {
    const running = l.running === null ? '?' : String(l.running);
    const of = l.concurrency === null ? '' : ` of ${String(l.concurrency)}`;
    lines.push(['limit', `${l.name}: ${l.holds} (${running}${of} running)`]);
  }
  if (e.backoff) lines.push(['backoff', `until ${e.backoff.until} (attempt ${String(e.backoff.attempt)})`]);
  if (e.schedule) lines.push(['schedule', e.schedule.paused ? 'paused' : `next ${e.schedule.nextDueTime ?? '-'}`]);
  if (e.outcome) lines.push(['outcome', `${e.outcome.reason}${e.outcome.error ? `: ${e.outcome.error}` : ''}`]);
  return `${e.sentence}\n${lines.map(([k, v]) => `${k.padEnd(10)}${v}\n`).join('')}`;
}
