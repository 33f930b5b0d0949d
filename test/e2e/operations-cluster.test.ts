import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type ProcessCluster } from '../support/cluster.js';
import { api } from '../support/nodes.js';
import {
  ended,
  failedTasks,
  startOperation,
  tasksOfType,
  type OperationBody,
  type Polled,
} from '../support/operations.js';
import { eventually } from '../support/waits.js';

/**
 * In a cluster, an operation runs on the node the ring names for it; when that node dies
 * (SIGKILL), another node goes on with it once the ring has changed, from its last committed
 * page. A worker on the surviving node fails each retried task again, so a page run twice
 * would show as a third attempt (test/e2e/operations-resume.test.ts does the same with one
 * node restarted).
 */
const TASKS = 1200;

describe('an operation in a cluster whose owner dies', () => {
  let cluster: ProcessCluster;
  beforeAll(async () => {
    cluster = await startCluster({ nodes: 2, label: 'ops', extraArgs: ['--operation-page-tasks', '12'] });
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it('is resumed by the other node, each task retried once', async () => {
    const type = 'ops.cluster';
    const n1 = cluster.node('n1').url;
    await failedTasks(n1, type, TASKS, 'timeout', {}, { timeout_seconds: 2 });
    const op = await startOperation(n1, { action: 'retry', filter: { status: 'failed', task_type: type } });
    const owner = await cluster.ownerOfActor('operation', op.operation_id);
    const survivor = cluster.node(owner === 'n1' ? 'n2' : 'n1').url;

    let stop = false;
    const attempts = new Map<string, number[]>();
    const worker = (async () => {
      while (!stop) {
        const polled = await api<Polled>(survivor, 'POST', '/api/workers/poll', {
          worker_id: 'w-cluster',
          task_types: [type],
          max_tasks: 200,
          wait_ms: 200,
        });
        if (polled.status !== 200 || polled.body.tasks.length === 0) continue;
        for (const t of polled.body.tasks) attempts.set(t.task_id, [...(attempts.get(t.task_id) ?? []), t.attempt]);
        await api(survivor, 'POST', '/api/workers/complete', {
          results: polled.body.tasks.map((t) => ({
            task_id: t.task_id,
            lease_token: t.lease_token,
            status: 'failed',
            error: 'timeout again',
          })),
        });
      }
    })();

    const midway = await eventually(
      async () => {
        const got = await api<OperationBody>(survivor, 'GET', `/api/operations/${op.operation_id}`);
        return got.body.state === 'running' && got.body.done >= TASKS / 5 ? got.body : undefined;
      },
      30_000,
      'the operation to be under way',
      10,
    );
    await cluster.kill9(owner);
    expect(midway.done).toBeLessThan(TASKS);

    const final = await ended(() => survivor, op.operation_id, {}, 60_000);
    expect(final).toMatchObject({ state: 'done', matched: TASKS, done: TASKS, failed: 0 });
    const tasks = await eventually(
      async () => {
        const all = await tasksOfType(survivor, type);
        return all.length === TASKS && all.every((t) => t.status === 'failed') ? all : undefined;
      },
      60_000,
      'every task to have run its second attempt',
      200,
    );
    stop = true;
    await worker;
    for (const t of tasks) expect(t.attempts, t.task_id).toBe(2);
    for (const [taskId, seen] of attempts) expect(seen, taskId).toEqual([2]);
  }, 180_000);
});
