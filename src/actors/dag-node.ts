import { defineKind, type ActorContext, type Ask, type Behavior } from '../runtime/actor.js';
import { tracingOn } from '../lib/otel.js';
import { traceReleased } from './hop-spans.js';
import type { NodeEventSink } from '../domain/events.js';
import type { Dependents, Placing } from './ports.js';
import type { DagOutcome } from '../store/dag-types.js';

/**
 * A task that waits on predecessors: one actor per blocked task (`("dag", task_id)`). Its
 * state — the edges, each satisfied or not, and the satisfied count against the total —
 * lives in Postgres (`task_dependencies` and the task row), so the actor holds nothing a
 * crash could lose and passivates as soon as it is idle: 100 000 blocked tasks are 100 000
 * rows, not 100 000 live actors.
 *
 * Every message is a hint; what the actor does is always the same: reconcile its task from
 * the task table (`DagStore.reconcile`). An edge to a predecessor that succeeded is counted
 * once however often this runs, so a replayed or duplicated `predecessor_succeeded` never
 * counts twice, and a message lost to a crash changes nothing that the next reconcile (the
 * outbox replay, the sweep) does not make up. The first message of an activation is
 * therefore also its reconcile-on-activation.
 *
 * When all predecessors have succeeded the task becomes `pending` (due at the later of its
 * own due time and now) and the actor puts it on the wheel; when one failed or was
 * cancelled the task is cancelled naming it, and its own dependents hear of it through the
 * outbox. Either way the actor has nothing left to do and stops.
 *
 * A parent waiting for its children (`waiting`, docs/decisions/0033-waiting-for-children.md)
 * is the same actor: its unfinished children are its predecessors. All ended makes it
 * `pending` again; a child that did not succeed, under `on_child_failure: fail`, makes it
 * `failed` (its own dependents hear of it as of any failure).
 */
export const DAG = defineKind<DagMessage>('dag');

/** What a message did: the task's new status, or `unchanged` (still waiting, or no longer blocked). */
export interface DagNodeReply {
  status: DagOutcome['status'] | 'unchanged';
}

export type DagMessage =
  /** These predecessors succeeded. */
  | Ask<{ type: 'predecessor_succeeded'; predecessorIds: string[] }, DagNodeReply>
  /** These predecessors failed for good or were cancelled. */
  | Ask<{ type: 'predecessor_failed'; predecessorIds: string[] }, DagNodeReply>
  /** Look again (the sweep, an operator). */
  | Ask<{ type: 'reconcile' }, DagNodeReply>;

export interface DagNodeState {
  /** Messages handled by this activation. */
  handled: number;
  /** The last reconcile's result. */
  last: DagNodeReply['status'] | null;
}

export interface DagNodeDeps {
  /** Reconciles one task; the node merges concurrent calls into one statement. null: nothing changed. */
  reconcile(taskId: string): Promise<DagOutcome | null>;
  /** Puts a task that became pending on its wheel partition. */
  placement: Pick<Placing, 'placeSoon'>;
  /** A task cancelled here that has dependents: they must hear of it (its outbox event is written). */
  dependents: Pick<Dependents, 'finished'>;
  events: NodeEventSink;
  /** Idle time before a waiting actor leaves memory. */
  idlePassivationMs: number;
}

export function dagNodeBehavior(deps: DagNodeDeps): Behavior<DagNodeState, DagMessage> {
  return {
    kind: DAG,
    persistence: 'external',
    idlePassivationMs: deps.idlePassivationMs,
    activate: () => Promise.resolve({ handled: 0, last: null }),
    /** Its reconciled state: how many times it looked, and what the last look found. */
    describe: (state) => ({ reconciles: state.handled, lastStatus: state.last }),
    async receive(state: DagNodeState, message: DagMessage, ctx: ActorContext<DagMessage>): Promise<DagNodeState> {
      const outcome = await deps.reconcile(ctx.key);
      state.handled++;
      state.last = outcome?.status ?? 'unchanged';
      if (outcome?.due) {
        if (tracingOn()) traceReleased(outcome.due, outcome.partition ?? 0);
        deps.placement.placeSoon([outcome.due]);
        deps.events.emit('dag:released', { taskId: ctx.key, status: 'pending' });
      } else if (outcome?.status === 'cancelled' || outcome?.status === 'failed') {
        deps.events.emit('dag:released', { taskId: ctx.key, status: outcome.status });
      }
      if (outcome?.notifyDependents) deps.dependents.finished([{ predecessorId: ctx.key, status: outcome.status }]);
      // Released, cancelled or failed: this task waits on nothing any more.
      if (outcome !== null && outcome.status !== 'blocked' && outcome.status !== 'waiting') ctx.stop();
      ctx.reply(message, { status: state.last });
      return state;
    },
  };
}
