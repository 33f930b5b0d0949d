import { tsParam } from './columns.js';

/**
 * SQL: a CTE writing the outbox event of each task of `done` that ended and has dependents,
 * in the statement that ends it (see migrations/000003_dags.sql). `$now` is the parameter
 * number of the time. No row for the common task that nobody waits on.
 */
export function dagEventsCte(now: number, done = 'done'): string {
  return `dag_event AS (
    INSERT INTO dag_events (predecessor_id, status, created_at)
    SELECT d.id, d.status, ${tsParam(now)} FROM ${done} d
    WHERE d.has_dependents AND d.status IN ('succeeded', 'failed', 'cancelled', 'expired')
    ON CONFLICT (predecessor_id) DO NOTHING
  )`;
}

/** A final status: what dependents must hear of. */
export function isFinal(status: string): boolean {
  return status === 'succeeded' || status === 'failed' || status === 'cancelled' || status === 'expired';
}
