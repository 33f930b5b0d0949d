/**
 * `client.operations` against a real node on the embedded backend: the filter in camelCase
 * reaches the node in snake_case (a `Date` as ISO), the operation comes back in camelCase,
 * `wait` reports progress until it ends, pages list newest first, cancel is answered, and a
 * filter the node refuses is the client's `ValidationError`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConflictError, ValidationError, createClient, type WheelhouseClient } from '../../src/client/index.js';
import { startTestNode, type TestCluster } from '../support/nodes.js';
import { failedTasks } from '../support/operations.js';

let c: TestCluster;
let client: WheelhouseClient;

beforeAll(async () => {
  c = await startTestNode('embedded', { operationPageTasks: 4 });
  client = createClient({ url: c.url, retries: 0 });
});
afterAll(async () => {
  await c?.cleanup();
});

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('client.operations', () => {
  it('starts a retry, waits for it with progress, and lists it', async () => {
    await failedTasks(c.url, 'client.ops', 10, 'Gateway timeout');
    const since = new Date(Date.now() - 60_000);
    const started = await client.operations.start('retry', {
      taskType: 'client.ops',
      errorContains: 'gateway',
      createdAfter: since,
    });
    expect(started).toMatchObject({
      action: 'retry',
      state: 'running',
      filter: { taskType: 'client.ops', errorContains: 'gateway', createdAfter: since.toISOString() },
    });
    expect(started.startedAt).toBeInstanceOf(Date);
    const seen: string[] = [];
    const final = await client.operations.wait(started.operationId, {
      pollMs: 20,
      onProgress: (op) => seen.push(op.state),
    });
    expect(final).toMatchObject({ state: 'done', matched: 10, done: 10, failed: 0, error: null });
    expect(final.finishedAt).toBeInstanceOf(Date);
    expect(seen[seen.length - 1]).toBe('done');
    expect((await client.operations.get(started.operationId)).done).toBe(10);
    const page = await client.operations.listPage({ limit: 1 });
    expect(page.operations.map((o) => o.operationId)).toEqual([started.operationId]);
  });

  it('answers a cancel, a 409 for an ended operation, and a ValidationError for a filter the node refuses', async () => {
    const done = await client.operations.wait(
      (await client.operations.start('cancel', { taskType: 'none' })).operationId,
    );
    expect(await rejectionOf(client.operations.cancel(done.operationId))).toBeInstanceOf(ConflictError);
    const refused = await rejectionOf(client.operations.start('retry', { parentId: 'not-a-task-id' }));
    expect(refused).toBeInstanceOf(ValidationError);
    expect(await rejectionOf(client.operations.start('retry', {}))).toBeInstanceOf(ValidationError);
  });
});
