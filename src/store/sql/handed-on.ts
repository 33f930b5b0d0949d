import type { TaskInputs } from '../../domain/model.js';

/**
 * What a claimed task is handed beside itself (src/store/sql/claim.ts): a resumed parent's
 * children summary, and a task's predecessors' results (`inputs`), each read in the claim's
 * own statement, and only for the tasks that have them.
 */

/**
 * SQL: how the children of a parent resumed after waiting for them ended, counted at its claim
 * (when every child it waited for has ended and committed), through `tasks_parent_idx`. Only
 * for a task that waited (`child_waits > 0`): the CASE spares every other claim the subquery.
 */
export const CHILDREN_SUMMARY = `CASE WHEN t.child_waits > 0 THEN (
    SELECT json_build_object('total', count(*), 'succeeded', count(*) FILTER (WHERE k.status = 'succeeded'),
                             'failed', count(*) FILTER (WHERE k.status = 'failed'),
                             'cancelled', count(*) FILTER (WHERE k.status IN ('cancelled', 'expired')))
    FROM tasks k WHERE k.parent_id = t.id) END AS children`;

/** Most predecessors whose results go with a task as `inputs` (by predecessor id); the rest are counted in `more`. */
export const MAX_INPUTS = 100;
/** Largest result (its JSON text, bytes) that goes with a task inline; a larger one is named in `omitted`. */
export const MAX_INPUT_BYTES = 16 * 1024;
/** Most bytes of results that go with one task inline, together; those past it are named in `omitted`. */
export const MAX_INPUTS_BYTES = 64 * 1024;

/**
 * SQL: what a task with predecessors (a DAG dependent, a parent resumed after its children)
 * is handed of their results: `inputs`, each predecessor's result by its id, for its first
 * MAX_INPUTS (100) predecessors by id (the edges' primary key, read in order, so a parent of
 * 10 000 children reads 100 edges); a result over MAX_INPUT_BYTES, or one that would take the
 * task's inline results past MAX_INPUTS_BYTES, is named in `omitted` instead; `more` counts
 * the predecessors beyond the first ones (a parent pages them with GET …/children). Only for
 * tasks with edges (`deps_total > 0`): the CASE spares every other claim the subquery. Each
 * predecessor's row is read through the primary key, in a subquery the planner may not flatten
 * (`OFFSET 0`): as a plain join, the claim's generic plan hashed a sequential scan of the whole
 * task table for every claimed row — 221 ms for a claim of 99 dependents over 10 000 tasks,
 * 160–210 ms a claim in W5's chain of fans (issue 31, W5's edge).
 */
export const INPUTS = `CASE WHEN t.deps_total > 0 THEN (
    SELECT json_build_object(
             'inputs', coalesce(json_object_agg(i.id, i.result) FILTER (WHERE i.fits), '{}'::json),
             'omitted', coalesce(json_agg(i.id ORDER BY i.id) FILTER (WHERE NOT i.fits), '[]'::json),
             'more', greatest(t.deps_total - ${MAX_INPUTS}, 0))
    FROM (
      SELECT s.id, s.result,
             s.bytes <= ${MAX_INPUT_BYTES}
               AND sum(CASE WHEN s.bytes <= ${MAX_INPUT_BYTES} THEN s.bytes ELSE 0 END)
                     OVER (ORDER BY s.id) <= ${MAX_INPUTS_BYTES} AS fits
      FROM (
        SELECT p.id, p.result, coalesce(octet_length(p.result::text), 0) AS bytes
        FROM (SELECT d.predecessor_id FROM task_dependencies d WHERE d.task_id = t.id
              ORDER BY d.predecessor_id LIMIT ${MAX_INPUTS}) e
        CROSS JOIN LATERAL (SELECT p.id, p.result FROM tasks p WHERE p.id = e.predecessor_id OFFSET 0) p
      ) s
    ) i) END AS inputs`;

/** The `inputs` column of a claim's row. */
export interface InputsRow {
  inputs: Record<string, unknown>;
  omitted: string[];
  more: number;
}

export function taskInputs(row: InputsRow): TaskInputs {
  return {
    values: row.inputs,
    ...(row.omitted.length > 0 ? { omitted: row.omitted } : {}),
    ...(row.more > 0 ? { more: row.more } : {}),
  };
}
