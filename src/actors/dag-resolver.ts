import { DAG, type DagMessage } from './dag-node.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import type { Cancel, Clock } from '../runtime/clock.js';
import type { Transition } from '../domain/model.js';
import type { Dependents, FinishedEvent } from './ports.js';
import type { NodeEventSink } from '../domain/events.js';
import type { DagStore } from '../store/dag-types.js';
import { WriteBatcher } from '../lib/write-batcher.js';

/**
 * Carries "this predecessor ended" to the actors of its blocked dependents, event by event:
 * nothing here scans the task table on the normal path.
 *
 * - Live: whatever makes a task with dependents final (a result, an expired lease, a cancel,
 *   a DAG actor cancelling its own task) also writes its outbox event in the same statement,
 *   and hands the event here. Events of one event-loop turn go together: one lookup of their
 *   blocked dependents (the predecessor index), one message per dependent's actor, then one
 *   DELETE of the events — only once every dependent has answered.
 * - Replay: events left in the outbox (the node died between the two steps, an actor's
 *   answer failed) are delivered again, at start and periodically. Delivery is idempotent.
 * - Sweep: the safety net. It pages through the blocked tasks and reconciles any that a
 *   reconcile would change and that no outbox event covers. It should find nothing; what it
 *   finds is counted (`wheelhouse_safety_net_recovered_total{kind="blocked"}`).
 */

export interface DagResolverDeps {
  dags: DagStore;
  system: ActorSystemApi;
  clock: Clock;
  /** How long a dependent's actor may take to answer. */
  askTimeoutMs: number;
  onError(error: unknown, context: string): void;
  /** `dag:replayed` for events taken from the outbox by a replay; `safety-net:recovered` (kind `blocked`) for blocked tasks the sweep found stuck and reconciled. */
  events: NodeEventSink;
}

/** Outbox events younger than this are the live path's to deliver, not the replay's. */
const REPLAY_AFTER_MS = 5_000;
/** Events per replay page, and blocked tasks per sweep page. */
const PAGE = 1_000;
/** Dependents told at once. */
const DELIVERY_SLICE = 5_000;
/**
 * Outbox rows delivered by the live path are deleted together, this long after the first
 * of them: one DELETE for many deliveries. A row deleted late is harmless (the replay only
 * takes rows older than REPLAY_AFTER_MS, and a delivery twice counts nothing twice).
 */
const CLEAR_AFTER_MS = 50;

export class DagResolver implements Dependents {
  private readonly batcher: WriteBatcher<FinishedEvent, void>;
  private readonly delivered = new Set<string>();
  private clearing: Cancel | null = null;

  constructor(private readonly deps: DagResolverDeps) {
    this.batcher = new WriteBatcher<FinishedEvent, void>(
      async (events) => {
        await this.deliver(events);
        this.clearLater(events.map((e) => e.predecessorId));
        return events.map(() => undefined);
      },
      PAGE,
      4,
    );
  }

  /** Deletes delivered outbox rows in one statement per CLEAR_AFTER_MS. */
  private clearLater(ids: string[]): void {
    for (const id of ids) this.delivered.add(id);
    this.clearing ??= this.deps.clock.setTimer(CLEAR_AFTER_MS, () => {
      this.clearing = null;
      const batch = [...this.delivered];
      this.delivered.clear();
      this.deps.dags
        .clearEvents(batch)
        .catch((error: unknown) =>
          this.deps.onError(error, `${batch.length} delivered outbox rows stay until the replay`),
        );
    });
  }

  /** Stops the deferred delete (the rows stay and are delivered again, harmlessly). */
  stop(): void {
    this.clearing?.();
    this.clearing = null;
  }

  /** Tells the dependents of tasks that ended (results, expired leases, cancels). */
  transitions(transitions: readonly Transition[]): void {
    const events = transitions
      .filter((t) => t.notifyDependents)
      .map((t) => ({ predecessorId: t.taskId, status: t.status }));
    if (events.length > 0) this.finished(events);
  }

  /** Predecessors that just ended and have dependents (their outbox events are written). Never throws. */
  finished(events: FinishedEvent[]): void {
    for (const event of events) {
      this.batcher
        .submit(event)
        .catch((error: unknown) =>
          this.deps.onError(error, `dependents of ${event.predecessorId} not told yet (the outbox replay will)`),
        );
    }
  }

  /** Delivers outbox events older than `REPLAY_AFTER_MS` (all of them with `all`); answers how many. */
  async replay(all = false): Promise<number> {
    const before = all ? Number.MAX_SAFE_INTEGER / 2 : this.deps.clock.now() - REPLAY_AFTER_MS;
    let total = 0;
    // Each delivered page is deleted, so the next read starts after it; a page that fails
    // stops the replay until its next round.
    for (;;) {
      const events = await this.deps.dags.pendingEvents(before, PAGE);
      if (events.length === 0) break;
      await this.deliver(events);
      await this.deps.dags.clearEvents(events.map((e) => e.predecessorId));
      total += events.length;
      if (events.length < PAGE) break;
    }
    if (total > 0) this.deps.events.emit('dag:replayed', { count: total });
    return total;
  }

  /** Reconciles blocked tasks that nothing else would reach; answers how many it found. */
  async sweep(): Promise<number> {
    const settledBefore = this.deps.clock.now() - REPLAY_AFTER_MS;
    let found = 0;
    for (let after: string | null = null; ;) {
      const page: { ids: string[]; next: string | null } = await this.deps.dags.stuck(after, PAGE, settledBefore);
      found += page.ids.length;
      await Promise.all(page.ids.map((id) => this.ref(id).ask({ type: 'reconcile' }, this.deps.askTimeoutMs)));
      if (page.next === null) break;
      after = page.next;
    }
    if (found > 0) this.deps.events.emit('safety-net:recovered', { kind: 'blocked', count: found });
    return found;
  }

  /** Tells every blocked dependent of these predecessors; resolves once all have answered. */
  private async deliver(events: FinishedEvent[]): Promise<void> {
    const statusOf = new Map(events.map((e) => [e.predecessorId, e.status]));
    // Looked up in a statement of its own, after the predecessor's end committed: the
    // statement that ended it could not see edges whose submission it waited for (its
    // snapshot predates them), this one can.
    const waiting = await this.deps.dags.dependents([...statusOf.keys()]);
    // A wide fan-out (a root with 100 000 dependents) is told a slice at a time, so that a
    // delivery holds at most a slice of live actors (and the batcher runs at most 4
    // deliveries); each slice is a few reconcile statements.
    for (let start = 0; start < waiting.length; start += DELIVERY_SLICE) {
      await Promise.all(
        waiting.slice(start, start + DELIVERY_SLICE).map(({ taskId, predecessorIds }) => {
          const failed = predecessorIds.filter((id) => statusOf.get(id) !== 'succeeded');
          const message: DagMessage =
            failed.length > 0
              ? { type: 'predecessor_failed', predecessorIds: failed }
              : { type: 'predecessor_succeeded', predecessorIds };
          return this.ref(taskId).ask(message, this.deps.askTimeoutMs);
        }),
      );
    }
  }

  private ref(taskId: string) {
    return this.deps.system.ref(DAG, taskId);
  }
}
