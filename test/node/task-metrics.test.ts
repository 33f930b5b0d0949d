import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { NodeEvents } from '../../src/domain/events.js';
import type { Transition } from '../../src/domain/model.js';
import { TypedEvents } from '../../src/lib/events.js';
import { taskMetrics } from '../../src/node/task-metrics.js';

/**
 * The task metrics count a batch's tasks with one `inc(n)` a series, not one a task (`tally`):
 * a batch that mixes types and outcomes, in runs and interleaved, must count each task once
 * under its own labels, and the `other` cap must still apply.
 */
function setUp(maxTaskTypes = 10) {
  const registry = new Registry();
  const events = new TypedEvents<NodeEvents>();
  taskMetrics(registry, events, maxTaskTypes, { depths: async () => [] }, () => undefined);
  /** Each series of `name` by its labels joined with `/`; `sample`: a histogram's `_count`. */
  const values = async (name: string, sample = name) => {
    const metric = registry.getSingleMetric(name);
    if (metric === undefined) throw new Error(`no metric ${name}`);
    const out: Record<string, number> = {};
    for (const v of (await metric.get()).values) {
      if (((v as { metricName?: string }).metricName ?? name) === sample)
        out[Object.values(v.labels).join('/')] = v.value;
    }
    return out;
  };
  return { events, values };
}

const ended = (taskType: string, status: Transition['status'], startedMs: number | null = 1_000): Transition => ({
  taskId: `t-${Math.random()}`,
  status,
  version: 2,
  requeued: null,
  notifyDependents: false,
  taskType,
  startedMs,
  endedMs: 1_500,
});

describe('task metrics counted a series at a time', () => {
  it('counts submitted and started tasks of interleaved types each under its own type', async () => {
    const { events, values } = setUp();
    events.emit('task:submitted', {
      taskIds: ['1', '2', '3', '4', '5', '6'],
      taskTypes: ['a', 'a', 'b', 'a', 'c', 'c'],
    });
    events.emit('task:submitted', { taskIds: ['7'], taskTypes: ['b'] });
    expect(await values('wheelhouse_tasks_submitted_total')).toEqual({ a: 3, b: 2, c: 2 });
    const tasks = ['b', 'b', 'a', 'b', 'a', 'a', 'a'].map((taskType) => ({ taskType, dueMs: 900 }));
    events.emit('task:claimed', { workerId: 'w', taskIds: tasks.map((_, i) => String(i)), tasks, startedMs: 1_000 });
    expect(await values('wheelhouse_tasks_started_total')).toEqual({ a: 4, b: 3 });
    expect(await values('wheelhouse_task_start_lag_seconds', 'wheelhouse_task_start_lag_seconds_count')).toEqual({
      a: 4,
      b: 3,
    });
  });

  it('counts finished attempts under their type and outcome, interleaved', async () => {
    const { events, values } = setUp();
    events.emit('task:completed', {
      transitions: [
        ended('a', 'succeeded'),
        ended('a', 'succeeded'),
        ended('a', 'failed'),
        ended('b', 'failed'),
        ended('a', 'succeeded'),
        ended('a', 'cancelled', null),
        ended('a', 'pending'),
      ],
    });
    expect(await values('wheelhouse_tasks_finished_total')).toEqual({
      'a/succeeded': 3,
      'a/failed': 2,
      'b/failed': 1,
      'a/cancelled': 1,
    });
    // A run time only for the attempts that had started.
    expect(await values('wheelhouse_task_run_seconds', 'wheelhouse_task_run_seconds_count')).toEqual({
      'a/succeeded': 3,
      'a/failed': 2,
      'b/failed': 1,
    });
  });

  it('counts the types past the cap as other', async () => {
    const { events, values } = setUp(1);
    events.emit('task:submitted', { taskIds: ['1', '2', '3', '4'], taskTypes: ['a', 'b', 'c', 'a'] });
    expect(await values('wheelhouse_tasks_submitted_total')).toEqual({ a: 2, other: 2 });
  });
});
