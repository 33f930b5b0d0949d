import type { Clock } from '../runtime/clock.js';
import type { NodeEventSink } from '../domain/events.js';
import type { Dependents } from '../actors/ports.js';
import type { TaskStore } from '../store/types.js';

/**
 * Start deadlines (`start_deadline_seconds`): a task that has not started that long after it
 * was due ends `expired`, and its dependents are cancelled as for a failure. Each node ends
 * those of the wheel partitions it owns, once a second: one statement that reads, per
 * partition, only the entries of an index keyed by the deadline that have passed
 * (src/store/sql/start-deadlines.ts). The claim refuses such a task meanwhile, so a task
 * never starts after its start deadline, however late the sweep runs; the sweep only makes
 * the end visible (status, history, dependents) within about a second of the deadline.
 *
 * Why a sweep and not the wheel: the wheel holds one entry per task and hands due entries to
 * the ready queues; a second entry per task with a start deadline would double its memory and
 * its rebuilds for tasks that nearly always start in time. The index holds an entry only while
 * such a task is pending (docs/decisions/0022-deadlines.md).
 */
export interface StartDeadlinesDeps {
  tasks: Pick<TaskStore, 'expireUnstarted'>;
  clock: Clock;
  /** The wheel partitions this node owns now. */
  ownedPartitions(): number[];
  /** Tells the dependents of the tasks that expired (they are cancelled). */
  dependents: Pick<Dependents, 'transitions'>;
  events: NodeEventSink;
}

/** Most tasks one pass ends per partition; more wait for the next pass, a second later. */
export const START_DEADLINE_PAGE = 1_000;

export class StartDeadlines {
  constructor(private readonly deps: StartDeadlinesDeps) {}

  /** One pass over the owned partitions; answers how many tasks expired. */
  async sweep(): Promise<number> {
    const partitions = this.deps.ownedPartitions();
    if (partitions.length === 0) return 0;
    const expired = await this.deps.tasks.expireUnstarted(partitions, this.deps.clock.now(), START_DEADLINE_PAGE);
    if (expired.length === 0) return 0;
    this.deps.dependents.transitions(expired);
    this.deps.events.emit('task:expired', { transitions: expired });
    return expired.length;
  }
}
