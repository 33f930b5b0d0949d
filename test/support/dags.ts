/**
 * Helpers for the dependency (DAG) end-to-end tests: a worker over the HTTP endpoints, the
 * task and graph views, and row counts of the tables a submission writes.
 */
import { api, type TestCluster } from './nodes.js';
import { eventually } from './waits.js';

export interface Polled {
  task_id: string;
  task_type: string;
  payload: unknown;
  attempt: number;
  lease_token: string;
}

export interface TaskJson {
  task_id: string;
  task_type: string;
  status: string;
  due_time: string | null;
  started_at: string | null;
  completed_at: string | null;
  attempts: number;
  last_error: string | null;
  dependencies: string[];
  dependencies_satisfied?: number;
  dag_id?: string;
  ref?: string | null;
  cancel_requested: boolean;
}

export interface DagNodeJson {
  ref: string;
  task_id: string;
  task_type: string;
  status: string;
  depends_on: string[];
  due_time: string | null;
  started_at: string | null;
  completed_at: string | null;
  attempts: number;
  last_error: string | null;
}

export interface DagJson {
  dag_id: string;
  status: string;
  counts: Record<string, number>;
  tasks: DagNodeJson[];
}

export interface DagSubmitJson {
  dag_id: string;
  tasks: { ref: string; task_id: string; status: string; due_time: string | null }[];
}

export interface ErrorJson {
  error: { code: string; message: string; details: Record<string, unknown> };
}

/** A graph task as `POST /api/dags` takes it. */
export interface DagTaskBody {
  ref: string;
  task_type: string;
  depends_on?: string[];
  payload?: unknown;
  schedule?: unknown;
  max_retries?: number;
  timeout_seconds?: number;
  [field: string]: unknown;
}

/** The node API a DAG test talks to; `url()` is read on each call (a restart moves it). */
export function dagClient(url: () => string) {
  const client = {
    submitDag: (body: unknown) => api<DagSubmitJson & ErrorJson>(url(), 'POST', '/api/dags', body),
    submitTask: (body: unknown) =>
      api<{ task_id: string; status: string; due_time: string } & ErrorJson>(url(), 'POST', '/api/tasks', body),
    task: async (id: string): Promise<TaskJson> => {
      const r = await api<TaskJson>(url(), 'GET', `/api/tasks/${id}`);
      if (r.status !== 200) throw new Error(`GET /api/tasks/${id}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    },
    dag: async (id: string): Promise<DagJson> => {
      const r = await api<DagJson>(url(), 'GET', `/api/dags/${id}`);
      if (r.status !== 200) throw new Error(`GET /api/dags/${id}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    },
    cancel: (id: string) =>
      api<{ ok: boolean; cancelled_instances: number } & ErrorJson>(url(), 'DELETE', `/api/tasks/${id}`),
    /** One long-poll. */
    poll: async (types: string[], max = 100, waitMs = 1000): Promise<Polled[]> => {
      const r = await api<{ tasks: Polled[] }>(url(), 'POST', '/api/workers/poll', {
        worker_id: 'w-dag',
        task_types: types,
        max_tasks: max,
        wait_ms: waitMs,
      });
      if (r.status !== 200) throw new Error(`poll: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.tasks;
    },
    /** Reports results in one batch; throws unless every lease was still held. */
    complete: async (
      tasks: Polled[],
      status: 'succeeded' | 'failed' = 'succeeded',
      extra: { error?: string; retryable?: boolean } = {},
    ) => {
      if (tasks.length === 0) return;
      const results = tasks.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token, status, ...extra }));
      const r = await api<{ results: { task_id: string; ok: boolean }[] }>(url(), 'POST', '/api/workers/complete', {
        results,
      });
      if (r.status !== 200 || r.body.results.some((x) => !x.ok))
        throw new Error(`complete: ${r.status} ${JSON.stringify(r.body)}`);
    },
    /** Polls until exactly `n` tasks of these types were handed out (more in one answer fails). */
    take: async (types: string[], n: number, timeoutMs = 30_000): Promise<Polled[]> => {
      const got: Polled[] = [];
      const deadline = Date.now() + timeoutMs;
      while (got.length < n) {
        if (Date.now() > deadline) throw new Error(`took ${got.length} of ${n} tasks of ${types.join(', ')}`);
        got.push(...(await client.poll(types, n - got.length, 1000)));
      }
      return got;
    },
    /** Waits until the task shows `status`. */
    waitStatus: (id: string, status: string | string[], timeoutMs = 30_000): Promise<TaskJson> => {
      const wanted = Array.isArray(status) ? status : [status];
      return eventually(
        async () => {
          const t = await client.task(id);
          return wanted.includes(t.status) ? t : undefined;
        },
        timeoutMs,
        `task ${id} to be ${wanted.join('|')}`,
      );
    },
    /** Waits until no task of the graph can run any more. */
    waitDagDone: (id: string, timeoutMs = 60_000): Promise<DagJson> =>
      eventually(
        async () => {
          const d = await client.dag(id);
          return d.status === 'running' ? undefined : d;
        },
        timeoutMs,
        `graph ${id} to finish`,
      ),
  };
  return client;
}

export type DagClient = ReturnType<typeof dagClient>;

/** Rows of the tables a submission writes (all-or-nothing checks). */
export async function rowCounts(
  c: TestCluster,
): Promise<{ tasks: number; edges: number; keys: number; events: number }> {
  const [row] = await c.sql<{ tasks: number; edges: number; keys: number; events: number }>(
    `SELECT (SELECT count(*)::int FROM tasks) AS tasks, (SELECT count(*)::int FROM task_dependencies) AS edges,
            (SELECT count(*)::int FROM idempotency_keys) AS keys, (SELECT count(*)::int FROM dag_events) AS events`,
  );
  return row!;
}

/** Milliseconds of an ISO time the API answered (fails on null). */
export function ms(iso: string | null | undefined): number {
  if (iso === null || iso === undefined) throw new Error('expected a time, got null');
  return Date.parse(iso);
}

/** A chain of refs `${prefix}0 → ${prefix}1 → …`. */
export function chain(prefix: string, n: number, taskType: string): DagTaskBody[] {
  return Array.from({ length: n }, (_, i) => ({
    ref: `${prefix}${i}`,
    task_type: taskType,
    ...(i > 0 ? { depends_on: [`${prefix}${i - 1}`] } : {}),
  }));
}

/** task id of each ref of a `POST /api/dags` answer. */
export function idsOf(body: { tasks: { ref: string; task_id: string }[] }): Record<string, string> {
  return Object.fromEntries(body.tasks.map((t) => [t.ref, t.task_id]));
}
