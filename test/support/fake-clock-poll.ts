import { expect } from 'vitest';
import type { FakeClock } from '../../src/runtime/clock.js';
import { api } from './nodes.js';
import { eventually } from './waits.js';

/** A task as the long-poll hands it out (the fields the fake-clock tests read). */
export interface PolledTask {
  task_id: string;
  lease_token: string;
  attempt: number;
  traceparent?: string;
}

/**
 * Waits for the next tasks of `type` to be handed out on a node run by a FakeClock. Work started
 * by a timer goes on after `advance` returns (it awaits the stores), and may arm timers that are
 * already due; so this fires due timers again (`advance(0)`) between polls until something comes.
 * Completes them unless `complete` is false, so that no lease runs out later in the test and
 * hands one out again.
 */
export async function pollNext(url: string, type: string, clock: FakeClock, complete = true): Promise<PolledTask[]> {
  const tasks = await eventually(
    async () => {
      await clock.advance(0);
      const got = (
        await api<{ tasks: PolledTask[] }>(url, 'POST', '/api/workers/poll', {
          worker_id: 'w',
          task_types: [type],
          max_tasks: 100,
          wait_ms: 0,
        })
      ).body.tasks;
      return got.length > 0 ? got : undefined;
    },
    20_000,
    `a ${type} task`,
  );
  if (!complete) return tasks;
  const results = tasks.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token, status: 'succeeded' }));
  expect((await api(url, 'POST', '/api/workers/complete', { results })).status).toBe(200);
  return tasks;
}
