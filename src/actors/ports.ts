import type { DueEntry, StoredStatus, Transition } from '../domain/model.js';

/**
 * What actors ask of the two node-wide helpers beside them, as interfaces so that an actor
 * depends on neither module: `WheelPlacement` (wheel-placement.ts) puts due entries on their
 * partitions, `DagResolver` (dag-resolver.ts) carries "this task ended" to its dependents.
 */

/** Puts due entries on their wheel partitions. */
export interface Placing {
  /** With the others of this event-loop turn, one message per partition. Never throws. */
  placeSoon(entries: readonly DueEntry[]): void;
  /** Places the tasks that went back to `pending` (retries, expired leases). Never rejects. */
  requeue(transitions: readonly Transition[]): Promise<void>;
}

/** "This predecessor ended", for its dependents. */
export interface FinishedEvent {
  predecessorId: string;
  status: StoredStatus;
}

/** Tells dependents that their predecessors ended. Never throws. */
export interface Dependents {
  finished(events: FinishedEvent[]): void;
  /** The transitions that end a task with dependents (`notifyDependents`). */
  transitions(transitions: readonly Transition[]): void;
}

/** Tells schedules' actors that their wake time came (the wheel, the safety net). */
export interface ScheduleWakes {
  /**
   * Tells each schedule of these wakes (`scheduleWake` entries) that its wake time came.
   * Never throws: a wake that cannot be delivered is reported, and the safety net finds it.
   */
  wake(wakes: readonly DueEntry[]): void;
}
