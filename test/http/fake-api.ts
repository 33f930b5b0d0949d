/**
 * A fake `SchedulerApi` for the HTTP layer's UNIT tests: it records every call and answers
 * with canned records, so the tests check the mapping HTTP ⇄ service (status codes, error
 * bodies, snake_case shapes) and nothing else. The end-to-end tests against the real
 * scheduler live elsewhere (test/e2e).
 */
import type { FastifyBaseLogger, FastifyInstance, FastifyPluginAsync } from 'fastify';
import { compileOptions, type WheelhouseOptions } from '../../src/lib/config.js';
import { WheelhouseError } from '../../src/lib/errors.js';
import { buildServer } from '../../src/http/server.js';
import { ApiKeys } from '../../src/services/api-keys.js';
import type { WorkerChannelApi } from '../../src/services/worker-channel.js';
import type { ApiKeyRecord, ApiKeyStore } from '../../src/store/api-key-store.js';
import type { ExtendedLease } from '../../src/store/types.js';
import type { ExecutionRecord, SubmitResult, TaskRecord } from '../../src/domain/model.js';
import type { TaskSpec, DagSpec } from '../../src/domain/specs.js';
import type {
  Assignment,
  CompletionRequest,
  PollRequest,
  TaskListFilter,
  TasksApi,
  TaskView,
  SchedulesApi,
  DagsApi,
  WorkersApi,
  HealthApi,
  DagSubmitResult,
  DagNodeView,
  DagView,
  ExplainApi,
} from '../../src/services/types.js';
import type { Explanation } from '../../src/services/explanation.js';
import type { LimitsApi } from '../../src/services/limits-service.js';
import type { ChildrenApi, OperationsApi } from '../../src/services/types.js';
import { memoryLimits } from './fake-limits.js';

/** The fake's "now": 2026-11-30T12:00:00.000Z. */
export const NOW_MS = Date.UTC(2026, 10, 30, 12, 0, 0, 0);
/** The one task id `getTask` knows. */
export const KNOWN_ID = '0192f3a4-5b6c-7d8e-9f00-112233445566';

export function record(overrides: Partial<TaskRecord> = {}): TaskRecord {
  return {
    id: KNOWN_ID,
    taskType: 'email.send',
    payload: { to: 'a@example.com' },
    status: 'running',
    version: 2,
    scheduleType: 'delayed',
    schedule: null,
    dueMs: NOW_MS - 1000,
    priority: 5,
    maxRetries: 3,
    timeoutSeconds: 60,
    maxTimeoutSeconds: null,
    startDeadlineSeconds: null,
    startByMs: null,
    attempts: 1,
    leaseExpiresMs: NOW_MS + 60_000,
    deadlineMs: NOW_MS + 60_000,
    workerId: 'w-1',
    cancelRequested: false,
    partition: 7,
    idempotencyKey: null,
    createdMs: NOW_MS - 5000,
    updatedMs: NOW_MS,
    startedMs: NOW_MS - 500,
    completedMs: null,
    lastError: null,
    scheduleId: null,
    fireMs: null,
    lastFiredMs: null,
    dagId: null,
    dagRef: null,
    depsTotal: 0,
    depsSatisfied: 0,
    hasDependents: false,
    result: null,
    progress: null,
    progressMs: null,
    ...overrides,
  };
}

/** Every service the routes call, as one object. */
type AllApis = TasksApi & SchedulesApi & DagsApi & WorkersApi & HealthApi & ExplainApi;

type Call = { method: keyof AllApis; args: unknown[] };

/** Records calls; each method can be replaced through `override`. */
export class FakeApi implements AllApis {
  readonly calls: Call[] = [];
  /** The signal each poll was given. */
  readonly pollSignals: AbortSignal[] = [];
  ready = true;
  private readonly overrides: Partial<AllApis> = {};
  private seq = 0;

  /** Replaces one method; the call is still recorded. */
  override<K extends keyof AllApis>(method: K, impl: AllApis[K]): this {
    this.overrides[method] = impl;
    return this;
  }

  callsOf(method: keyof AllApis): unknown[][] {
    return this.calls.filter((c) => c.method === method).map((c) => c.args);
  }

  async submit(specs: TaskSpec[]): Promise<SubmitResult[]> {
    this.calls.push({ method: 'submit', args: [specs] });
    if (this.overrides.submit) return this.overrides.submit(specs);
    return specs.map((spec) => {
      const s = spec.schedule;
      const dueMs = s.type === 'delayed' ? Math.max(NOW_MS, s.dueMs ?? NOW_MS + (s.delaySeconds ?? 0) * 1000) : NOW_MS;
      const status = s.type === 'cron' ? 'active' : spec.dependencies.length > 0 ? 'blocked' : 'pending';
      const id = `0192f3a4-5b6c-7d8e-9f00-${String(++this.seq).padStart(12, '0')}`;
      return {
        task: record({
          id,
          taskType: spec.taskType,
          status,
          scheduleType: s.type,
          dueMs,
          attempts: 0,
          startedMs: null,
        }),
        created: !(spec.idempotencyKey ?? '').startsWith('replay'),
      };
    });
  }

  async submitDag(spec: DagSpec): Promise<DagSubmitResult> {
    this.calls.push({ method: 'submitDag', args: [spec] });
    if (this.overrides.submitDag) return this.overrides.submitDag(spec);
    const tasks = spec.tasks.map((t): DagNodeView => ({
      ref: t.ref,
      record: record({
        id: `0192f3a4-5b6c-7d8e-9f00-${String(++this.seq).padStart(12, '0')}`,
        status: t.dependsOn.length > 0 ? 'blocked' : 'pending',
      }),
      status: t.dependsOn.length > 0 ? 'blocked' : 'ready',
      dependsOn: t.dependsOn,
    }));
    return { created: true, dag: { dagId: KNOWN_ID, status: 'running', counts: {}, tasks } };
  }

  async getDag(dagId: string): Promise<DagView> {
    this.calls.push({ method: 'getDag', args: [dagId] });
    if (this.overrides.getDag) return this.overrides.getDag(dagId);
    throw new WheelhouseError('task_not_found', undefined, { details: { dag_id: dagId } });
  }

  async getTask(taskId: string): Promise<TaskView> {
    this.calls.push({ method: 'getTask', args: [taskId] });
    if (this.overrides.getTask) return this.overrides.getTask(taskId);
    if (taskId !== KNOWN_ID) throw new WheelhouseError('task_not_found', undefined, { details: { task_id: taskId } });
    return { record: record(), status: 'running', dependencies: [] };
  }

  async listTasks(filter: TaskListFilter): ReturnType<TasksApi['listTasks']> {
    this.calls.push({ method: 'listTasks', args: [filter] });
    if (this.overrides.listTasks) return this.overrides.listTasks(filter);
    return { tasks: [{ record: record(), status: 'running', dependencies: [] }], nextToken: 'page-2' };
  }

  async cancel(taskId: string): Promise<{ cancelledInstances: number }> {
    this.calls.push({ method: 'cancel', args: [taskId] });
    if (this.overrides.cancel) return this.overrides.cancel(taskId);
    return { cancelledInstances: 1 };
  }

  async retry(taskId: string): Promise<TaskView> {
    this.calls.push({ method: 'retry', args: [taskId] });
    if (this.overrides.retry) return this.overrides.retry(taskId);
    if (taskId !== KNOWN_ID) throw new WheelhouseError('task_not_found', undefined, { details: { task_id: taskId } });
    return { record: record({ status: 'pending' }), status: 'ready', dependencies: [] };
  }

  async explain(taskId: string): Promise<Explanation> {
    this.calls.push({ method: 'explain', args: [taskId] });
    if (this.overrides.explain) return this.overrides.explain(taskId);
    if (taskId !== KNOWN_ID) throw new WheelhouseError('task_not_found', undefined, { details: { task_id: taskId } });
    return {
      taskId,
      status: 'succeeded',
      state: 'succeeded',
      sentence: 'Succeeded.',
      checkedMs: NOW_MS,
      due: null,
      dependencies: null,
      queue: null,
      lease: null,
      limits: null,
      backoff: null,
      startByMs: null,
      schedule: null,
      outcome: { finishedMs: NOW_MS, error: null, reason: 'attempt 1 succeeded' },
    };
  }

  async pause(taskId: string): Promise<TaskView> {
    this.calls.push({ method: 'pause', args: [taskId] });
    if (this.overrides.pause) return this.overrides.pause(taskId);
    return { record: record({ scheduleType: 'cron', status: 'paused' }), status: 'paused', dependencies: [] };
  }

  async resume(taskId: string): Promise<TaskView> {
    this.calls.push({ method: 'resume', args: [taskId] });
    if (this.overrides.resume) return this.overrides.resume(taskId);
    return { record: record({ scheduleType: 'cron', status: 'active' }), status: 'active', dependencies: [] };
  }

  async history(taskId: string, limit: number, nextToken?: string): ReturnType<TasksApi['history']> {
    this.calls.push({ method: 'history', args: [taskId, limit, nextToken] });
    if (this.overrides.history) return this.overrides.history(taskId, limit, nextToken);
    const execution: ExecutionRecord = {
      executionId: '0192f3a4-5b6c-7d8e-9f00-aaaaaaaaaaaa',
      taskId,
      attempt: 1,
      status: 'succeeded',
      dueMs: NOW_MS - 2000,
      startedMs: NOW_MS - 1500,
      completedMs: NOW_MS - 1000,
      workerId: 'w-1',
      error: null,
      result: null,
    };
    return { executions: [execution], nextToken: null };
  }

  async release(assignments: readonly Assignment[]): Promise<void> {
    this.calls.push({ method: 'release', args: [assignments] });
  }

  async poll(request: PollRequest, signal?: AbortSignal): Promise<Assignment[]> {
    this.calls.push({ method: 'poll', args: [request, signal] });
    if (signal) this.pollSignals.push(signal);
    if (this.overrides.poll) return this.overrides.poll(request, signal);
    return [
      {
        id: KNOWN_ID,
        taskType: request.taskTypes[0] ?? 'x',
        payload: { n: 1 },
        attempt: 1,
        version: 2,
        leaseExpiresMs: NOW_MS + 60_000,
        deadlineMs: NOW_MS + 60_000,
        timeoutSeconds: 60,
        partition: 7,
        leaseToken: 'lt1.2',
        dueMs: NOW_MS,
      },
    ];
  }

  async heartbeat(taskId: string, leaseToken: string, extendSeconds?: number): Promise<ExtendedLease> {
    this.calls.push({
      method: 'heartbeat',
      args: extendSeconds === undefined ? [taskId, leaseToken] : [taskId, leaseToken, extendSeconds],
    });
    if (this.overrides.heartbeat) return this.overrides.heartbeat(taskId, leaseToken, extendSeconds);
    if (leaseToken === 'lost') throw new WheelhouseError('lease_not_held');
    return { leaseExpiresMs: NOW_MS + 60_000, deadlineMs: NOW_MS + 60_000, cancelRequested: false };
  }

  async complete(results: CompletionRequest[]): Promise<{ taskId: string; ok: boolean }[]> {
    this.calls.push({ method: 'complete', args: [results] });
    if (this.overrides.complete) return this.overrides.complete(results);
    return results.map((r) => ({ taskId: r.taskId, ok: r.leaseToken !== 'lost' }));
  }

  async progress(
    updates: { taskId: string; leaseToken: string; progress: unknown }[],
  ): Promise<{ taskId: string; ok: boolean }[]> {
    this.calls.push({ method: 'progress', args: [updates] });
    if (this.overrides.progress) return this.overrides.progress(updates);
    return updates.map((u) => ({ taskId: u.taskId, ok: u.leaseToken !== 'lost' }));
  }

  async isReady(): Promise<boolean> {
    this.calls.push({ method: 'isReady', args: [] });
    if (this.overrides.isReady) return this.overrides.isReady();
    return this.ready;
  }
}

/** A logger that keeps what was logged at warn and above. */
export function captureLogger(): {
  logger: FastifyBaseLogger;
  entries: { level: string; obj: unknown; msg: unknown }[];
} {
  const entries: { level: string; obj: unknown; msg: unknown }[] = [];
  const keep =
    (level: string) =>
    (obj: unknown, msg?: unknown): void => {
      entries.push({ level, obj, msg });
    };
  const noop = (): void => undefined;
  const logger = {
    level: 'info',
    fatal: keep('fatal'),
    error: keep('error'),
    warn: keep('warn'),
    info: noop,
    debug: noop,
    trace: noop,
    silent: noop,
    child: () => logger,
  } as unknown as FastifyBaseLogger;
  return { logger, entries };
}

/** A worker channel that takes no worker: the route is served (auth, schema), its sockets refused. */
const closedChannel: WorkerChannelApi = {
  heartbeatMs: 5_000,
  frames: { queuedBytes: 0, peakQueuedBytes: 0, peakBufferedBytes: 0, paused: 0 },
  open: () => Promise.reject(new WheelhouseError('not_ready', 'this test server runs no worker channel')),
  credit: () => undefined,
  closed: () => undefined,
  spawn: () => Promise.reject(new WheelhouseError('not_ready', 'this test server runs no worker channel')),
  stop: () => undefined,
};

/** Children are tested through real nodes (test/e2e/children.test.ts): here no task runs. */
const noChildren: ChildrenApi = {
  spawnChildren: (id) => Promise.reject(new WheelhouseError('task_not_found', `no task ${id}`)),
  listChildren: (id) => Promise.reject(new WheelhouseError('task_not_found', `no task ${id}`)),
};

/** Operations are tested through real nodes (test/e2e/operations*.test.ts): here none exists. */
const noOperations: OperationsApi = {
  start: () => Promise.reject(new WheelhouseError('internal', 'the fake server runs no operations')),
  get: (id) => Promise.reject(new WheelhouseError('not_found', `no operation ${id}`)),
  list: () => Promise.resolve({ operations: [], nextToken: null }),
  cancel: (id) => Promise.reject(new WheelhouseError('not_found', `no operation ${id}`)),
};

/** A server over a fresh fake, with silent logs unless a logger is given. */
export function serverWith(
  options: WheelhouseOptions = {},
  extra: {
    api?: FakeApi;
    logger?: FastifyBaseLogger;
    metrics?: () => string;
    extraPlugins?: readonly FastifyPluginAsync[];
    dashboardDir?: string;
    /** The limits service; without one, one over a fresh memory store (test/http/fake-limits.ts). */
    limits?: LimitsApi;
  } = {},
): { app: FastifyInstance; api: FakeApi } {
  const api = extra.api ?? new FakeApi();
  const compiled = compileOptions({ logLevel: 'silent', builtinExecutors: false, ...options });
  const keys = new ApiKeys({ store: new ListKeyStore(), adminSecret: compiled.adminToken });
  const app = buildServer({
    services: {
      tasks: api,
      schedules: api,
      dags: api,
      workers: api,
      health: api,
      explain: api,
      limits: extra.limits ?? memoryLimits().service,
      keys,
      operations: noOperations,
      children: noChildren,
    },
    channel: closedChannel,
    options: compiled,
    ...(extra.logger ? { logger: extra.logger } : {}),
    ...(extra.metrics ? { metrics: extra.metrics } : {}),
    ...(extra.extraPlugins ? { extraPlugins: extra.extraPlugins } : {}),
    ...(extra.dashboardDir ? { dashboardDir: extra.dashboardDir } : {}),
  });
  return { app, api };
}

/** The keys of a fake server, in a list (the SQL store is tested through real nodes). */
class ListKeyStore implements ApiKeyStore {
  private readonly keys: (ApiKeyRecord & { revoked: boolean })[] = [];

  async insert(key: Omit<ApiKeyRecord, 'createdMs'>): Promise<ApiKeyRecord> {
    const stored = { ...key, createdMs: Date.now(), revoked: false };
    this.keys.push(stored);
    return stored;
  }

  async live(): Promise<ApiKeyRecord[]> {
    return this.keys.filter((k) => !k.revoked);
  }

  async anyMade(): Promise<boolean> {
    return this.keys.length > 0;
  }

  async revoke(keyId: string): Promise<boolean> {
    const key = this.keys.find((k) => k.keyId === keyId && !k.revoked);
    if (key !== undefined) key.revoked = true;
    return key !== undefined;
  }
}
