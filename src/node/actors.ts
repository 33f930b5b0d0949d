import type { ScheduleWrite, ScheduleWriteResult } from '../store/types.js';
import type { ScheduleRecord } from '../domain/model.js';
import { WriteBatcher } from '../lib/write-batcher.js';
import { CronActivation } from '../actors/cron-activation.js';
import { DagResolver } from '../actors/dag-resolver.js';
import { WheelPlacement } from '../actors/wheel-placement.js';
import { cronScheduleBehavior } from '../actors/cron-schedule.js';
import { dagNodeBehavior } from '../actors/dag-node.js';
import { wheelPartitionBehavior } from '../actors/wheel-partition.js';
import { LEASE, workerLeaseBehavior } from '../actors/worker-lease.js';
import { LeaseBook } from '../actors/lease-book.js';
import type { DutyFailure, DutyFailuresEnded } from '../runtime/supervision.js';
import type { ActorSystem } from '../runtime/system.js';
import type { DagOutcome } from '../store/dag-types.js';

import type { NodeContext } from './context.js';

/** How long a dependent's actor may take to take in a finished predecessor. */
const DAG_ASK_MS = 60_000;

/** What the actors use beside them, built once per node. */
export interface ActorHelpers {
  wheel: WheelPlacement;
  resolver: DagResolver;
  activation: CronActivation;
  /** This node's passive leases. */
  leases: LeaseBook;
}

/**
 * Registers the four actor kinds of a node, with the helpers beside them: the wheel placement,
 * the DAG resolver, the schedules' activation and the lease book. Schedule writes and DAG reconciles made by
 * many actors in one event-loop turn go to Postgres together.
 */
export function registerActorKinds(
  ctx: NodeContext,
  system: ActorSystem,
  duties: {
    onDutyFailure(error: unknown, failure: DutyFailure): void;
    onDutyEnded(ended: DutyFailuresEnded): void;
  },
): ActorHelpers {
  const { options, backend, clock, events, onError } = ctx;
  const wheel = new WheelPlacement({
    system,
    buckets: backend.buckets,
    clock,
    partitions: options.partitions,
    onDutyFailure: duties.onDutyFailure,
    onDutyEnded: duties.onDutyEnded,
  });
  const resolver = new DagResolver({ dags: backend.dags, system, clock, askTimeoutMs: DAG_ASK_MS, events, onError });
  const activation = new CronActivation(system, onError);
  system.register(
    wheelPartitionBehavior({
      tasks: backend.tasks,
      schedules: backend.schedules,
      wakes: activation,
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
      backoff: ctx.backoff,
      placement: wheel,
      dependents: resolver,
      events,
      onError,
    }),
  );
  const leases = new LeaseBook(system, clock);
  system.registerPassive(LEASE, leases);
  const scheduleWrites = new WriteBatcher<ScheduleWrite, ScheduleWriteResult>((writes) =>
    backend.schedules.write(writes, clock.now()),
  );
  // The actors a wheel's tick wakes together read their rows in one statement.
  const scheduleReads = new WriteBatcher<string, ScheduleRecord | null>((ids) => backend.schedules.getMany(ids));
  system.register(
    cronScheduleBehavior({
      schedules: { get: (id) => scheduleReads.submit(id) },
      write: (w) => scheduleWrites.submit(w),
      placement: wheel,
      partitions: options.partitions,
      misfireThresholdMs: options.cronMisfireThresholdMs,
      fireAllLimit: options.cronFireAllLimit,
      advanceSpreadMs: options.cronAdvanceSpreadMs,
      awakeIntervalMs: options.cronAwakeIntervalMs,
      preloaded: activation,
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
      placement: wheel,
      dependents: resolver,
      events,
      idlePassivationMs: options.dagIdlePassivationMs,
    }),
  );
  return { wheel, resolver, activation, leases };
}
