import Type from 'typebox';
import type { ChildSpec } from '../../domain/specs.js';
import { ChildTasks, type ChildTaskRequestBody } from '../schemas/children.js';
import { assertSchema } from './ajv.js';
import { FieldPath } from './fields.js';
import { taskSpec, type TaskDefaults } from './tasks.js';

/**
 * Children of a running task (`POST /api/tasks/{id}/children`, the channel's `spawn`): each a
 * task of `POST /api/tasks` checked as one is, and what a child cannot be. A cron schedule's
 * instances are made by its actor, not by the attempt that spawned it, and a child waits for
 * nothing but its due time: no `schedule.type` cron, no `dependencies`, no `debounce` (each a
 * 400 `validation_failed` naming the field, like every other error here).
 */

/** Children that match `ChildTasks` → their specs, a bad child named by index (`tasks[3].…`). */
export function childSpecs(tasks: readonly ChildTaskRequestBody[], defaults: TaskDefaults): ChildSpec[] {
  return tasks.map((task, i) => {
    const at = new FieldPath(`tasks[${i}]`, i);
    const { child_key: childKey, ...body } = task;
    if (body.dependencies != null && body.dependencies.length > 0)
      at.at('dependencies').fail('a child has no dependencies: it is due when its schedule says');
    if (body.debounce != null) at.at('debounce').fail('a child cannot be debounced');
    if (body.schedule?.type === 'cron') at.at('schedule.type').fail('a child cannot be a cron schedule');
    return { spec: taskSpec(body, defaults, at), childKey: childKey ?? null };
  });
}

/** `{tasks}`, so that a schema error names `tasks[3].…` as the route's would. */
const SpawnTasks = Type.Object({ tasks: ChildTasks });

/** The `tasks` of a `spawn` frame, which no route schema has checked: the schema first, then `childSpecs`. */
export function validateChildren(tasks: unknown, defaults: TaskDefaults): ChildSpec[] {
  assertSchema(SpawnTasks, { tasks });
  return childSpecs(tasks as ChildTaskRequestBody[], defaults);
}
