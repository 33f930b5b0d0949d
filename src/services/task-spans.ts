import { isSampled, openSubmit, recordHop, recordHopContext } from '../lib/otel.js';
import type { OpenHop } from '../lib/otel-hops.js';
import type { ClaimedTask, NewTask, Transition } from '../domain/model.js';

/**
 * The spans of a task's hops that the services make: submit, claim and result
 * (docs/decisions/0038-tracing.md). The callers ask `tracingOn()` first, so that a node without
 * tracing allocates nothing here per task.
 */

/** Span names, one per hop. */
export const SUBMIT_SPAN = 'wheelhouse.submit';
export const CLAIM_SPAN = 'wheelhouse.claim';
export const COMPLETE_SPAN = 'wheelhouse.complete';

/** Reads the stored `traceparent` of an existing task (a predecessor outside the submission). */
export type TraceparentLookup = (taskId: string) => Promise<string | null>;

/**
 * Before new tasks are written, with tracing on: starts each one's submit span and stores its
 * context as the task's `traceparent`; answers the spans, for {@link endSpans} once the
 * submission is placed. The parent is the context the task came with; for a dependent that
 * came with none, its first predecessor's: one in the same submission (its submit span), else
 * the stored one of the first existing predecessor (`lookup`: one read, only then).
 */
export async function startSubmits(rows: NewTask[], lookup: TraceparentLookup): Promise<OpenHop[]> {
  const spans = new Array<OpenHop>(rows.length);
  const byId = new Map<string, string>();
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as NewTask;
    let parent = row.traceparent ?? null;
    const deps = row.dependsOn;
    if (parent === null && deps !== undefined && deps.length > 0) {
      parent = deps.map((id) => byId.get(id)).find((p) => p !== undefined) ?? null;
      const external = deps.find((id) => !byId.has(id));
      if (parent === null && external !== undefined) parent = await lookup(external);
    }
    const span = openSubmit(SUBMIT_SPAN, parent, {
      taskId: row.id,
      taskType: row.taskType,
      attempt: 0,
      partition: row.partition,
    });
    spans[i] = span;
    row.traceparent = span.traceparent;
    byId.set(row.id, row.traceparent);
  }
  return spans;
}

/**
 * Before new tasks are written, with tracing off: the context a task came with is stored as it
 * is, and a dependent with none takes its first predecessor's within the submission (nothing
 * read). Allocates nothing for a submission without dependents.
 */
export function inheritWithin(rows: NewTask[]): void {
  let byId: Map<string, string> | null = null;
  for (const row of rows) {
    if (row.dependsOn === undefined || row.dependsOn.length === 0 || row.traceparent != null) continue;
    byId ??= new Map(rows.filter((r) => r.traceparent != null).map((r) => [r.id, r.traceparent as string]));
    const inherited = row.dependsOn.map((id) => byId!.get(id)).find((p) => p !== undefined);
    if (inherited === undefined) continue;
    row.traceparent = inherited;
    byId.set(row.id, inherited);
  }
}

/** Ends spans started by {@link startSubmits}. */
export function endSpans(spans: OpenHop[] | null): void {
  if (spans !== null) for (const span of spans) span.end();
}

/**
 * After a claim (tracing on): a claim span per claimed task that has a context, from
 * `startMs` to now, child of the task's; the task is handed to its worker with the claim
 * span's context, so that the worker's span is the claim's child.
 */
export function traceClaims(claimed: readonly ClaimedTask[], workerId: string, startMs: number): void {
  for (const task of claimed) {
    // Not sampled: no span, and the worker is handed the task's context as it is.
    if (task.traceparent === undefined || !isSampled(task.traceparent)) continue;
    task.traceparent = recordHopContext(
      CLAIM_SPAN,
      task.traceparent,
      { taskId: task.id, taskType: task.taskType, attempt: task.attempt, partition: task.partition },
      startMs,
      'wheelhouse.worker.id',
      workerId,
    );
  }
}

/** After results are recorded (tracing on): a span per ended attempt that has a context, from `startMs` to now. */
export function traceResults(transitions: readonly Transition[], startMs: number): void {
  for (const t of transitions) {
    if (t.traceparent === undefined || !isSampled(t.traceparent)) continue;
    recordHop(
      COMPLETE_SPAN,
      t.traceparent,
      { taskId: t.taskId, taskType: t.taskType, attempt: t.attempt ?? 0, partition: t.partition ?? 0 },
      startMs,
      'wheelhouse.task.status',
      t.status,
    );
  }
}
