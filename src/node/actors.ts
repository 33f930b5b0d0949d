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
import { LIMIT, limitKeyBehavior } from '../actors/limit-key.js';
import { LimitGate } from '../services/limit-gate.js';
import { gatedReadyQueue } from '../services/gated-ready-queue.js';
import { PermitReturns } from '../services/permit-returns.js';
import { MAX_CLAIM_ROWS } from '../services/poll-claims.js';
import type { DutyFailure, DutyFailuresEnded } from '../runtime/supervision.js';
import type { ActorSystem } from '../runtime/system.js';
import type { DagOutcome } from '../store/dag-types.js';
import type { LiveTasks } from '../store/limit-types.js';

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
  /** Between the fast index, the claims and the limit actors. */
  gate: LimitGate;
  /** How the limit actors cancel tasks for `on_limit` (set once the task service exists). */
  limitCancels: { cancel(taskIds: string[], reason: string): void };
}

/** How long a claim waits for a limit key's answer. */
const LIMIT_ASK_MS = 5_000;
/**
 * Most not-yet-granted tasks of a key (of weight 1) in the ready queue at once: the rows of one
 * claim statement. A smaller window split a non-binding key's claims (the window was 256: a
 * claim of 1 000 slots took 256 at a time, each claim and its results frame costing as much as
 * one of 1 000, and W1L ran at 0.64 of W1 for it; docs/decisions/0030-admit-window.md). A key
 * whose concurrency or rate binds is held by its room, not by this.
 */
const LIMIT_ADMIT_WINDOW = MAX_CLAIM_ROWS;
/** How often a key with waiting tasks checks its holders against the task table. */
const LIMIT_RECONCILE_MS = 2_000;
/** Most limit keys of a departed node woken at one ring change (the rest wake on their next message). */
const LIMIT_WAKE_MAX = 10_000;
/**
 * Most waiting tasks a key reads at once on activation, and beyond those it may hold in each
 * later read (see `readMore` in src/actors/limit-key.ts). A flood's key read all its rows at
 * activation.
 */
const LIMIT_WAITING_LOAD = 2_048;
/** A key with unread waiting tasks reads the next batch once fewer than this wait: an eighth of a read. */
const LIMIT_READ_MORE_BELOW = LIMIT_WAITING_LOAD / 8;

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
  const gate = new LimitGate({ keys: ctx.limits, system, askTimeoutMs: LIMIT_ASK_MS, onError });
  const limitCancels = { cancel: (_taskIds: string[], _reason: string): void => undefined };
  // The keys a wheel's fire activates together read their holders in one statement, and
  // their waiting tasks (`readMore`) in another. A key may get more waiting tasks than it
  // asked for (the largest ask of the batch): it drops duplicates.
  const holderReads = new WriteBatcher<string, LiveTasks['running']>((keys) => backend.limits.holdersMany(keys));
  const waitingReads = new WriteBatcher<{ key: string; nowMs: number; beyond: number }, Omit<LiveTasks, 'running'>>(
    (reads) =>
      backend.limits.waitingMany(
        reads.map((r) => r.key),
        reads.reduce((latest, r) => Math.max(latest, r.nowMs), 0),
        LIMIT_WAITING_LOAD + reads.reduce((most, r) => Math.max(most, r.beyond), 0),
      ),
  );
  system.register(
    limitKeyBehavior({
      store: backend.limits,
      holders: (key) => holderReads.submit(key),
      waitingTasks: (key, nowMs, beyond = 0) => waitingReads.submit({ key, nowMs, beyond }),
      resolve: (key) => ctx.limits.resolve(key),
      reload: async () => {
        await ctx.limits.refresh(true);
      },
      handOn: (entries) => gate.offer(entries, true),
      ready: backend.ready,
      cancel: (taskIds, reason) => limitCancels.cancel(taskIds, reason),
      events,
      admitWindow: LIMIT_ADMIT_WINDOW,
      readMoreBelow: LIMIT_READ_MORE_BELOW,
      idlePassivationMs: options.limitIdleMs,
      reconcileMs: LIMIT_RECONCILE_MS,
    }),
  );
  new PermitReturns(gate).listen(ctx.events);
  // A node died holding live keys: the tasks parked in their memory would wait for the next
  // message to the key (a permit back, the safety net's offer). Wake each on its new owner now,
  // which reads its live tasks back from the task table.
  ctx.events.on('ring:changed', ({ nodes }) => {
    backend.limits
      .keysHeldOutside(nodes, LIMIT_WAKE_MAX)
      .then((keys) => {
        for (const key of keys) {
          try {
            system.ref(LIMIT, key).tell({ type: 'changed' });
          } catch {
            // A full mailbox: the key is busy, so awake.
          }
        }
      })
      .catch((error: unknown) => onError(error, 'waking the limit keys of a node that left'));
  });
  // A declaration changed (here or, as the catalog reads it again, on another node): the live
  // keys of this node apply it at once.
  ctx.limits.onChange(() => {
    for (const actor of system.list({ kind: LIMIT, limit: 1_000_000 })) {
      try {
        system.ref(LIMIT, actor.key).tell({ type: 'changed' });
      } catch {
        // A full mailbox: its next message applies the change anyway.
      }
    }
  });
  system.register(
    wheelPartitionBehavior({
      tasks: backend.tasks,
      schedules: backend.schedules,
      wakes: activation,
      buckets: backend.buckets,
      ready: gatedReadyQueue(backend.ready, gate, clock, (forget) => ctx.events.on('ring:changed', forget)),
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
  return { wheel, resolver, activation, leases, gate, limitCancels };
}
