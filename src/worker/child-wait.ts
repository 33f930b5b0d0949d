/**
 * Ending an attempt to wait for the task's children (API.md, "Children of a running task"):
 * `return ctx.waitForChildren()` from a handler. The value is a token the worker recognises
 * when the handler returns it, and reports as `status: waiting_children` on either transport
 * instead of a success; the task is then `waiting` on the node, holding no slot, and runs once
 * more (attempt + 1, no retry used) when every child has ended, with `ctx.children`.
 */

/** What a child that does not succeed does to the waiting task. */
export type OnChildFailure = 'fail' | 'continue';

export interface WaitForChildrenOptions {
  /**
   * `fail`: a child that fails for good (or is cancelled, or expires) fails the task, naming
   * it; the other children go on. `continue`: the task runs again once every child has
   * ended, whatever its end. @default 'fail'
   */
  onChildFailure?: OnChildFailure;
}

/** How a resumed task's children ended (`ctx.children`). `cancelled` counts expired ones too. */
export interface TaskChildren {
  total: number;
  succeeded: number;
  failed: number;
  cancelled: number;
}

/** Returned by `ctx.waitForChildren()`: the handler returns it to end its attempt waiting. */
export class ChildWaitRequest {
  constructor(readonly onChildFailure: OnChildFailure) {}
}

/** `ctx.waitForChildren`: checks the option and makes the token. */
export function waitForChildren(options: WaitForChildrenOptions = {}): ChildWaitRequest {
  const mode = options.onChildFailure ?? 'fail';
  if (mode !== 'fail' && mode !== 'continue')
    throw new RangeError(`onChildFailure must be fail or continue, not ${String(mode)}`);
  return new ChildWaitRequest(mode);
}

/** A poll answer's or task frame's `children`, when it is one the worker can read. */
export function childrenOf(value: unknown): TaskChildren | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const o = value as Record<string, unknown>;
  const keys = ['total', 'succeeded', 'failed', 'cancelled'] as const;
  if (!keys.every((k) => typeof o[k] === 'number')) return undefined;
  return {
    total: o.total as number,
    succeeded: o.succeeded as number,
    failed: o.failed as number,
    cancelled: o.cancelled as number,
  };
}

/**
 * What a task with predecessors (a DAG dependent, a parent resumed after its children) is
 * handed of their results (`ctx.inputs`): the node hands on those of its first 100
 * predecessors by id, each up to 16 KiB and 64 KiB together.
 */
export interface TaskInputs {
  /** Each predecessor's result by its task id (null for none). */
  readonly values: Readonly<Record<string, unknown>>;
  /** Predecessors whose results were too large to hand on: read them with `client.tasks.get(id)`. */
  readonly omitted: readonly string[];
  /** How many predecessors there are beyond the first 100 (a parent pages its children: `client.children.list`). */
  readonly more: number;
}

/** A poll answer's or task frame's `inputs` (and `inputs_omitted`, `inputs_more`), when readable. */
export function inputsOf(task: {
  inputs?: unknown;
  inputs_omitted?: unknown;
  inputs_more?: unknown;
}): TaskInputs | undefined {
  const values = task.inputs;
  if (typeof values !== 'object' || values === null || Array.isArray(values)) return undefined;
  const omitted = Array.isArray(task.inputs_omitted)
    ? task.inputs_omitted.filter((id): id is string => typeof id === 'string')
    : [];
  const more = typeof task.inputs_more === 'number' && task.inputs_more > 0 ? task.inputs_more : 0;
  return { values: values as Record<string, unknown>, omitted, more };
}
