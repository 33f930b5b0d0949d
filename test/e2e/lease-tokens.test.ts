import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEASE } from '../../src/actors/worker-lease.js';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { BACKENDS, TEST_POSTGRES_URL, TEST_REDIS_URL, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { deleteKeysWithPrefix } from '../support/redis.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * Lease tokens through a real node: a token a worker did not receive from a poll — guessed,
 * of the old format, of any shape or length, another task's, another attempt's — is 409
 * `lease_not_held` on heartbeat and complete (never a 500) and leaves the lease as it was; in
 * the batch completion it is that item's `ok: false`, and the other items are recorded.
 */
interface Polled {
  tasks: { task_id: string; attempt: number; lease_token: string }[];
}
interface ErrorBody {
  error: { code: string; message: string; details: Record<string, unknown> };
}

/** Tokens nobody was handed: each must be refused like a lease not held. */
function guesses(): [string, string][] {
  return [
    ['the old format, first attempt', 'lt1.1'],
    ['the old format, the next versions', 'lt1.2'],
    ['the old format past int4', 'lt1.zzzzzz'],
    ['the old format past 2^53', `lt1.${'z'.repeat(12)}`],
    ['well-formed, never issued', `lt2.${randomBytes(16).toString('hex')}`],
    ['well-formed, all zeros', `lt2.${'0'.repeat(32)}`],
    ['random text', randomBytes(12).toString('base64')],
    ['an empty string', ''],
    ['unicode', 'lt2.é☃\u0000'],
    ['10 KB', `lt2.${'a'.repeat(10_240)}`],
  ];
}

describe.each(BACKENDS)('lease tokens on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    // The safety net waits a minute: a lease that runs out sooner was expired by its actor.
    c = await startTestNode(backend, { retryBaseSeconds: 0.05, retryMaxSeconds: 0.05, safetyNetGraceSeconds: 60 });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const submit = async (type: string, n: number, extra: Record<string, unknown> = {}): Promise<string[]> => {
    const res = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: n }, () => ({ task_type: type, ...extra })),
    });
    expect(res.status).toBe(201);
    return res.body.tasks.map((t) => t.task_id);
  };
  const poll = async (type: string, n: number, workerId = 'w-owner'): Promise<Polled['tasks']> => {
    const got: Polled['tasks'] = [];
    await eventually(async () => {
      const res = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
        worker_id: workerId,
        task_types: [type],
        max_tasks: n - got.length,
        wait_ms: 1000,
      });
      expect(res.status).toBe(200);
      got.push(...res.body.tasks);
      return got.length === n ? true : undefined;
    });
    return got;
  };
  const heartbeat = (taskId: string, token: string) =>
    api<ErrorBody>(c.url, 'POST', `/api/tasks/${taskId}/heartbeat`, { lease_token: token });
  const complete = (taskId: string, token: string, status = 'succeeded') =>
    api<ErrorBody>(c.url, 'POST', `/api/tasks/${taskId}/complete`, { lease_token: token, status });
  const row = async (taskId: string) =>
    (
      await c.sql<{ status: string; version: number; attempts: number; lease_expires_at: Date; worker_id: string }>(
        'SELECT status, version, attempts, lease_expires_at, worker_id FROM tasks WHERE id = $1',
        [taskId],
      )
    )[0]!;

  const expectLeaseNotHeld = (res: { status: number; body: ErrorBody }, taskId: string, what: string): void => {
    expect(res.status, what).toBe(409);
    expect(res.body.error, what).toMatchObject({ code: 'lease_not_held', details: { task_id: taskId } });
  };

  it('answers 409 to every guessed or foreign token, and the lease is untouched', async () => {
    const type = uniqueType('guess');
    await submit(type, 2);
    const [mine, theirs] = await poll(type, 2);
    const before = await row(mine!.task_id);
    expect(before).toMatchObject({ status: 'running', worker_id: 'w-owner' });

    const wrong: [string, string][] = [...guesses(), ["another task's valid token", theirs!.lease_token]];
    for (const [what, token] of wrong) {
      expectLeaseNotHeld(await heartbeat(mine!.task_id, token), mine!.task_id, `heartbeat with ${what}`);
      expectLeaseNotHeld(await complete(mine!.task_id, token), mine!.task_id, `complete with ${what}`);
      expectLeaseNotHeld(await complete(mine!.task_id, token, 'failed'), mine!.task_id, `fail with ${what}`);
    }
    // Nothing was extended, recorded or ended.
    expect(await row(mine!.task_id)).toEqual(before);
    expect((await row(theirs!.task_id)).status).toBe('running');

    // The worker that polled it still holds both leases.
    const beat = await api<{ ok: boolean; lease_expires_at: string }>(
      c.url,
      'POST',
      `/api/tasks/${mine!.task_id}/heartbeat`,
      { lease_token: mine!.lease_token },
    );
    expect(beat.status).toBe(200);
    expect(Date.parse(beat.body.lease_expires_at)).toBeGreaterThanOrEqual(before.lease_expires_at.getTime());
    expect((await complete(mine!.task_id, mine!.lease_token)).status).toBe(200);
    expect((await complete(theirs!.task_id, theirs!.lease_token)).status).toBe(200);
    expect((await row(mine!.task_id)).status).toBe('succeeded');
    // Once recorded, the token is dead too.
    expectLeaseNotHeld(await complete(mine!.task_id, mine!.lease_token), mine!.task_id, 'a second result');
    expectLeaseNotHeld(await heartbeat(mine!.task_id, mine!.lease_token), mine!.task_id, 'a heartbeat after the end');
  });

  it('still runs the lease out on time after wrong heartbeats', async () => {
    const type = uniqueType('expiry');
    const [id] = await submit(type, 1, { timeout_seconds: 1, max_retries: 1 });
    const [first] = await poll(type, 1);
    const other = `lt2.${randomBytes(16).toString('hex')}`;
    for (let i = 0; i < 3; i++) expectLeaseNotHeld(await heartbeat(id!, other), id!, 'a wrong heartbeat');
    const sinceMs = Date.now();
    const [second] = await poll(type, 1);
    expect(second).toMatchObject({ task_id: id, attempt: 2 });
    // The lease actor expired it (1 s lease), not the safety net (60 s grace).
    expect(Date.now() - sinceMs).toBeLessThan(10_000);
    expectLeaseNotHeld(await complete(id!, first!.lease_token), id!, 'the expired lease');
    expect((await complete(id!, second!.lease_token)).status).toBe(200);
  });

  it("refuses an earlier attempt's token once the task runs again", async () => {
    const type = uniqueType('attempt');
    const [id] = await submit(type, 1, { max_retries: 2 });
    const [first] = await poll(type, 1);
    expect((await complete(id!, first!.lease_token, 'failed')).status).toBe(200);
    const [second] = await poll(type, 1);
    expect(second).toMatchObject({ task_id: id, attempt: 2 });
    expect(second!.lease_token).not.toBe(first!.lease_token);
    expectLeaseNotHeld(await heartbeat(id!, first!.lease_token), id!, 'heartbeat with attempt 1');
    expectLeaseNotHeld(await complete(id!, first!.lease_token), id!, 'complete with attempt 1');
    expect((await row(id!)).status).toBe('running');
    expect((await complete(id!, second!.lease_token)).status).toBe(200);
  });

  it('records the good items of a batch and answers ok: false for each bad one, never failing the batch', async () => {
    const type = uniqueType('batch');
    await submit(type, 4);
    const [a, b, held, other] = await poll(type, 4);
    const bad = [...guesses().map(([, token]) => token), other!.lease_token];
    const res = await api<{ results: { task_id: string; ok: boolean }[] }>(c.url, 'POST', '/api/workers/complete', {
      results: [
        { task_id: a!.task_id, lease_token: a!.lease_token, status: 'succeeded' },
        ...bad.map((token) => ({ task_id: held!.task_id, lease_token: token, status: 'succeeded' })),
        { task_id: b!.task_id, lease_token: b!.lease_token, status: 'failed', retryable: false },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([
      { task_id: a!.task_id, ok: true },
      ...bad.map(() => ({ task_id: held!.task_id, ok: false })),
      { task_id: b!.task_id, ok: true },
    ]);
    expect((await row(a!.task_id)).status).toBe('succeeded');
    expect((await row(b!.task_id)).status).toBe('failed');
    expect((await row(held!.task_id)).status).toBe('running');

    // A batch of nothing but bad tokens is a 200 too.
    const allBad = await api<{ results: { ok: boolean }[] }>(c.url, 'POST', '/api/workers/complete', {
      results: [{ task_id: held!.task_id, lease_token: 'lt1.zzzzzz', status: 'succeeded' }],
    });
    expect(allBad.status).toBe(200);
    expect(allBad.body.results).toEqual([{ task_id: held!.task_id, ok: false }]);

    // The holder's own results still land, in a batch as on the single route.
    const mine = await api<{ results: { ok: boolean }[] }>(c.url, 'POST', '/api/workers/complete', {
      results: [
        { task_id: held!.task_id, lease_token: held!.lease_token, status: 'succeeded' },
        { task_id: other!.task_id, lease_token: other!.lease_token, status: 'succeeded' },
      ],
    });
    expect(mine.body.results.map((r) => r.ok)).toEqual([true, true]);
  });
});

/**
 * Two nodes of one cluster in this process: a heartbeat reaches whichever node the worker
 * calls, and goes to the lease actor on the node the ring names, carrying the token's digest.
 */
describe('lease tokens across the nodes of a cluster', () => {
  const id = randomBytes(5).toString('hex');
  const schema = `e2e_${id}`;
  const prefix = `t${id}`;
  const nodes: WheelhouseNode[] = [];

  beforeAll(async () => {
    const base = {
      backend: 'postgres' as const,
      port: 0,
      host: '127.0.0.1',
      logLevel: 'silent',
      builtinExecutors: false,
      partitions: 8,
      postgresUrl: TEST_POSTGRES_URL,
      postgresSchema: schema,
      redisUrl: TEST_REDIS_URL,
      redisPrefix: prefix,
      postgresPoolSize: 3,
      clusterSecret: randomBytes(32).toString('hex'),
      heartbeatSeconds: 0.1,
      failureTimeoutSeconds: 2,
      safetyNetGraceSeconds: 2,
    };
    nodes.push(await startNode({ ...base, nodeId: 'lt-a' }));
    nodes.push(await startNode({ ...base, nodeId: 'lt-b' }));
    // Both see both: leases are spread over the two.
    await eventually(
      () =>
        nodes.every((n) => n.system.ownerOf(LEASE, 'x') === nodes[0]!.system.ownerOf(LEASE, 'x')) &&
        nodes.some((n) => [...Array(20).keys()].some((k) => n.system.ownerOf(LEASE, `k${k}`) === 'lt-b'))
          ? true
          : undefined,
      15_000,
      'a ring of two nodes',
    );
  });
  afterAll(async () => {
    for (const node of nodes) await node.close();
    const pool = new pg.Pool({ connectionString: TEST_POSTGRES_URL, max: 1 });
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pool.end();
    const redis = new Redis(TEST_REDIS_URL);
    await deleteKeysWithPrefix(redis, prefix);
    redis.disconnect();
  });

  it('refuses a wrong token and honours the right one whichever node holds the lease', async () => {
    const [a] = nodes as [WheelhouseNode, WheelhouseNode];
    const type = uniqueType('cluster');
    // Task ids are random, so 8 leases all land on one of two nodes about once in 128 runs:
    // submit rounds of 8 until both nodes hold a lease (a ring of two splits them far sooner).
    const polled: Polled['tasks'] = [];
    const owners = new Set<string>();
    for (let round = 0; round < 6 && owners.size < 2; round++) {
      const submitted = await api<{ tasks: { task_id: string }[] }>(a.url, 'POST', '/api/tasks/batch', {
        tasks: Array.from({ length: 8 }, () => ({ task_type: type })),
      });
      expect(submitted.status).toBe(201);
      const wanted = polled.length + 8;
      await eventually(async () => {
        const res = await api<Polled>(a.url, 'POST', '/api/workers/poll', {
          worker_id: 'w-cluster',
          task_types: [type],
          max_tasks: wanted - polled.length,
          wait_ms: 1000,
        });
        polled.push(...res.body.tasks);
        return polled.length === wanted ? true : undefined;
      });
      for (const t of polled) owners.add(a.system.ownerOf(LEASE, t.task_id));
    }
    expect(owners, 'leases on both nodes').toEqual(new Set(['lt-a', 'lt-b']));

    for (const task of polled) {
      for (const node of nodes) {
        const wrong = await api<ErrorBody>(node.url, 'POST', `/api/tasks/${task.task_id}/heartbeat`, {
          lease_token: polled.find((t) => t !== task)!.lease_token,
        });
        expect(wrong.status).toBe(409);
        expect(wrong.body.error.code).toBe('lease_not_held');
        const right = await api(node.url, 'POST', `/api/tasks/${task.task_id}/heartbeat`, {
          lease_token: task.lease_token,
        });
        expect(right.status).toBe(200);
      }
    }
    const done = await api<{ results: { ok: boolean }[] }>(nodes[1]!.url, 'POST', '/api/workers/complete', {
      results: polled.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token, status: 'succeeded' })),
    });
    expect(done.body.results.every((r) => r.ok)).toBe(true);
  });
});
