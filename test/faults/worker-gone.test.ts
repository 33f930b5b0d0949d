import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { readyKeys } from '../../src/store/redis-keys.js';
import { dagClient } from '../support/dags.js';
import { startFaultyNode, type FaultyNode } from '../support/faulty-node.js';
import { TEST_REDIS_URL, api } from '../support/nodes.js';
import { eventually } from '../support/waits.js';
import { uniqueType } from '../support/tasks.js';

/**
 * A long-poll whose worker went away claims nothing it cannot deliver. Here the claim is slow
 * (Postgres behind 800 ms of latency) and the worker hangs up while it runs: the claimed task
 * goes back to pending at once — its attempt not counted — and the next worker gets it,
 * instead of it waiting out a lease that no worker holds.
 */
describe('a long-poll whose worker went away', () => {
  let c: FaultyNode | undefined;
  let redis: Redis | undefined;
  afterEach(async () => {
    redis?.disconnect();
    await c?.cleanup();
    c = undefined;
    redis = undefined;
  });

  it('hands its claims back at once: the next worker gets them as attempt 1', async () => {
    c = await startFaultyNode({ partitions: 1 });
    const node = c;
    redis = new Redis(TEST_REDIS_URL);
    const inFlight = readyKeys(node.node.options.redisPrefix).inFlight;
    const w = dagClient(() => node.url);
    const type = uniqueType('gone');
    const id = (
      await w.submitTask({ task_type: type, timeout_seconds: 30, schedule: { type: 'delayed', delay_seconds: 1.5 } })
    ).body.task_id;

    const gone = new AbortController();
    const hungUp = fetch(`${node.url}/api/workers/poll`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ worker_id: 'w-gone', task_types: [type], max_tasks: 1, wait_ms: 20_000 }),
      signal: gone.signal,
    }).catch((error: unknown) => error);
    node.pg.latency(800);
    // The entry is taken: the poll is claiming it now, slowly. The worker hangs up meanwhile.
    await eventually(
      async () => ((await redis!.zcard(inFlight)) > 0 ? true : undefined),
      10_000,
      'the entry taken for the claim',
    );
    gone.abort();
    expect(await hungUp).toBeInstanceOf(Error);
    node.pg.latency(0);

    const startedMs = Date.now();
    const next = await w.poll([type], 1, 10_000);
    expect(next).toEqual([expect.objectContaining({ task_id: id, attempt: 1 })]);
    expect(Date.now() - startedMs).toBeLessThan(10_000);
    await w.complete(next);
    const history = await api<{ executions: { attempt: number; status: string; worker_id: string }[] }>(
      node.url,
      'GET',
      `/api/tasks/${id}/history`,
    );
    expect(history.body.executions.map((e) => [e.attempt, e.status, e.worker_id])).toEqual([[1, 'succeeded', 'w-dag']]);
  });
});
