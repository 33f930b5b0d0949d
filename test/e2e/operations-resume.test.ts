import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { api, type BackendName } from '../support/nodes.js';
import {
  ended,
  failedTasks,
  startOperation,
  tasksOfType,
  type OperationBody,
  type Polled,
} from '../support/operations.js';
import { seedPgliteDir } from '../support/pglite-dirs.js';
import {
  dropTestStores,
  kill9,
  nodeArgs,
  requireBuiltCli,
  startProcess,
  type NodeProcess,
} from '../support/processes.js';
import { eventually } from '../support/waits.js';

/**
 * An operation survives the node that runs it: a bulk retry is under way on a node (its own
 * process) when the node is killed with SIGKILL; a new process on the same stores resumes it
 * and it ends with every matched task retried exactly once. A worker fails each retried task
 * again while the operation runs, so a page run twice would show: the task would be failed
 * when the page ran again, be matched again and run a third time.
 */
requireBuiltCli();

const TASKS = 1500;
/** Small pages, so that the operation is many pages long and the kill lands in the middle. */
const PAGE_ARGS = ['--operation-page-tasks', '15'];

describe.each(['postgres', 'embedded'] as BackendName[])('an operation whose node is killed, on %s', (backend) => {
  const id = randomBytes(4).toString('hex');
  const schema = `ops_${id}`;
  const prefix = `ops${id}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'wheelhouse-ops-'));
  const args = [...nodeArgs(backend, schema, prefix, dataDir), ...PAGE_ARGS];
  const running: NodeProcess[] = [];

  beforeEach(async () => {
    if (backend === 'embedded') await seedPgliteDir(dataDir);
  });

  afterEach(async () => {
    for (const p of running) await kill9(p);
    running.length = 0;
    if (backend === 'postgres') await dropTestStores(schema, prefix);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('is resumed by the next node and retries each task exactly once', async () => {
    const type = `ops.resume.${backend}`;
    let node = await startProcess(args);
    running.push(node);
    // A short attempt timeout: an attempt whose poll answer the kill lost ends within seconds.
    const ids = await failedTasks(node.url, type, TASKS, 'timeout', {}, { timeout_seconds: 2 });
    const op = await startOperation(node.url, { action: 'retry', filter: { status: 'failed', task_type: type } });

    // A worker that fails every retried task again (attempt 2), on whichever node is up.
    let stopWorker = false;
    const attempts = new Map<string, number[]>();
    const worker = (async () => {
      while (!stopWorker) {
        try {
          const polled = await api<Polled>(node.url, 'POST', '/api/workers/poll', {
            worker_id: 'w-resume',
            task_types: [type],
            max_tasks: 200,
            wait_ms: 200,
          });
          if (polled.status !== 200) continue;
          for (const t of polled.body.tasks) attempts.set(t.task_id, [...(attempts.get(t.task_id) ?? []), t.attempt]);
          if (polled.body.tasks.length === 0) continue;
          await api(node.url, 'POST', '/api/workers/complete', {
            results: polled.body.tasks.map((t) => ({
              task_id: t.task_id,
              lease_token: t.lease_token,
              status: 'failed',
              error: 'timeout again',
            })),
          });
        } catch {
          // The node is being killed or has not started yet: try again on the next one.
        }
      }
    })();

    // Progress is visible while it runs; the node is killed mid-way.
    const midway = await eventually(
      async () => {
        const got = await api<OperationBody>(node.url, 'GET', `/api/operations/${op.operation_id}`);
        return got.body.state === 'running' && got.body.done >= TASKS / 5 ? got.body : undefined;
      },
      30_000,
      'the operation to be under way',
      10,
    );
    await kill9(node);
    expect(midway.done).toBeLessThan(TASKS);

    node = await startProcess(args);
    running.push(node);
    const final = await ended(() => node.url, op.operation_id, {}, 60_000);
    expect(final).toMatchObject({ state: 'done', matched: TASKS, done: TASKS, failed: 0 });
    expect(final.done).toBeGreaterThan(midway.done);

    // Every task ran its second attempt (reported failed, or its lease ran out where the kill
    // lost the poll's answer), and none a third.
    const tasks = await eventually(
      async () => {
        const all = await tasksOfType(node.url, type);
        return all.length === TASKS && all.every((t) => t.status === 'failed') ? all : undefined;
      },
      60_000,
      'every retried task to fail again',
      200,
    );
    stopWorker = true;
    await worker;
    expect(tasks.map((t) => t.task_id).sort()).toEqual([...ids].sort());
    for (const t of tasks) expect(t.attempts, t.task_id).toBe(2);
    for (const [taskId, seen] of attempts) expect(seen, taskId).toEqual([2]);
    expect(attempts.size).toBeGreaterThan(TASKS / 2);
  }, 180_000);
});
