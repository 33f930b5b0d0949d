import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ClaimedTask } from '../../src/domain/model.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';

/**
 * A socket with credit to spare gets a second claim while its first is still in Postgres
 * (`CLAIMS_IN_FLIGHT`): a task pushed meanwhile does not wait for the slow claim to end. Here
 * the first claim is held until the second task has reached the worker; with one claim in
 * flight per socket the second task would wait behind it, and the test would time out.
 */
describe.each(BACKENDS)('a second claim of the worker channel on %s', (backend) => {
  let c: TestCluster;
  const open: RawWorker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { partitions: 1 });
  });
  afterAll(async () => {
    for (const w of open) w.terminate();
    await c?.cleanup();
  });

  it('claims a task pushed while the first claim is slow, within the credits', async () => {
    const type = uniqueType('second-claim');
    const credits = 200;
    const { worker } = await RawWorker.hello(c.url, { worker_id: `w-${randomUUID()}`, task_types: [type], credits });
    open.push(worker);
    const tasks = c.node.backend.tasks;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let first = true;
    const claim = tasks.claim.bind(tasks);
    const spy = vi.spyOn(tasks, 'claim').mockImplementation(async (ids, workerId, nowMs, grants) => {
      const claimed: ClaimedTask[] = await claim(ids, workerId, nowMs, grants);
      if (first && claimed.length > 0) {
        first = false;
        await held; // the first claim that found something stays in flight
      }
      return claimed;
    });
    try {
      const one = await api(c.url, 'POST', '/api/tasks', { task_type: type });
      expect(one.status).toBe(201);
      await vi.waitFor(() => expect(first).toBe(false), { timeout: 10_000 });
      const two = await api(c.url, 'POST', '/api/tasks', { task_type: type });
      expect(two.status).toBe(201);
      const [got] = await worker.received(1);
      expect(got?.task_id).toBe((two.body as { task_id: string }).task_id);
      release();
      await worker.received(2);
      expect(new Set(worker.tasks.map((t) => t.task_id)).size).toBe(2);
    } finally {
      release();
      spy.mockRestore();
    }
  });
});
