/**
 * The flow-control routes on a real node, both backends, through the client (API.md "Flow
 * control"): declarations stored and read back by the SQL limit store, a family's values for
 * an undeclared key, the live counts from the task table, DELETE refused with 409
 * `limit_in_use` while a pending task names the limit (the row written directly: the submit
 * field is another change's), pause and resume of a task type, and list paging.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConflictError, NotFoundError, createClient, type WheelhouseClient } from '../../src/client/index.js';
import { BACKENDS, startTestNode, type TestCluster } from '../support/nodes.js';

describe.each(BACKENDS)('limits over HTTP (%s)', (backend) => {
  let cluster: TestCluster;
  let client: WheelhouseClient;

  beforeAll(async () => {
    cluster = await startTestNode(backend);
    client = createClient({ url: cluster.url, retries: 0 });
  });
  afterAll(async () => {
    await cluster?.cleanup();
  });

  /** A task pending an hour from now, naming `limits` (written into its row). */
  async function pendingTaskNaming(limits: string[]): Promise<string> {
    const { taskId } = await client.submit({
      taskType: 'limits.e2e',
      schedule: { type: 'delayed', delaySeconds: 3600 },
    });
    await cluster.sql('UPDATE tasks SET limits = $1 WHERE id = $2', [limits, taskId]);
    return taskId;
  }

  it('stores a declaration, reads it back, and resolves an undeclared key to its family', async () => {
    const put = await client.limits.put('stripe-api', {
      concurrency: 5,
      rate: { limit: 100, periodSeconds: 60, burst: 10 },
      onLimit: 'cancel_new',
      weight: 0.5,
    });
    expect(put).toMatchObject({ name: 'stripe-api', concurrency: 5, running: 0, waiting: 0 });
    expect(await client.limits.get('stripe-api')).toEqual(put);
    await client.limits.put('customer:*', { concurrency: 2 });
    await pendingTaskNaming(['customer:42']);
    expect(await client.limits.get('customer:42')).toMatchObject({
      name: 'customer:42',
      declaredAs: 'customer:*',
      concurrency: 2,
      running: 0,
      // Its task is due in an hour: not waiting for the key yet (the key's actor counts due tasks).
      waiting: 0,
    });
    expect(await client.limits.get('customer:*')).toMatchObject({ running: null, waiting: null });
  });

  it('refuses to delete a limit a pending task names (409 limit_in_use), and deletes it once none does', async () => {
    await client.limits.put('busy-api', { concurrency: 1 });
    const taskId = await pendingTaskNaming(['busy-api']);
    const refused = await client.limits.delete('busy-api').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConflictError);
    expect(refused).toMatchObject({ code: 'limit_in_use' });
    expect((await client.limits.get('busy-api')).concurrency).toBe(1);
    await client.cancel(taskId);
    await client.limits.delete('busy-api');
    expect(await client.limits.get('busy-api').catch((e: unknown) => e)).toBeInstanceOf(NotFoundError);
  });

  it('pauses a task type and resumes it, leaving no declaration behind', async () => {
    const paused = await client.limits.pauseTaskType('report.build');
    expect(paused).toMatchObject({ paused: true, limit: { name: 'type:report.build', concurrency: 0 } });
    expect(await cluster.sql('SELECT concurrency FROM limits WHERE name = $1', ['type:report.build'])).toEqual([
      { concurrency: 0 },
    ]);
    expect(await client.limits.resumeTaskType('report.build')).toEqual({
      taskType: 'report.build',
      paused: false,
      limit: null,
    });
    expect(await cluster.sql('SELECT name FROM limits WHERE name = $1', ['type:report.build'])).toEqual([]);
  });

  it('lists page by page in name order', async () => {
    for (const name of ['page:c', 'page:a', 'page:b']) await client.limits.put(name, { weight: 2 });
    const first = await client.limits.listPage({ prefix: 'page:', limit: 2 });
    expect(first.limits.map((l) => l.name)).toEqual(['page:a', 'page:b']);
    const second = await client.limits.listPage({ prefix: 'page:', limit: 2, nextToken: first.nextToken });
    expect(second).toMatchObject({ limits: [{ name: 'page:c', weight: 2 }], nextToken: null });
  });
});
