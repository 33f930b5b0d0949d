import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createWorker,
  type TaskChildren,
  type TaskContext,
  type TaskInputs,
  type Worker,
} from '../../src/worker/index.js';
import { createClient } from '../../src/client/index.js';
import { BACKENDS, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';

/**
 * `return ctx.waitForChildren()` in the worker SDK, on both transports (the channel's results
 * frame and the HTTP complete) and both backends: a worker that runs one task at a time runs
 * the parent, then its children while the parent waits, then the parent once more, which sees
 * `ctx.children`, and its children's results as `ctx.inputs`.
 */
describe.each(BACKENDS)('ctx.waitForChildren, on %s', (backend) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0 })));
    await c?.cleanup();
  });
  const client = () => createClient({ url: c.url });

  for (const transport of ['channel', 'http'] as const) {
    it(`over ${transport}: one slot runs the parent, its 30 children, then the parent again with their summary`, async () => {
      const parentType = uniqueType(`wait.parent.${transport}`);
      const childType = uniqueType(`wait.child.${transport}`);
      const runs: { attempt: number; children: TaskChildren | undefined }[] = [];
      const inputs: (TaskInputs | undefined)[] = [];
      const handler = async (t: TaskContext): Promise<unknown> => {
        if (t.taskType === childType) {
          if ((t.payload as { n: number }).n === 7)
            throw Object.assign(new Error('page 7 is gone'), { retryable: false });
          return { ok: true };
        }
        runs.push({ attempt: t.attempt, children: t.children });
        inputs.push(t.inputs);
        if (t.children !== undefined) return { summary: t.children };
        for (let r = 0; r < 3; r++) {
          const tasks = Array.from({ length: 10 }, (_, i) => ({
            taskType: childType,
            payload: { n: r * 10 + i },
            childKey: `n-${r * 10 + i}`,
          }));
          await t.spawn(tasks);
        }
        return t.waitForChildren({ onChildFailure: 'continue' });
      };
      const w = createWorker({
        url: c.url,
        transport,
        // One slot: the waiting parent holds none, or no child could run.
        concurrency: 1,
        taskTypes: [parentType, childType],
        handler,
        onError: () => undefined,
      });
      workers.push(w);
      w.start();
      const { taskId } = await client().submit({ taskType: parentType });
      const done = await client().waitFor(taskId, 'succeeded', { timeoutMs: 30_000 });
      expect(runs).toEqual([
        { attempt: 1, children: undefined },
        { attempt: 2, children: { total: 30, succeeded: 29, failed: 1, cancelled: 0 } },
      ]);
      expect(done.result).toEqual({ summary: { total: 30, succeeded: 29, failed: 1, cancelled: 0 } });
      expect(inputs[0]).toBeUndefined();
      const handedOn = inputs[1]!;
      expect(Object.values(handedOn.values).filter((v) => v === null)).toHaveLength(1); // page 7 failed
      expect(Object.values(handedOn.values).filter((v) => JSON.stringify(v) === '{"ok":true}')).toHaveLength(29);
      expect(handedOn).toMatchObject({ omitted: [], more: 0 });
    }, 40_000);
  }
});
