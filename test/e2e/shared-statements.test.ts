import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Completion } from '../../src/domain/model.js';
import type { LeaseHeartbeat, TaskStore } from '../../src/store/types.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * Concurrent single requests share statements: many `POST /api/tasks/{id}/complete` (and
 * batches beside them) arriving together are recorded by one completion statement per group,
 * many heartbeats by one heartbeat statement per group, and each request still gets its own
 * answer — 200, or 409 `lease_not_held` for a result or heartbeat whose lease is not held,
 * including the second of two results for one task.
 *
 * Statements are counted at the node's task store, whose `complete` and `heartbeats` each run
 * exactly one statement (src/store/sql/complete.ts, src/store/sql/claim.ts).
 */
/** The most requests a test sends at once. */
const CONNECTIONS = 150;

interface Polled {
  tasks: { task_id: string; lease_token: string }[];
}

/** Counts the store calls (one statement each) and what each carried. */
function countStatements(tasks: TaskStore): { completes: Completion[][]; heartbeats: LeaseHeartbeat[][] } {
  const seen = { completes: [] as Completion[][], heartbeats: [] as LeaseHeartbeat[][] };
  const complete = tasks.complete.bind(tasks);
  const heartbeats = tasks.heartbeats.bind(tasks);
  tasks.complete = (results, nowMs, backoff) => {
    seen.completes.push([...results]);
    return complete(results, nowMs, backoff);
  };
  tasks.heartbeats = (leases, nowMs) => {
    seen.heartbeats.push([...leases]);
    return heartbeats(leases, nowMs);
  };
  return seen;
}

describe.each(BACKENDS)('shared statements on %s', (backend) => {
  let c: TestCluster;
  let seen: ReturnType<typeof countStatements>;
  /** Kept-alive connections, all open before a test sends at once, as a worker's would be. */
  let http: Pool;

  beforeAll(async () => {
    c = await startTestNode(backend, { safetyNetGraceSeconds: 60 });
    seen = countStatements(c.node.backend.tasks);
    http = new Pool(c.url, { connections: CONNECTIONS, keepAliveTimeout: 120_000 });
    await Promise.all(
      Array.from({ length: CONNECTIONS }, () =>
        http.request({ method: 'GET', path: '/healthz' }).then((r) => r.body.dump()),
      ),
    );
  });
  afterAll(async () => {
    await http?.close();
    await c?.cleanup();
  });

  const post = async <T = unknown>(path: string, body: unknown): Promise<{ status: number; body: T }> => {
    const res = await http.request({
      method: 'POST',
      path,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.statusCode, body: (await res.body.json()) as T };
  };

  const running = async (n: number): Promise<Polled['tasks']> => {
    const type = uniqueType('shared');
    const submitted = await api(c.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: n }, () => ({ task_type: type })),
    });
    expect(submitted.status).toBe(201);
    const got: Polled['tasks'] = [];
    await eventually(async () => {
      const res = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
        worker_id: 'w-http',
        task_types: [type],
        max_tasks: n - got.length,
        wait_ms: 1000,
      });
      if (res.status !== 200) throw new Error(`poll answered ${res.status}: ${JSON.stringify(res.body)}`);
      got.push(...res.body.tasks);
      return got.length === n ? true : undefined;
    });
    return got;
  };

  const complete = (taskId: string, leaseToken: string) =>
    post(`/api/tasks/${taskId}/complete`, { lease_token: leaseToken, status: 'succeeded' });

  it('records concurrent single completes in shared statements, each answered on its own', async () => {
    const tasks = await running(120);
    const [wrongToken, duplicated, rest] = [tasks.slice(0, 10), tasks.slice(10, 20), tasks.slice(20)];
    const before = seen.completes.length;
    const requests = [
      ...rest.map((t) => complete(t.task_id, t.lease_token).then((r) => ['ok', r.status] as const)),
      // Another task's token first, and then the right one: refused, then recorded.
      ...wrongToken.flatMap((t, i) => [
        complete(t.task_id, tasks[(i + 1) % tasks.length]!.lease_token).then((r) => ['wrong', r.status] as const),
        complete(t.task_id, t.lease_token).then((r) => ['ok', r.status] as const),
      ]),
      // The same result twice at once: one counts, the other finds the lease gone.
      ...duplicated.flatMap((t) => [
        complete(t.task_id, t.lease_token).then((r) => ['dup', r.status] as const),
        complete(t.task_id, t.lease_token).then((r) => ['dup', r.status] as const),
      ]),
    ];
    const answers = await Promise.all(requests);
    expect(answers.filter(([kind]) => kind === 'ok').every(([, status]) => status === 200)).toBe(true);
    expect(answers.filter(([kind]) => kind === 'wrong').map(([, status]) => status)).toEqual(Array(10).fill(409));
    const dup = answers.filter(([kind]) => kind === 'dup').map(([, status]) => status);
    expect(dup.filter((s) => s === 200)).toHaveLength(10);
    expect(dup.filter((s) => s === 409)).toHaveLength(10);

    const statements = seen.completes.slice(before);
    // Every request's result went into exactly one statement...
    expect(statements.reduce((n, s) => n + s.length, 0)).toBe(requests.length);
    // ...never two for one task in the same statement...
    for (const s of statements) expect(new Set(s.map((r) => r.taskId)).size).toBe(s.length);
    // ...and far fewer statements than requests.
    expect(statements.length).toBeLessThanOrEqual(requests.length / 4);
    expect(Math.max(...statements.map((s) => s.length))).toBeGreaterThan(10);

    const { rows } = {
      rows: await c.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM tasks WHERE status = 'succeeded' AND id = ANY($1::uuid[])`,
        [tasks.map((t) => t.task_id)],
      ),
    };
    expect(rows[0]!.n).toBe(120);
  });

  it('shares statements between single completes and a batch arriving with them', async () => {
    const tasks = await running(60);
    const [batched, single] = [tasks.slice(0, 30), tasks.slice(30)];
    const before = seen.completes.length;
    const [batch, ...singles] = await Promise.all([
      post<{ results: { task_id: string; ok: boolean }[] }>('/api/workers/complete', {
        results: batched.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token, status: 'succeeded' })),
      }),
      ...single.map((t) => complete(t.task_id, t.lease_token)),
    ]);
    expect(batch.status).toBe(200);
    expect(batch.body.results.every((r) => r.ok)).toBe(true);
    expect(singles.every((r) => r.status === 200)).toBe(true);
    const statements = seen.completes.slice(before);
    expect(statements.reduce((n, s) => n + s.length, 0)).toBe(60);
    expect(statements.length).toBeLessThanOrEqual(31 / 4);
  });

  it('extends concurrent heartbeats in shared statements, each answered on its own', async () => {
    const tasks = await running(80);
    const before = seen.heartbeats.length;
    const answers = await Promise.all(
      tasks.map((t) => post<{ ok: boolean }>(`/api/tasks/${t.task_id}/heartbeat`, { lease_token: t.lease_token })),
    );
    expect(answers.every((a) => a.status === 200 && a.body.ok)).toBe(true);
    const statements = seen.heartbeats.slice(before);
    expect(statements.reduce((n, s) => n + s.length, 0)).toBe(80);
    expect(statements.length).toBeLessThanOrEqual(80 / 4);
    // Another task's token: refused by the lease, which knows its digest now, without a statement.
    const wrong = await Promise.all(
      tasks
        .slice(0, 10)
        .map((t, i) => post(`/api/tasks/${t.task_id}/heartbeat`, { lease_token: tasks[i + 1]!.lease_token })),
    );
    expect(wrong.map((a) => a.status)).toEqual(Array(10).fill(409));
    expect(seen.heartbeats.length).toBe(before + statements.length);
    // The leases still hold: their results are recorded.
    const completed = await Promise.all(tasks.map((t) => complete(t.task_id, t.lease_token)));
    expect(completed.every((r) => r.status === 200)).toBe(true);
  });
});
