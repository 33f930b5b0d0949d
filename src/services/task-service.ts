import type { OpenHop } from '../lib/otel-hops.js';
import { trace } from '../lib/trace.js';
import { tracingOn } from '../lib/otel.js';
import type { NodeEventSink } from '../domain/events.js';
import type { NewTask, SubmitResult, TaskRecord } from '../domain/model.js';
import { cronBudget } from '../domain/cron-budget.js';
import { newTask, scheduleRecord } from '../domain/new-task.js';
import type { ChildSpec, TaskSpec } from '../domain/specs.js';
import { leaseTokenDigest } from '../domain/lease-token.js';
import { visibleStatus } from '../domain/lifecycle.js';
import { isUuid, uuidv7 } from '../lib/ids.js';
import { WheelhouseError } from '../lib/errors.js';
import type { WheelPlacement } from '../actors/wheel-placement.js';
import type { Clock } from '../runtime/clock.js';
import { MAX_ATTEMPT } from '../store/sql/read.js';
import type { ScheduleStore, TaskStore } from '../store/types.js';
import type { ScheduleService } from './schedule-service.js';
import { assertKnownLimits, type LimitCatalog } from './limit-catalog.js';
import type { MissingTasks } from './missing-tasks.js';
import {
  badToken,
  decodeToken,
  dueEntry,
  encodeToken,
  leaseNotHeld,
  type Admission,
  type TaskViews,
} from './support.js';
import type { CancelAftermath } from './cancel-aftermath.js';
import { endSpans, inheritWithin, startSubmits } from './task-spans.js';
import type { ChildListFilter, ChildRecord, ChildrenApi, TaskListFilter, TasksApi, TaskView } from './types.js';

export interface TaskServiceDeps {
  tasks: TaskStore;
  schedules: Pick<ScheduleStore, 'history'>;
  clock: Clock;
  partitions: number;
  admission: Admission;
  views: TaskViews;
  placement: Pick<WheelPlacement, 'place'>;
  cron: Pick<ScheduleService, 'activate' | 'cancel'>;
  /** What follows a cancel: dependents told, a running task's worker told, a parent's children cancelled. */
  cancels: Pick<CancelAftermath, 'handOn' | 'parentsCancelled'>;
  events: NodeEventSink;
  /** The 404 of an id that names no task (saying when it passed retention). */
  missing: Pick<MissingTasks, 'task'>;
  /** The node's limit declarations: a task may name only those (or keys of a declared family). */
  catalog: Pick<LimitCatalog, 'firstUnknown'>;
  /** What bounds one request's work (from configuration). @default unbounded */
  limits?: Partial<TaskLimits>;
}

/** What bounds the work of one request. */
export interface TaskLimits {
  /** Rows a filtered list page walks. */
  listScanRows: number;
  /** Bytes of JSON after which a list page stops. */
  maxPageBytes: number;
  /** Time the cron checks of one submission may take, ms. */
  cronCheckBudgetMs: number;
}

/**
 * Tasks: submit, read, list, cancel, history. A submission is in the system of record before
 * it is answered; then its due entries go to their wheel partitions and its schedules' actors
 * are activated.
 */
export class TaskService implements TasksApi, ChildrenApi {
  constructor(private readonly deps: TaskServiceDeps) {}

  /** The stored trace context of a task (a dependent's predecessor), for its submit span. */
  private readonly storedTraceparent = async (taskId: string): Promise<string | null> =>
    (await this.deps.tasks.get(taskId))?.traceparent ?? null;

  async submit(specs: TaskSpec[], one = false): Promise<SubmitResult[]> {
    this.deps.admission.admit();
    await assertKnownLimits(this.deps.catalog, specs, !one);
    const now = this.deps.clock.now();
    const budget = cronBudget(this.deps.limits?.cronCheckBudgetMs);
    const rows = specs.map((spec, index) => newTask(spec, uuidv7(now), now, index, this.deps.partitions, budget));
    let spans: OpenHop[] | null = null;
    if (tracingOn()) spans = await startSubmits(rows, this.storedTraceparent);
    else inheritWithin(rows);
    try {
      const t0 = Date.now();
      const results = await this.deps.tasks.submit(rows, now);
      const t1 = Date.now();
      await this.written(results);
      if (one) trace('submit', { insertMs: t1 - t0, placeMs: Date.now() - t1, limits: specs[0]?.limits });
      return results;
    } finally {
      endSpans(spans);
    }
  }

  /**
   * Adds children to a running task, all or none, as a batch submission would add them; the
   * caller must hold the parent's lease (409 `lease_not_held` otherwise, as a heartbeat is
   * answered), and an unknown parent is a 404. A child whose `childKey` the parent already has
   * is answered with that child, `created: false`: nothing is written for it.
   */
  async spawnChildren(parentId: string, leaseToken: string, children: ChildSpec[]): Promise<SubmitResult[]> {
    this.deps.admission.admit();
    const specs = children.map((c) => c.spec);
    await assertKnownLimits(this.deps.catalog, specs, true);
    const now = this.deps.clock.now();
    // Ids sorted, so that the children of one request list (by id) in request order.
    const ids = children.map(() => uuidv7(now)).sort();
    const rows = children.map(({ spec, childKey }, index) => ({
      ...newTask(spec, ids[index]!, now, index, this.deps.partitions),
      childKey,
    }));
    const spans = tracingOn() ? await this.startChildSubmits(parentId, rows) : null;
    // A token that cannot be one this version issued matches no lease: an empty digest never does.
    const digest = leaseTokenDigest(leaseToken) ?? Buffer.alloc(0);
    try {
      const spawned = await this.deps.tasks.spawnChildren(parentId, digest, rows, now);
      if (spawned.kind === 'not_found') throw await this.deps.missing.task(parentId);
      if (spawned.kind === 'lease_not_held') throw leaseNotHeld(parentId);
      await this.written(spawned.results);
      return spawned.results;
    } finally {
      endSpans(spans);
    }
  }

  /**
   * With tracing on, the children's submit spans: a child that came without a context (no
   * field, no header) joins its parent's trace, its submit span the child of the parent's
   * stored one (one read of the parent, only then). With tracing off the store gives such a
   * child the parent's stored context as it inserts it (src/store/sql/children.ts).
   */
  private async startChildSubmits(parentId: string, rows: NewTask[]): Promise<OpenHop[]> {
    if (rows.some((row) => row.traceparent == null)) {
      const inherited = await this.storedTraceparent(parentId);
      if (inherited !== null) for (const row of rows) row.traceparent ??= inherited;
    }
    return startSubmits(rows, this.storedTraceparent);
  }

  /** A page of a task's children, in the order they were spawned; 404 for an unknown task. */
  async listChildren(
    parentId: string,
    filter: ChildListFilter,
  ): Promise<{ children: ChildRecord[]; nextToken: string | null }> {
    const afterId = filter.nextToken === undefined ? undefined : decodeToken(filter.nextToken, 'next_token');
    if (afterId !== undefined && !isUuid(afterId)) throw badToken();
    const now = this.deps.clock.now();
    const maxBytes = this.deps.limits?.maxPageBytes;
    const page = await this.deps.tasks.listChildren(
      parentId,
      {
        limit: filter.limit,
        ...(filter.status === undefined ? {} : { status: filter.status }),
        ...(afterId === undefined ? {} : { afterId }),
        ...(maxBytes === undefined ? {} : { maxBytes }),
      },
      now,
    );
    // An empty first page may be a parent without children or no task at all: only then is it read.
    if (page.children.length === 0 && afterId === undefined && !(await this.deps.tasks.get(parentId))) {
      throw await this.deps.missing.task(parentId);
    }
    return {
      children: page.children.map((c) => ({ ...c, status: visibleStatus(c.status, c.dueMs, now) })),
      nextToken: page.nextAfterId === null ? null : encodeToken(page.nextAfterId),
    };
  }

  /**
   * What follows the write of new tasks: their due entries go to their wheel partitions, their
   * schedules' actors are activated, and the node counts them.
   */
  private async written(results: SubmitResult[]): Promise<void> {
    const created = results.filter((r) => r.created);
    // A debounced submit that merged moved its waiting task's due time: the task is placed
    // again at the new one (the entry of the old one is refused by the claim and dropped); a
    // batch that named it twice places it once.
    const placed = new Set<string>();
    const due = results.filter((r) => {
      if (!(r.created || r.debounced === true) || r.task.status !== 'pending' || placed.has(r.task.id)) return false;
      placed.add(r.task.id);
      return true;
    });
    const schedules = created.filter((r) => r.task.status === 'active').map((r) => scheduleRecord(r.task));
    await Promise.all([
      this.deps.placement.place(due.map((r) => dueEntry(r.task))),
      this.deps.cron.activate(schedules),
    ]);
    // Every task written counts, blocked ones (and ones born cancelled) included.
    if (created.length > 0)
      this.deps.events.emit('task:submitted', {
        taskIds: created.map((r) => r.task.id),
        taskTypes: created.map((r) => r.task.taskType),
      });
  }

  async getTask(taskId: string): Promise<TaskView> {
    const record = await this.deps.tasks.get(taskId);
    if (!record) throw await this.deps.missing.task(taskId);
    return (await this.deps.views.of([record]))[0]!;
  }

  async listTasks(filter: TaskListFilter): Promise<{ tasks: TaskView[]; nextToken: string | null }> {
    const beforeId = filter.nextToken === undefined ? undefined : decodeToken(filter.nextToken, 'next_token');
    if (beforeId !== undefined && !isUuid(beforeId)) throw badToken();
    const limits = this.deps.limits;
    const page = await this.deps.tasks.list(
      {
        status: filter.status,
        taskType: filter.taskType,
        scheduleId: filter.scheduleId,
        limit: filter.limit,
        beforeId,
        ...(limits?.listScanRows === undefined ? {} : { scanRows: limits.listScanRows }),
        ...(limits?.maxPageBytes === undefined ? {} : { maxBytes: limits.maxPageBytes }),
      },
      this.deps.clock.now(),
    );
    return {
      tasks: await this.deps.views.of(page.tasks),
      nextToken: page.nextBeforeId === null ? null : encodeToken(page.nextBeforeId),
    };
  }

  async cancel(taskId: string, reason?: string): Promise<{ cancelledInstances: number }> {
    const existing = await this.deps.tasks.get(taskId);
    if (existing?.scheduleType === 'cron') return this.deps.cron.cancel(existing);
    const result = await this.deps.tasks.cancel(taskId, this.deps.clock.now(), reason);
    switch (result.kind) {
      case 'not_found':
        throw await this.deps.missing.task(taskId);
      case 'finished':
        throw new WheelhouseError('task_finished', `the task is already ${result.task.status}`, {
          details: { task_id: taskId, status: result.task.status },
        });
      case 'cancelled':
        // A parent takes its unfinished children (and theirs) with it; a task that never ran
        // spawned none, and costs no statement.
        this.deps.cancels.handOn([result.task]);
        if (result.task.attempts > 0) await this.deps.cancels.parentsCancelled([taskId]);
        return { cancelledInstances: 1 };
      case 'cancel_requested':
        // Its children go when its attempt ends cancelled (WorkerService).
        this.deps.cancels.handOn([result.task]);
        return { cancelledInstances: 1 };
    }
  }

  async retry(taskId: string): Promise<TaskView> {
    const result = await this.deps.tasks.retry(taskId, this.deps.clock.now());
    switch (result.kind) {
      case 'not_found':
        throw await this.deps.missing.task(taskId);
      case 'refused':
        throw refusedRetry(result.task);
      case 'retried':
        // Like every requeue: the wheel partition that owns the task takes it (due now, so
        // straight to the ready queue); a placement that fails is retried in the background.
        await this.deps.placement.place([dueEntry(result.task)]);
        return (await this.deps.views.of([result.task]))[0]!;
    }
  }

  async history(taskId: string, limit: number, nextToken?: string): ReturnType<TasksApi['history']> {
    const token = nextToken === undefined ? undefined : decodeToken(nextToken, 'next_token');
    const task = await this.deps.tasks.get(taskId);
    if (!task) throw await this.deps.missing.task(taskId);
    if (task.scheduleType === 'cron') {
      // A schedule's history is its instances' executions; the token names the last one.
      let before: { taskId: string; attempt: number } | undefined;
      if (token !== undefined) {
        const [instance = '', attempt = ''] = token.split(':');
        if (!isUuid(instance)) throw badToken();
        before = { taskId: instance, attempt: attemptOf(attempt) };
      }
      const executions = await this.deps.schedules.history(task.id, limit, before);
      const last = executions[executions.length - 1];
      return {
        executions,
        nextToken: executions.length === limit && last ? encodeToken(`${last.taskId}:${last.attempt}`) : null,
      };
    }
    const before = token === undefined ? undefined : attemptOf(token);
    const executions = await this.deps.tasks.history(taskId, limit, before);
    const last = executions[executions.length - 1];
    return { executions, nextToken: executions.length === limit && last ? encodeToken(String(last.attempt)) : null };
  }
}

/** Why a retry was refused, in the catalogue's words: the status (or what else) is named. */
function refusedRetry(task: TaskRecord): WheelhouseError {
  const details = { task_id: task.id, status: task.status };
  if (task.scheduleType === 'cron') {
    return new WheelhouseError('invalid_transition', `a cron schedule cannot be retried (it is ${task.status})`, {
      details,
    });
  }
  if ((task.status === 'failed' || task.status === 'cancelled') && task.depsSatisfied < task.depsTotal) {
    return new WheelhouseError(
      'invalid_transition',
      `a ${task.status} task whose dependencies have not all succeeded (${task.depsSatisfied} of ${task.depsTotal}) cannot be retried`,
      { details },
    );
  }
  return new WheelhouseError(
    'invalid_transition',
    `a ${task.status} task cannot be retried: only failed or cancelled tasks can`,
    { details },
  );
}

/**
 * An attempt number from a history token: digits, at most an attempt column can hold (a
 * Postgres integer). Anything else is a token this endpoint did not issue: 400.
 */
function attemptOf(text: string): number {
  if (!/^\d{1,10}$/.test(text)) throw badToken();
  const attempt = Number(text);
  if (attempt > MAX_ATTEMPT) throw badToken();
  return attempt;
}
