import { isSampled, recordHop } from '../lib/otel.js';
import type { DueEntry } from '../domain/model.js';

/**
 * The spans of the hops the actors make (docs/decisions/0038-tracing.md): a wheel partition's
 * fire (due entries moved to the ready queue) and a dependent's release (its last predecessor
 * ended). Called only when `tracingOn()`; an entry without a context, or whose context is not
 * sampled, makes no span.
 */

export const FIRE_SPAN = 'wheelhouse.fire';
export const RELEASE_SPAN = 'wheelhouse.release';

/** A fire span per entry pushed to the ready queue. The attempt is not known before the claim: 0. */
export function traceFired(entries: readonly DueEntry[], partition: number): void {
  for (const entry of entries) {
    if (entry.traceparent === undefined || !isSampled(entry.traceparent)) continue;
    recordHop(
      FIRE_SPAN,
      entry.traceparent,
      { taskId: entry.taskId, taskType: entry.taskType, attempt: 0, partition },
      undefined,
      'wheelhouse.task.due_ms',
      entry.dueMs,
    );
  }
}

/** The release span of a dependent whose predecessors have all succeeded. */
export function traceReleased(entry: DueEntry, partition: number): void {
  if (entry.traceparent === undefined || !isSampled(entry.traceparent)) return;
  recordHop(RELEASE_SPAN, entry.traceparent, { taskId: entry.taskId, taskType: entry.taskType, attempt: 0, partition });
}
