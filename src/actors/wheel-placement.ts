import { WHEEL } from './wheel-partition.js';
import { partitionOf } from '../lib/ids.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import type { Cancel, Clock } from '../runtime/clock.js';
import { retryUntilDone, type DutyFailure, type DutyFailuresEnded } from '../runtime/supervision.js';
import type { DueEntry, Transition } from '../domain/model.js';
import type { Placing } from './ports.js';
import type { BucketStore } from '../store/fast-index-types.js';

export interface WheelPlacementDeps {
  system: ActorSystemApi;
  /** Where entries go when their partition cannot be reached. */
  buckets: Pick<BucketStore, 'add'>;
  clock: Clock;
  partitions: number;
  /** A placement that failed goes on being tried; each failure is told here. */
  onDutyFailure(error: unknown, failure: DutyFailure): void;
  /** A placement that had failed succeeded at last (or was stopped). @default ignored */
  onDutyEnded?(ended: DutyFailuresEnded): void;
}

/** How long a placement waits for its partition to take the entries. */
const SCHEDULE_ASK_MS = 10_000;
/** How a placement that neither the partition nor its buckets took is retried. */
const PLACEMENT_RETRY = { baseMs: 250, maxMs: 5_000 };

/**
 * Hands due entries (new tasks, retries, released or unblocked ones, cron instances) to their
 * wheel partitions, one message per partition. When a partition does not answer (its node
 * died and the ring has not dropped it yet, or it is overloaded), the entries go straight into
 * its minute buckets instead: its next activation reloads only the near window from the task
 * table, and a bucket of a minute it already loaded is taken by its next `verify` (within a
 * second). When both fail, the placement is retried in the background with backoff until one
 * succeeds: the task is in Postgres either way, and should this node die first, the
 * partition's safety net hands it on once it is overdue.
 */
export class WheelPlacement implements Placing {
  /** Placements being retried, cancelled at `stop`. */
  private readonly retries = new Set<Cancel>();
  /** Numbers the placements retried, so that each is a subject of its own in the reports. */
  private retried = 0;

  constructor(private readonly deps: WheelPlacementDeps) {}

  /** Entries handed to `placeSoon` this event-loop turn. */
  private soon: DueEntry[] = [];

  /**
   * Places the entries with the others of this event-loop turn: a batch of schedule writes, of
   * reconciles, of expired leases goes to each partition in one message, not one per task.
   */
  placeSoon(entries: readonly DueEntry[]): void {
    if (entries.length === 0) return;
    if (this.soon.length === 0) setImmediate(() => void this.place(this.soon.splice(0)));
    this.soon.push(...entries);
  }

  /** Places the tasks that went back to `pending` (retries, expired leases). Never rejects. */
  requeue(transitions: readonly Transition[]): Promise<void> {
    const entries = transitions.flatMap((t) => (t.requeued ? [t.requeued] : []));
    return entries.length === 0 ? Promise.resolve() : this.place(entries);
  }

  /** Places the entries (or hands them to a background retry); never rejects. */
  async place(entries: readonly DueEntry[]): Promise<void> {
    const byPartition = new Map<number, DueEntry[]>();
    for (const entry of entries) {
      const partition = partitionOf(entry.taskId, this.deps.partitions);
      const list = byPartition.get(partition);
      if (list) list.push(entry);
      else byPartition.set(partition, [entry]);
    }
    await Promise.all(
      [...byPartition].map(async ([partition, list]) => {
        try {
          await this.placeOnce(partition, list);
        } catch (error) {
          this.retry(partition, list, error);
        }
      }),
    );
  }

  /** Stops the retries: their tasks are pending in Postgres, where the partitions find them. */
  stop(): void {
    for (const cancel of this.retries) cancel();
    this.retries.clear();
  }

  /** The partition, or else its buckets; rejects when neither took the entries. */
  private async placeOnce(partition: number, list: DueEntry[]): Promise<void> {
    try {
      await this.deps.system.ref(WHEEL, String(partition)).ask({ type: 'schedule', entries: list }, SCHEDULE_ASK_MS);
    } catch (error) {
      try {
        await this.deps.buckets.add(partition, list);
      } catch (fallbackError) {
        throw new AggregateError(
          [error, fallbackError],
          `neither wheel partition ${partition} nor its buckets took ${list.length} entries`,
        );
      }
    }
  }

  private retry(partition: number, list: DueEntry[], first: unknown): void {
    const duty = 'placement';
    const subject = `partition ${partition} #${++this.retried}`;
    let failures = 1;
    this.deps.onDutyFailure(first, { duty, subject, attempt: 1, retryInMs: PLACEMENT_RETRY.baseMs });
    const retry = retryUntilDone(
      this.deps.clock,
      duty,
      () => this.placeOnce(partition, list),
      (error, failure) => {
        failures++;
        this.deps.onDutyFailure(error, { ...failure, subject, attempt: failure.attempt + 1 });
      },
      PLACEMENT_RETRY,
      PLACEMENT_RETRY.baseMs,
    );
    const ended = (outcome: DutyFailuresEnded['outcome']): void =>
      this.deps.onDutyEnded?.({ duty, subject, failures, outcome });
    const cancel = (): void => {
      retry.cancel();
      ended('abandoned');
    };
    this.retries.add(cancel);
    void retry.done.then(() => {
      this.retries.delete(cancel);
      ended('recovered');
    });
  }
}
