import type { NodeEventSink } from '../domain/events.js';
import type { BackoffPolicy } from '../domain/model.js';
import type { ScheduleWrite, ScheduleWriteResult } from '../store/types.js';
import type { CompiledOptions } from '../lib/config.js';
import { WriteBatcher } from '../lib/write-batcher.js';
import type { CronActivation } from '../actors/cron-activation.js';
import { cronScheduleBehavior } from '../actors/cron-schedule.js';
import { dagNodeBehavior } from '../actors/dag-node.js';
import type { Dependents, Placing } from '../actors/ports.js';
import { wheelPartitionBehavior } from '../actors/wheel-partition.js';
import { workerLeaseBehavior } from '../actors/worker-lease.js';
import type { Clock } from '../runtime/clock.js';
import type { ActorSystem } from '../runtime/system.js';
import type { Backend } from '../store/backend.js';
import type { DagOutcome } from '../store/dag-types.js';

export interface ActorKindsDeps {
  options: CompiledOptions;
  backend: Backend;
  clock: Clock;
  backoff: BackoffPolicy;
  placement: Placing;
  dependents: Dependents;
  activation: CronActivation;
  events: NodeEventSink;
  onError(error: unknown, context: string): void;
}

/**
 * Registers the four actor kinds of a node with their dependencies. Schedule writes and DAG
 * reconciles made by many actors in one event-loop turn go to Postgres together.
 */
export function registerActorKinds(system: ActorSystem, deps: ActorKindsDeps): void {
  const { options, backend, clock, events, onError } = deps;
  system.register(
    wheelPartitionBehavior({
      tasks: backend.tasks,
      buckets: backend.buckets,
      ready: backend.ready,
      slotMs: options.slotMs,
      nearWindowMs: options.nearWindowMs,
      events,
      onError,
    }),
  );
  system.register(
    workerLeaseBehavior({
      tasks: backend.tasks,
      backoff: deps.backoff,
      placement: deps.placement,
      dependents: deps.dependents,
      events,
      onError,
    }),
  );
  const scheduleWrites = new WriteBatcher<ScheduleWrite, ScheduleWriteResult>((writes) =>
    backend.schedules.write(writes, clock.now()),
  );
  system.register(
    cronScheduleBehavior({
      schedules: backend.schedules,
      write: (w) => scheduleWrites.submit(w),
      placement: deps.placement,
      partitions: options.partitions,
      misfireThresholdMs: options.cronMisfireThresholdMs,
      fireAllLimit: options.cronFireAllLimit,
      advanceSpreadMs: options.cronAdvanceSpreadMs,
      preloaded: deps.activation,
      events,
      onError,
    }),
  );
  const reconciles = new WriteBatcher<string, DagOutcome | null>(async (ids) => {
    const outcomes = new Map((await backend.dags.reconcile(ids, clock.now())).map((o) => [o.taskId, o]));
    return ids.map((id) => outcomes.get(id) ?? null);
  });
  system.register(
    dagNodeBehavior({
      reconcile: (id) => reconciles.submit(id),
      placement: deps.placement,
      dependents: deps.dependents,
      events,
      idlePassivationMs: options.dagIdlePassivationMs,
    }),
  );
}
