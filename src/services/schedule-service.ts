import type { ScheduleRecord, TaskRecord } from '../domain/model.js';
import { WheelhouseError } from '../lib/errors.js';
import { CRON } from '../actors/cron-schedule.js';
import type { CronActivation } from '../actors/cron-activation.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import type { TaskStore } from '../store/types.js';
import type { MissingTasks } from './missing-tasks.js';
import type { TaskViews } from './support.js';
import type { SchedulesApi, TaskView } from './types.js';

export interface ScheduleServiceDeps {
  tasks: Pick<TaskStore, 'get'>;
  system: ActorSystemApi;
  activation: CronActivation;
  views: TaskViews;
  /** The 404 of an id that names no task (saying when it passed retention). */
  missing: Pick<MissingTasks, 'task'>;
  onError(error: unknown, context: string): void;
}

/** How long pause, resume and delete wait for a schedule's actor. */
const CRON_ASK_MS = 10_000;

/**
 * Cron schedules: each is an actor (`actors/cron-schedule.ts`) that owns its row; pause,
 * resume and delete are asks to it, so they serialize with its fires.
 */
export class ScheduleService implements SchedulesApi {
  constructor(private readonly deps: ScheduleServiceDeps) {}

  /** Pauses a cron schedule: it stops firing and its pending instance is cancelled. */
  async pause(taskId: string): Promise<TaskView> {
    return this.command(await this.scheduleRow(taskId, 'pause'), 'pause');
  }

  /** Resumes a paused schedule from now: the fire times it was paused through are not caught up. */
  async resume(taskId: string): Promise<TaskView> {
    return this.command(await this.scheduleRow(taskId, 'resume'), 'resume');
  }

  /** Deletes a schedule (`DELETE /api/tasks/{id}` of a cron task): it and its pending instance end. */
  async cancel(task: TaskRecord): Promise<{ cancelledInstances: number }> {
    return this.ask(task, 'cancel');
  }

  /**
   * A new schedule's actor creates its first instance on activation. The schedule is in the
   * task table already, so a failure here is reported, not thrown: the node activates every
   * active schedule when it starts.
   */
  async activate(records: ScheduleRecord[]): Promise<void> {
    if (records.length === 0) return;
    try {
      await this.deps.activation.records(records);
    } catch (error) {
      this.deps.onError(
        error,
        `could not activate ${records.length} new schedules (they start with the next node start)`,
      );
    }
  }

  private async command(task: TaskRecord, type: 'pause' | 'resume'): Promise<TaskView> {
    await this.ask(task, type);
    const record = await this.deps.tasks.get(task.id);
    if (!record) throw await this.deps.missing.task(task.id);
    return (await this.deps.views.of([record]))[0]!;
  }

  private async scheduleRow(taskId: string, action: 'pause' | 'resume'): Promise<TaskRecord> {
    const task = await this.deps.tasks.get(taskId);
    if (!task) throw await this.deps.missing.task(taskId);
    if (task.scheduleType !== 'cron') {
      throw new WheelhouseError(
        'invalid_transition',
        `only cron schedules can ${action}; this task is ${task.scheduleType}`,
        {
          details: { task_id: taskId, schedule_type: task.scheduleType },
        },
      );
    }
    return task;
  }

  /** Asks the schedule's actor; its refusals become the catalogue's errors. */
  private async ask(task: TaskRecord, type: 'pause' | 'resume' | 'cancel'): Promise<{ cancelledInstances: number }> {
    const result = await this.deps.system.ref(CRON, task.id).ask({ type }, CRON_ASK_MS);
    if (result.ok) return result;
    if (result.reason === 'not_found') throw await this.deps.missing.task(task.id);
    throw new WheelhouseError('task_finished', `the schedule is already ${result.status}`, {
      details: { task_id: task.id, status: result.status },
    });
  }
}
