/**
 * `client.limits` over HTTP against the node's real routes and `LimitsService`, on an
 * in-memory limit store (test/http/fake-limits.ts): the camelCase ⇄ snake_case mapping both
 * ways, paging, and the errors as the client's classes. A real node's store behind the same
 * calls is in test/e2e/limits-api.test.ts.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConflictError,
  NotFoundError,
  ValidationError,
  createClient,
  type WheelhouseClient,
} from '../../src/client/index.js';
import { serverWith } from '../http/fake-api.js';
import { memoryLimits, type MemoryLimitStore } from '../http/fake-limits.js';

let app: FastifyInstance;
let store: MemoryLimitStore;
let client: WheelhouseClient;

beforeAll(async () => {
  const limits = memoryLimits();
  store = limits.store;
  ({ app } = serverWith({}, { limits: limits.service }));
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  client = createClient({ url, retries: 0 });
});
afterAll(async () => {
  await app.close();
});

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('client.limits', () => {
  it('declares in camelCase, sends snake_case, and reads the limit back', async () => {
    const put = await client.limits.put('customer:*', {
      concurrency: 5,
      rate: { limit: 100, periodSeconds: 60 },
      onLimit: 'keep_latest_waiting',
      weight: 2,
    });
    expect(put).toEqual({
      name: 'customer:*',
      declaredAs: 'customer:*',
      concurrency: 5,
      rate: { limit: 100, periodSeconds: 60, burst: 0 },
      onLimit: 'keep_latest_waiting',
      weight: 2,
      running: null,
      waiting: null,
      startsLastPeriod: null,
    });
    expect(store.declared.get('customer:*')).toMatchObject({ onLimit: 'keep_latest_waiting', weight: 2 });
    store.counted.set('customer:42', { running: 3, waiting: 7 });
    expect(await client.limits.get('customer:42')).toMatchObject({
      name: 'customer:42',
      declaredAs: 'customer:*',
      running: 3,
      waiting: 7,
    });
  });

  it('lists page by page and as one iteration', async () => {
    for (const name of ['list:a', 'list:b', 'list:c']) await client.limits.put(name, { concurrency: 1 });
    const page = await client.limits.listPage({ prefix: 'list:', limit: 2 });
    expect(page.limits.map((l) => l.name)).toEqual(['list:a', 'list:b']);
    expect(page.nextToken).not.toBeNull();
    const names: string[] = [];
    for await (const limit of client.limits.list({ prefix: 'list:', limit: 1 })) names.push(limit.name);
    expect(names).toEqual(['list:a', 'list:b', 'list:c']);
  });

  it('pauses and resumes a task type', async () => {
    const paused = await client.limits.pauseTaskType('email.send');
    expect(paused).toMatchObject({
      taskType: 'email.send',
      paused: true,
      limit: { name: 'type:email.send', concurrency: 0 },
    });
    expect(await client.limits.resumeTaskType('email.send')).toEqual({
      taskType: 'email.send',
      paused: false,
      limit: null,
    });
  });

  it('deletes, and maps limit_in_use, not_found and validation_failed to their classes', async () => {
    await client.limits.put('busy', { concurrency: 1 });
    store.inUseNames.add('busy');
    const inUse = await rejectionOf(client.limits.delete('busy'));
    expect(inUse).toBeInstanceOf(ConflictError);
    expect(inUse).toMatchObject({ code: 'limit_in_use', status: 409 });
    store.inUseNames.delete('busy');
    await client.limits.delete('busy');
    expect(await rejectionOf(client.limits.get('busy'))).toBeInstanceOf(NotFoundError);
    const bad = await rejectionOf(client.limits.put('k', { concurrency: -1 }));
    expect(bad).toBeInstanceOf(ValidationError);
    expect(bad).toMatchObject({ field: 'concurrency' });
  });
});
