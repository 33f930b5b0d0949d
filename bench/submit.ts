import { Pool } from 'undici';
import { sleep } from './time.js';
import { authHeaders } from './auth.js';

/**
 * Bulk submission as producers do it: `POST /api/tasks/batch`, 1 000 tasks a request, a few
 * requests in parallel. 429 and 503 are waited out per `Retry-After` (and counted); any other
 * failure stops the run.
 */
export interface SubmitOutcome {
  /** Date.now() when the first request was sent / the last answer arrived. */
  firstSubmitMs: number;
  lastAnsweredMs: number;
  /** Requests answered 429 or 503 and sent again. */
  retried: number;
}

export const BATCH_SIZE = 1000;

const JSON_HEADERS = { 'content-type': 'application/json', ...authHeaders() };

export interface SubmitOptions {
  /** Batch requests in flight at once. @default 4 */
  parallel?: number;
  /** Called with the ids the node gave tasks `from` … `from + ids.length − 1`, in order. */
  onCreated?(from: number, ids: string[]): void;
}

/**
 * Sends one request until it is answered with a status other than 429 or 503 (those are
 * waited out per `Retry-After`, at most 50 times, each counted by `onRetry`). Answers the
 * status and the body's text.
 */
async function sendRetrying(
  pool: Pool,
  request: Parameters<Pool['request']>[0],
  onRetry: () => void = () => undefined,
): Promise<{ status: number; text: string }> {
  for (let attempt = 0; ; attempt++) {
    const res = await pool.request(request);
    const text = await res.body.text();
    if ((res.statusCode === 429 || res.statusCode === 503) && attempt < 50) {
      onRetry();
      const after = Number(res.headers['retry-after']);
      await sleep(Number.isFinite(after) ? after * 1000 : 500);
      continue;
    }
    return { status: res.statusCode, text };
  }
}

/** Submits `count` tasks built by `taskAt(i)`, `parallel` batch requests at a time. */
export async function submitTasks(
  url: string,
  count: number,
  taskAt: (i: number) => Record<string, unknown>,
  { parallel = 4, onCreated }: SubmitOptions = {},
): Promise<SubmitOutcome> {
  const pool = new Pool(url, { connections: parallel, pipelining: 1 });
  let next = 0;
  let retried = 0;
  const firstSubmitMs = Date.now();
  const lane = async (): Promise<void> => {
    while (next < count) {
      const from = next;
      const to = Math.min(count, from + BATCH_SIZE);
      next = to;
      const tasks = [];
      for (let i = from; i < to; i++) tasks.push(taskAt(i));
      const body = JSON.stringify({ tasks });
      const { status, text } = await sendRetrying(
        pool,
        { path: '/api/tasks/batch', method: 'POST', headers: JSON_HEADERS, body },
        () => retried++,
      );
      if (status !== 201 && status !== 200)
        throw new Error(`POST /api/tasks/batch answered ${status}: ${text.slice(0, 500)}`);
      onCreated?.(
        from,
        (JSON.parse(text) as { tasks: { task_id: string }[] }).tasks.map((t) => t.task_id),
      );
    }
  };
  try {
    await Promise.all(Array.from({ length: parallel }, lane));
  } finally {
    await pool.close();
  }
  return { firstSubmitMs, lastAnsweredMs: Date.now(), retried };
}

export interface DeleteOutcome {
  /** Date.now() when the first request was sent / the last answer arrived. */
  firstSentMs: number;
  lastAnsweredMs: number;
  /** Answered 404 or 409 (gone, already finished): nothing left to stop. */
  alreadyGone: number;
}

/**
 * `DELETE /api/tasks/{id}` for each id, `parallel` at a time (a schedule stops firing and its
 * pending instance is cancelled). 429 and 503 are waited out; any other failure throws.
 */
export async function deleteTasks(url: string, ids: readonly string[], parallel = 16): Promise<DeleteOutcome> {
  const pool = new Pool(url, { connections: parallel, pipelining: 1 });
  let next = 0;
  let alreadyGone = 0;
  const firstSentMs = Date.now();
  const lane = async (): Promise<void> => {
    while (next < ids.length) {
      const id = ids[next++] as string;
      const { status, text } = await sendRetrying(pool, { path: `/api/tasks/${id}`, method: 'DELETE' });
      if (status === 404 || status === 409) alreadyGone++;
      else if (status !== 200) throw new Error(`DELETE /api/tasks/${id} answered ${status}: ${text.slice(0, 500)}`);
    }
  };
  try {
    await Promise.all(Array.from({ length: parallel }, lane));
  } finally {
    await pool.close();
  }
  return { firstSentMs, lastAnsweredMs: Date.now(), alreadyGone };
}

/** What `POST /api/dags` answers. */
export interface DagAnswer {
  dag_id: string;
  tasks: { ref: string; task_id: string; status: string }[];
}

export interface DagSubmitOutcome extends SubmitOutcome {
  /** Each request's DAG id, in request order. */
  dagIds: string[];
}

export interface DagSubmitOptions {
  /** Requests in flight at once. @default 4 */
  parallel?: number;
  /** Called with each answer and the index of its request. */
  onCreated?(index: number, answer: DagAnswer): void;
}

/**
 * Submits `count` graphs, one `POST /api/dags` each, built by `dagAt(i)` (the request body),
 * `parallel` requests at a time. 429 and 503 are waited out per `Retry-After` (and counted);
 * any other failure stops the run.
 */
export async function submitDags(
  url: string,
  count: number,
  dagAt: (i: number) => Record<string, unknown>,
  { parallel = 4, onCreated }: DagSubmitOptions = {},
): Promise<DagSubmitOutcome> {
  const pool = new Pool(url, { connections: parallel, pipelining: 1 });
  const dagIds: string[] = [];
  let next = 0;
  let retried = 0;
  const firstSubmitMs = Date.now();
  const lane = async (): Promise<void> => {
    while (next < count) {
      const index = next++;
      const body = JSON.stringify(dagAt(index));
      const { status, text } = await sendRetrying(
        pool,
        { path: '/api/dags', method: 'POST', headers: JSON_HEADERS, body },
        () => retried++,
      );
      if (status !== 201 && status !== 200)
        throw new Error(`POST /api/dags (request ${index}) answered ${status}: ${text.slice(0, 500)}`);
      const answer = JSON.parse(text) as DagAnswer;
      dagIds[index] = answer.dag_id;
      onCreated?.(index, answer);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(parallel, count) }, lane));
  } finally {
    await pool.close();
  }
  return { firstSubmitMs, lastAnsweredMs: Date.now(), retried, dagIds };
}
