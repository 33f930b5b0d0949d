import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createWorker,
  LeaseLostError,
  SpawnError,
  type SpawnedChild,
  type TaskContext,
  type Worker,
} from '../../src/worker/index.js';
import { createClient } from '../../src/client/index.js';
import { BACKENDS, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * Children spawned on the worker channel (a raw `spawn` frame and its `spawned` answer) and by the
 * SDK's `ctx.spawn` on both transports, on both backends; the client reads them back.
 */
describe.each(BACKENDS)('spawning children from a worker, on %s', (backend) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  const raws: RawWorker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' });
  });
  afterAll(async () => {
    for (const r of raws) r.terminate();
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0 })));
    await c?.cleanup();
  });
  const client = () => createClient({ url: c.url });

  it('answers a spawn frame with a spawned frame of the same request_id; a refusal keeps the socket open', async () => {
    const type = uniqueType('raw.parent');
    const childType = uniqueType('raw.child');
    const { taskId } = await client().submit({ taskType: type });
    const { worker } = await RawWorker.hello(c.url, { worker_id: `w-${randomUUID()}`, task_types: [type], credits: 1 });
    raws.push(worker);
    const task = (await worker.next('tasks')).tasks[0]!;
    expect(task.task_id).toBe(taskId);
    const tasks = [
      { task_type: childType, child_key: 'a' },
      { task_type: childType, child_key: 'b', schedule: { type: 'delayed', delay_seconds: 60 } },
    ];
    worker.send({ type: 'spawn', request_id: 'r1', task_id: taskId, lease_token: task.lease_token, tasks });
    const first = await worker.next('spawned');
    expect(first.request_id).toBe('r1');
    expect(first.tasks?.map((t) => [t.child_key, t.status])).toEqual([
      ['a', 'pending'],
      ['b', 'pending'],
    ]);
    // The same keys again: the same children.
    worker.send({ type: 'spawn', request_id: 'r2', task_id: taskId, lease_token: task.lease_token, tasks });
    const again = await worker.next('spawned');
    expect(again.tasks?.map((t) => t.task_id)).toEqual(first.tasks?.map((t) => t.task_id));
    // A bad child and a wrong token are answered in `spawned`, and nothing is added.
    const bad = [...tasks, { task_type: childType, child_key: 'c', priority: 99 }];
    worker.send({ type: 'spawn', request_id: 'r3', task_id: taskId, lease_token: task.lease_token, tasks: bad });
    expect(await worker.next('spawned')).toMatchObject({
      request_id: 'r3',
      error: { code: 'validation_failed', details: { field: 'tasks[2].priority', index: 2 } },
    });
    worker.send({ type: 'spawn', request_id: 'r4', task_id: taskId, lease_token: 'lt2.' + '1'.repeat(32), tasks });
    expect(await worker.next('spawned')).toMatchObject({ request_id: 'r4', error: { code: 'lease_not_held' } });
    const over = Array.from({ length: 1001 }, () => ({ task_type: childType }));
    worker.send({ type: 'spawn', request_id: 'r5', task_id: taskId, lease_token: task.lease_token, tasks: over });
    expect(await worker.next('spawned')).toMatchObject({
      request_id: 'r5',
      error: { code: 'validation_failed', details: { field: 'tasks' } },
    });
    // Still open: the result of the parent is acknowledged.
    worker.send({
      type: 'results',
      results: [{ task_id: taskId, lease_token: task.lease_token, status: 'succeeded' }],
    });
    expect((await worker.next('acks')).acks).toEqual([{ task_id: taskId, ok: true }]);
    const listed = [];
    for await (const child of client().children.list(taskId)) listed.push(child.childKey);
    expect(listed).toEqual(['a', 'b']);
  });

  for (const transport of ['channel', 'http'] as const) {
    it(`ctx.spawn over ${transport}: the children run and their results are listed; a retried attempt adds none twice`, async () => {
      const parentType = uniqueType(`sdk.parent.${transport}`);
      const childType = uniqueType(`sdk.child.${transport}`);
      const spawned: SpawnedChild[][] = [];
      const refusals: unknown[] = [];
      const handler = async (t: TaskContext): Promise<unknown> => {
        if (t.taskType === childType) return { squared: (t.payload as { n: number }).n ** 2 };
        const pages = [1, 2, 3].map((n) => ({ taskType: childType, payload: { n }, childKey: `page-${n}` }));
        spawned.push(await t.spawn(pages));
        // A bad child: refused, and nothing of the call is added.
        await t
          .spawn([
            { taskType: childType, childKey: 'x' },
            { taskType: childType, priority: 42 },
          ])
          .catch((e) => refusals.push(e));
        // The first attempt fails after spawning: the retry spawns the same keys again.
        if (t.attempt === 1) throw new Error('retry me');
        return 'parent done';
      };
      const w = createWorker({
        url: c.url,
        transport,
        taskTypes: [parentType, childType],
        handler,
        onError: () => undefined,
      });
      workers.push(w);
      w.start();
      const { taskId } = await client().submit({ taskType: parentType, maxRetries: 1 });
      await client().waitFor(taskId, 'succeeded', { timeoutMs: 20_000 });
      expect(spawned).toHaveLength(2);
      expect(spawned[1]!.map((s) => s.taskId)).toEqual(spawned[0]!.map((s) => s.taskId));
      expect(refusals).toHaveLength(2);
      expect(refusals[0]).toBeInstanceOf(SpawnError);
      expect((refusals[0] as SpawnError).details).toMatchObject({ index: 1, field: 'tasks[1].priority' });
      const children = await eventually(
        async () => {
          const page = await client().children.listPage(taskId, { status: 'succeeded' });
          return page.children.length === 3 ? page.children : undefined;
        },
        20_000,
        'the three children to succeed',
      );
      expect(children.map((ch) => [ch.childKey, ch.result])).toEqual([
        ['page-1', { squared: 1 }],
        ['page-2', { squared: 4 }],
        ['page-3', { squared: 9 }],
      ]);
      const child = await client().get(children[0]!.taskId);
      expect(child).toMatchObject({ parentId: taskId, childKey: 'page-1' });
    });
  }

  it('rejects ctx.spawn with a LeaseLostError once the attempt is over', async () => {
    const type = uniqueType('sdk.late');
    let late: Promise<unknown> | undefined;
    const w = createWorker({
      url: c.url,
      taskTypes: [type],
      onError: () => undefined,
      handler: async (t) => {
        late = new Promise((resolve) => setTimeout(resolve, 200)).then(() =>
          t.spawn([{ taskType: type }]).then(
            () => 'spawned',
            (e: unknown) => e,
          ),
        );
      },
    });
    workers.push(w);
    w.start();
    const { taskId } = await client().submit({ taskType: type });
    await client().waitFor(taskId, 'succeeded', { timeoutMs: 10_000 });
    await eventually(async () => late, 5_000, 'the handler to run');
    expect(await late).toBeInstanceOf(LeaseLostError);
    expect((await client().children.listPage(taskId)).children).toEqual([]);
  });
});
