import type { CronActivation } from '../actors/cron-activation.js';
import type { DagResolver } from '../actors/dag-resolver.js';
import type { WheelPlacement } from '../actors/wheel-placement.js';
import type { LeaseBook } from '../actors/lease-book.js';
import type { ActorSystem } from '../runtime/system.js';
import type { ActorInfo } from '../runtime/actor.js';
import { ApiKeys } from '../services/api-keys.js';
import { DagService } from '../services/dag-service.js';
import { Dispatcher } from '../services/dispatcher.js';
import type { LimitGate } from '../services/limit-gate.js';
import { LIMIT } from '../actors/limit-key.js';
import { ScheduleService } from '../services/schedule-service.js';
import { Admission, TaskViews } from '../services/support.js';
import { TaskService } from '../services/task-service.js';
import type { Services } from '../services/types.js';
import { WorkerService } from '../services/worker-service.js';
import { WorkerChannel } from '../services/worker-channel.js';
import { ExplainService } from '../services/explain-service.js';
import { LimitsService } from '../services/limits-service.js';
import { MissingTasks } from '../services/missing-tasks.js';
import { CancelAftermath } from '../services/cancel-aftermath.js';
import { OPERATION_KIND, OperationRunner } from '../services/operation-runner.js';
import { OperationsService } from '../services/operations-service.js';
import { ClusterPresence, type ClusterPeers, type WorkerPresence } from '../services/worker-presence.js';
import { workerBehavior, workerSocketsBehavior } from '../actors/worker.js';

import type { NodeContext } from './context.js';

export interface ServiceDeps {
  system: ActorSystem;
  wheel: WheelPlacement;
  resolver: DagResolver;
  activation: CronActivation;
  leases: LeaseBook;
  gate: LimitGate;
  /** The ready backlog as last measured, for admission. */
  backlog(): number;
  /** Whether the node has finished starting (readiness). */
  started(): boolean;
  /** The node the ring names for an actor. */
  ownerOf(kind: string, key: string): string;
  /** One actor with its node, wherever in the live cluster it is held (null: nowhere). */
  inspect(kind: string, key: string): Promise<ActorInfo | null>;
  /** The other live nodes, for what is asked of every node (worker presence). */
  peers: ClusterPeers;
  /** Told of each limit declared, changed or removed through this node (its key's actor looks again). @default nothing */
  onLimitChanged?: (name: string) => void;
}

/** The services the HTTP face calls, and the dispatcher under the worker routes. */
export function buildServices(
  ctx: NodeContext,
  deps: ServiceDeps,
): {
  services: Services & { keys: ApiKeys };
  dispatcher: Dispatcher;
  channel: WorkerChannel;
  /** This node's own workers of a task type (the `/internal` presence route answers it). */
  presence(taskType: string): WorkerPresence;
  /** Runs the operations on many tasks this node owns. */
  operationRunner: OperationRunner;
} {
  const { options, backend, clock, events, onError } = ctx;
  const { system, wheel, resolver, activation } = deps;
  const { partitions } = options;
  const dispatcher = new Dispatcher({
    tasks: backend.tasks,
    ready: backend.ready,
    gate: deps.gate,
    clock,
    leases: deps.leases,
    pollMaxWaitMs: options.pollMaxWaitMs,
    events,
    onError,
  });
  const cancels = new CancelAftermath({ tasks: backend.tasks, resolver, clock, system, events });
  const workers = new WorkerService({
    tasks: backend.tasks,
    clock,
    system,
    leases: deps.leases,
    dispatcher,
    backoff: ctx.backoff,
    placement: wheel,
    resolver,
    events,
    cancels,
    onError,
  });
  const views = new TaskViews({ dags: backend.dags, clock });
  const admission = new Admission({ backlog: deps.backlog, readyBacklogLimit: options.readyBacklogLimit });
  const missing = new MissingTasks({ tasks: backend.tasks });
  const schedules = new ScheduleService({ tasks: backend.tasks, system, activation, views, missing, onError });
  const tasks = new TaskService({
    tasks: backend.tasks,
    schedules: backend.schedules,
    clock,
    partitions,
    admission,
    views,
    events,
    placement: wheel,
    cron: schedules,
    cancels,
    missing,
    catalog: ctx.limits,
    limits: {
      listScanRows: options.listScanRows,
      maxPageBytes: options.maxPageBytes,
      cronCheckBudgetMs: options.cronCheckBudgetMs,
    },
  });
  // The worker channel, and the two actor kinds through which the cluster reaches its sockets:
  // `worker` (placed by the ring) and `worker-sockets` (pinned to this node), registered here
  // because the second hands messages to the channel.
  const channel = new WorkerChannel({
    nodeId: options.nodeId,
    workers,
    dispatcher,
    system,
    clock,
    heartbeatMs: options.workerHeartbeatMs,
    children: tasks,
    onError,
    handedBack: (why, workerId, taskIds) =>
      ctx.log.warn(
        { worker: workerId, count: taskIds.length, tasks: taskIds.slice(0, 20) },
        `worker channel: handed claims back to their queues, attempts uncounted: ${why}`,
      ),
  });
  system.register(workerBehavior({ idlePassivationMs: Math.max(60_000, 3 * options.workerHeartbeatMs) }));
  system.register(workerSocketsBehavior(channel));
  const presence = (taskType: string): WorkerPresence => ({
    ...dispatcher.presence(taskType),
    connected: channel.connected(taskType),
  });
  const cluster = new ClusterPresence({ local: presence, peers: deps.peers });
  const explain = new ExplainService({
    tasks: backend.tasks,
    dags: backend.dags,
    ready: backend.ready,
    snapshots: backend.snapshots,
    clock,
    ownerOf: deps.ownerOf,
    holderOf: async (kind, key) => (await deps.inspect(kind, key))?.node ?? null,
    presence: (taskType) => cluster.of(taskType),
    missing,
    limits: {
      gatedKeys: (taskType, limits) => ctx.limits.gatedKeys(taskType, limits),
      resolve: (key) => ctx.limits.resolve(key),
      inspect: (key) => system.ref(LIMIT, key).ask({ type: 'inspect' }, 2_000),
    },
  });
  const operationRunner = new OperationRunner({
    operations: backend.operations,
    clock,
    nodeId: options.nodeId,
    ownerOf: (id) => deps.ownerOf(OPERATION_KIND, id),
    placement: wheel,
    cancels,
    onError,
    pageTasks: options.operationPageTasks,
  });
  const startRuns = (): void => {
    operationRunner.check().catch((error: unknown) => onError(error, 'starting the operations this node owns'));
  };
  const services: Services & { keys: ApiKeys } = {
    tasks,
    children: tasks,
    schedules,
    dags: new DagService({
      dags: backend.dags,
      tasks: backend.tasks,
      clock,
      partitions,
      admission,
      placement: wheel,
      events,
      missing,
      catalog: ctx.limits,
    }),
    workers,
    explain,
    limits: new LimitsService({
      store: backend.limits,
      clock,
      catalog: ctx.limits,
      // The key's own actor answers the live figures (its holders, its waiting tasks, its starts).
      live: {
        inspect: async (key) => {
          const v = await system.ref(LIMIT, key).ask({ type: 'inspect' }, 5_000);
          return { running: v.running, waiting: v.waiting, startsLastPeriod: v.startsLastPeriod };
        },
      },
      ...(deps.onLimitChanged === undefined ? {} : { onChanged: deps.onLimitChanged }),
    }),
    keys: new ApiKeys({ store: backend.apiKeys, adminSecret: options.adminToken }),
    operations: new OperationsService({ operations: backend.operations, clock, started: startRuns }),
    health: {
      isReady: async () =>
        deps.started() &&
        (await backend.ping().then(
          () => true,
          () => false,
        )),
    },
  };
  return { services, dispatcher, channel, presence, operationRunner };
}
