import { childrenClient, type ChildrenClient } from './children.js';
import { sleep } from './backoff.js';
import { WheelhouseTimeoutError } from './errors.js';
import { explanationFromWire, type Explanation } from './explain.js';
import { Transport } from './http.js';
import { limitsClient, type LimitsClient } from './limits.js';
import { operationsClient, type OperationsClient } from './operations.js';
import type {
  CancelResult,
  ClientOptions,
  Dag,
  DagSubmitResult,
  Execution,
  HistoryOptions,
  HistoryPage,
  ListFilter,
  NewDag,
  NewTask,
  Submitted,
  SubmitResult,
  Task,
  TaskPage,
  TaskStatus,
  WaitOptions,
} from './types.js';
import {
  cancelFromWire,
  dagFromWire,
  dagSubmitFromWire,
  dagToWire,
  executionFromWire,
  itemsOf,
  nextTokenFromWire,
  submittedFromWire,
  taskFromWire,
  taskToWire,
} from './wire.js';

/** A typed client of one Wheelhouse node's HTTP API. Every method rejects with the errors of `errors.ts`. */
export interface WheelhouseClient {
  /** `POST /api/tasks`. Retried after a network error only when `idempotencyKey` is set. */
  submit(task: NewTask): Promise<SubmitResult>;
  /** `POST /api/tasks/batch`: up to 1 000 tasks, all or nothing, answered in request order. */
  submitBatch(tasks: NewTask[]): Promise<Submitted[]>;
  /** `POST /api/dags`: a whole graph, all or nothing. */
  submitDag(dag: NewDag): Promise<DagSubmitResult>;
  /** `GET /api/dags/{id}`. */
  getDag(dagId: string): Promise<Dag>;
  /** `GET /api/tasks/{id}`. */
  get(taskId: string): Promise<Task>;
  /** `GET /api/tasks/{id}/explain`: why the task is where it is, as one sentence and the facts under it. */
  explain(taskId: string): Promise<Explanation>;
  /** One page of `GET /api/tasks`, newest first. */
  listPage(filter?: ListFilter): Promise<TaskPage>;
  /** Every task that matches, newest first, fetching page after page as the loop goes on. */
  list(filter?: ListFilter): AsyncIterable<Task>;
  /** `DELETE /api/tasks/{id}`. */
  cancel(taskId: string): Promise<CancelResult>;
  /** `POST /api/tasks/{id}/pause`: a cron task stops firing. Answers the task. */
  pause(taskId: string): Promise<Task>;
  /** `POST /api/tasks/{id}/resume`: a paused cron task fires again from now. Answers the task. */
  resume(taskId: string): Promise<Task>;
  /**
   * `POST /api/tasks/{id}/retry`: a failed, cancelled or expired task runs again as a new attempt, its
   * history kept. Answers the task (pending again). Any other status: `invalid_transition`.
   */
  retry(taskId: string): Promise<Task>;
  /** One page of `GET /api/tasks/{id}/history`, newest first. */
  historyPage(taskId: string, options?: HistoryOptions): Promise<HistoryPage>;
  /** Every execution of the task, newest first, page after page. */
  history(taskId: string, options?: Omit<HistoryOptions, 'nextToken'>): AsyncIterable<Execution>;
  /**
   * Polls the task until its status is one of `statuses` and resolves with it; rejects with
   * `WheelhouseTimeoutError` when `timeoutMs` runs out first, or with the error of a poll
   * that failed for good (`TaskNotFoundError`, …).
   */
  waitFor(taskId: string, statuses: TaskStatus | readonly TaskStatus[], options?: WaitOptions): Promise<Task>;
  /** Flow control: declare, read, list and remove limits; pause and resume a task type. */
  readonly limits: LimitsClient;
  /** Operations on many tasks: cancel, retry or delete what a filter matches, in the background. */
  readonly operations: OperationsClient;
  /** Children of a running task: list them (and spawn them, as the parent's worker). */
  readonly children: ChildrenClient;
}

const DEFAULT_WAIT_MS = 60_000;
const DEFAULT_POLL_MS = 200;
const DEFAULT_MAX_POLL_MS = 2_000;

/** `createClient({ url: 'http://127.0.0.1:7070', token })`. */
export function createClient(options: ClientOptions): WheelhouseClient {
  const http = new Transport(options);
  const taskPath = (id: string, tail = ''): string => `/api/tasks/${encodeURIComponent(id)}${tail}`;

  const listPage = async (filter: ListFilter = {}): Promise<TaskPage> => {
    const { body } = await http.send({
      method: 'GET',
      path: '/api/tasks',
      query: {
        status: filter.status,
        task_type: filter.taskType,
        schedule_id: filter.scheduleId,
        limit: filter.limit,
        next_token: filter.nextToken,
      },
      idempotent: true,
    });
    return {
      tasks: itemsOf((body as { tasks?: unknown }).tasks).map(taskFromWire),
      nextToken: nextTokenFromWire(body),
    };
  };

  const historyPage = async (taskId: string, options: HistoryOptions = {}): Promise<HistoryPage> => {
    const { body } = await http.send({
      method: 'GET',
      path: taskPath(taskId, '/history'),
      query: { limit: options.limit, next_token: options.nextToken },
      idempotent: true,
    });
    return {
      executions: itemsOf((body as { executions?: unknown }).executions).map(executionFromWire),
      nextToken: nextTokenFromWire(body),
    };
  };

  const get = async (taskId: string): Promise<Task> =>
    taskFromWire((await http.send({ method: 'GET', path: taskPath(taskId), idempotent: true })).body);

  return {
    limits: limitsClient(http),
    operations: operationsClient(http),
    children: childrenClient(http),

    async submit(task) {
      const answer = await http.send({
        method: 'POST',
        path: '/api/tasks',
        body: taskToWire(task),
        idempotent: task.idempotencyKey !== undefined,
      });
      return { ...submittedFromWire(answer.body), created: answer.status === 201 };
    },

    async submitBatch(tasks) {
      const { body } = await http.send({
        method: 'POST',
        path: '/api/tasks/batch',
        body: { tasks: tasks.map(taskToWire) },
        // Safe to send twice only when each task would be replayed rather than created again.
        idempotent: tasks.length > 0 && tasks.every((t) => t.idempotencyKey !== undefined),
      });
      return itemsOf((body as { tasks?: unknown }).tasks).map(submittedFromWire);
    },

    async submitDag(dag) {
      const answer = await http.send({
        method: 'POST',
        path: '/api/dags',
        body: dagToWire(dag),
        idempotent: dag.idempotencyKey !== undefined,
      });
      return dagSubmitFromWire(answer.body, answer.status === 201);
    },

    async getDag(dagId) {
      const path = `/api/dags/${encodeURIComponent(dagId)}`;
      return dagFromWire((await http.send({ method: 'GET', path, idempotent: true })).body);
    },

    get,
    listPage,

    async explain(taskId) {
      const answer = await http.send({ method: 'GET', path: taskPath(taskId, '/explain'), idempotent: true });
      return explanationFromWire(answer.body);
    },

    async *list(filter = {}) {
      let nextToken = filter.nextToken ?? null;
      do {
        const page = await listPage({ ...filter, nextToken });
        yield* page.tasks;
        nextToken = page.nextToken;
      } while (nextToken !== null);
    },

    async cancel(taskId) {
      return cancelFromWire((await http.send({ method: 'DELETE', path: taskPath(taskId), idempotent: false })).body);
    },

    async pause(taskId) {
      return taskFromWire(
        (await http.send({ method: 'POST', path: taskPath(taskId, '/pause'), idempotent: false })).body,
      );
    },

    async resume(taskId) {
      const answer = await http.send({ method: 'POST', path: taskPath(taskId, '/resume'), idempotent: false });
      return taskFromWire(answer.body);
    },

    async retry(taskId) {
      const answer = await http.send({ method: 'POST', path: taskPath(taskId, '/retry'), idempotent: false });
      return taskFromWire(answer.body);
    },

    historyPage,

    async *history(taskId, options = {}) {
      let nextToken: string | null = null;
      do {
        const page = await historyPage(taskId, { ...options, nextToken });
        yield* page.executions;
        nextToken = page.nextToken;
      } while (nextToken !== null);
    },

    async waitFor(taskId, statuses, options = {}) {
      const wanted: readonly TaskStatus[] = typeof statuses === 'string' ? [statuses] : statuses;
      const timeoutMs = options.timeoutMs ?? DEFAULT_WAIT_MS;
      const maxPollMs = options.maxPollMs ?? DEFAULT_MAX_POLL_MS;
      const deadline = Date.now() + timeoutMs;
      let pollMs = Math.min(options.pollMs ?? DEFAULT_POLL_MS, maxPollMs);
      let lastStatus: TaskStatus | null = null;
      for (;;) {
        options.signal?.throwIfAborted();
        const task = await get(taskId);
        lastStatus = task.status;
        if (wanted.includes(task.status)) return task;
        const leftMs = deadline - Date.now();
        if (leftMs <= 0) throw new WheelhouseTimeoutError(taskId, wanted, lastStatus, timeoutMs);
        await sleep(Math.min(pollMs, leftMs), options.signal);
        pollMs = Math.min(maxPollMs, pollMs * 1.5);
      }
    },
  };
}
