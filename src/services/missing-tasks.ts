import { WheelhouseError } from '../lib/errors.js';
import { uuidv7Ms } from '../lib/ids.js';
import type { TaskStore } from '../store/types.js';

/**
 * The 404 of an id that names no task (or graph), saying so when retention may have removed
 * it. Retention keeps no trace of a removed task (a tombstone per task would grow with the
 * task count); it records the horizon it applied. An id is a UUID v7 and carries its creation
 * time, and a task ends after it is created, so a task that retention removed was created
 * before that horizon: a missing id created before it is answered with why it may be gone. A
 * missing id created after it, or one that is not a v7, never existed: the plain answer.
 */
export class MissingTasks {
  constructor(private readonly deps: { tasks: Pick<TaskStore, 'retentionHorizon'> }) {}

  /** 404 `task_not_found` for a task id. */
  async task(taskId: string): Promise<WheelhouseError> {
    const passed = await this.passedRetention(taskId);
    if (passed === null) return plainNotFound(taskId);
    return new WheelhouseError(
      'task_not_found',
      `Task ${taskId} was not found: finished tasks are removed ${passed.retention} after they end, and this one was created before ${passed.horizon}.`,
      { details: { task_id: taskId, ...passed.details } },
    );
  }

  /** 404 `task_not_found` for a graph id (a graph leaves with its last task). */
  async graph(dagId: string): Promise<WheelhouseError> {
    const passed = await this.passedRetention(dagId);
    if (passed === null) {
      return new WheelhouseError('task_not_found', `no graph has id ${dagId}`, { details: { dag_id: dagId } });
    }
    return new WheelhouseError(
      'task_not_found',
      `Graph ${dagId} was not found: a graph's tasks are removed ${passed.retention} after its last task ends, and this one was created before ${passed.horizon}.`,
      { details: { dag_id: dagId, ...passed.details } },
    );
  }

  private async passedRetention(
    id: string,
  ): Promise<{ retention: string; horizon: string; details: Record<string, unknown> } | null> {
    const createdMs = uuidv7Ms(id);
    if (createdMs === null) return null;
    // The answer is a 404 either way: a store that cannot say where the horizon is gives the
    // plain one rather than an error in place of it.
    const applied = await this.deps.tasks.retentionHorizon().catch(() => null);
    if (applied === null || createdMs >= applied.horizonMs) return null;
    const horizon = new Date(applied.horizonMs).toISOString();
    return {
      retention: durationText(applied.retentionMs),
      horizon,
      details: { retention_seconds: applied.retentionMs / 1000, retention_horizon: horizon },
    };
  }
}

/** The answer for an id that names no task. */
export function plainNotFound(taskId: string): WheelhouseError {
  return new WheelhouseError('task_not_found', `no task has id ${taskId}`, { details: { task_id: taskId } });
}

const UNITS: readonly [number, string][] = [
  [86_400_000, 'day'],
  [3_600_000, 'hour'],
  [60_000, 'minute'],
  [1000, 'second'],
];

/** 604800000 → "7 days", 5400000 → "90 minutes", 1500 → "1.5 seconds": the largest whole unit. */
export function durationText(ms: number): string {
  for (const [size, unit] of UNITS) {
    if (ms >= size && ms % size === 0) {
      const n = ms / size;
      return `${n} ${unit}${n === 1 ? '' : 's'}`;
    }
  }
  const seconds = ms / 1000;
  return `${seconds} second${seconds === 1 ? '' : 's'}`;
}
