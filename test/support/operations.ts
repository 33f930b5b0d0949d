import { expect } from 'vitest';
import { api } from './nodes.js';
import { eventually } from './waits.js';

/** What the operations routes answer (test/e2e/operations*.test.ts). */
export interface OperationBody {
  operation_id: string;
  action: string;
  filter: Record<string, unknown>;
  state: 'running' | 'done' | 'cancelled' | 'failed';
  matched: number;
  done: number;
  failed: number;
  error: string | null;
  started_at: string;
  finished_at: string | null;
}

export interface Polled {
  tasks: { task_id: string; attempt: number; lease_token: string }[];
}

export const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });

/**
 * Submits `count` tasks of `taskType` (no retries) and fails each through the HTTP worker
 * routes with `error`: `count` failed tasks, attempt 1 each. Answers their ids.
 */
export async function failedTasks(
  url: string,
  taskType: string,
  count: number,
  error: string,
  headers: Record<string, string> = {},
  fields: Record<string, unknown> = {},
): Promise<string[]> {
  const ids: string[] = [];
  for (let from = 0; from < count; from += 1000) {
    const n = Math.min(1000, count - from);
    const batch = await api<{ tasks: { task_id: string }[] }>(
      url,
      'POST',
      '/api/tasks/batch',
      { tasks: Array.from({ length: n }, () => ({ task_type: taskType, max_retries: 0, ...fields })) },
      headers,
    );
    expect(batch.status).toBe(201);
    ids.push(...batch.body.tasks.map((t) => t.task_id));
  }
  await failPolled(url, taskType, count, error, headers);
  return ids;
}

/** Polls `count` tasks of `taskType` and fails each with `error`; answers the attempts seen. */
export async function failPolled(
  url: string,
  taskType: string,
  count: number,
  error: string,
  headers: Record<string, string> = {},
  withinMs = 60_000,
): Promise<Polled['tasks']> {
  const seen: Polled['tasks'] = [];
  const deadline = Date.now() + withinMs;
  while (seen.length < count && Date.now() < deadline) {
    const polled = await api<Polled>(
      url,
      'POST',
      '/api/workers/poll',
      { worker_id: 'w-ops', task_types: [taskType], max_tasks: Math.min(500, count - seen.length), wait_ms: 1000 },
      headers,
    );
    expect(polled.status).toBe(200);
    const results = polled.body.tasks.map((t) => ({
      task_id: t.task_id,
      lease_token: t.lease_token,
      status: 'failed',
      error,
    }));
    if (results.length > 0) {
      const done = await api(url, 'POST', '/api/workers/complete', { results }, headers);
      expect(done.status).toBe(200);
    }
    seen.push(...polled.body.tasks);
  }
  expect(seen.length).toBe(count);
  return seen;
}

/** Starts an operation: 202 and its running body. */
export async function startOperation(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<OperationBody> {
  const started = await api<OperationBody>(url, 'POST', '/api/operations', body, headers);
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  expect(started.body.state).toBe('running');
  return started.body;
}

/** Waits until the operation has ended; answers it. */
export function ended(
  url: () => string,
  operationId: string,
  headers: Record<string, string> = {},
  timeoutMs = 30_000,
): Promise<OperationBody> {
  return eventually(
    async () => {
      const got = await api<OperationBody>(url(), 'GET', `/api/operations/${operationId}`, undefined, headers);
      return got.status === 200 && got.body.state !== 'running' ? got.body : undefined;
    },
    timeoutMs,
    `operation ${operationId} to end`,
    50,
  );
}

/** Every task of `taskType`, through the task list, page after page. */
export async function tasksOfType(
  url: string,
  taskType: string,
): Promise<{ task_id: string; attempts: number; status: string }[]> {
  const all: { task_id: string; attempts: number; status: string }[] = [];
  let token: string | null = '';
  while (token !== null) {
    const page: { status: number; body: { tasks: typeof all; next_token: string | null } } = await api(
      url,
      'GET',
      `/api/tasks?task_type=${taskType}&limit=1000${token === '' ? '' : `&next_token=${token}`}`,
    );
    all.push(...page.body.tasks);
    token = page.body.next_token;
  }
  return all;
}
