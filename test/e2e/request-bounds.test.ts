/**
 * The bounds on one request's work, through a real node on each backend: each answers its 4xx
 * of the catalogue (or a page that stops early and says so), writes nothing when it refuses,
 * and none of the requests that answered 500 before does so now.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { api, BACKENDS, startTestNode, type TestCluster } from '../support/nodes.js';

interface ErrorJson {
  error: { code: string; message: string; details: Record<string, unknown> };
}
interface TaskPage {
  tasks: { task_id: string; task_type: string }[];
  next_token: string | null;
}

const token = (text: string): string => Buffer.from(text, 'utf8').toString('base64url');

describe.each(BACKENDS)('request bounds on %s', (backend) => {
  let node: TestCluster;

  beforeAll(async () => {
    node = await startTestNode(backend, {
      pollMaxWaitSeconds: 2,
      pollMaxConcurrent: 1,
      maxDependencies: 2,
      maxPageBytes: 250_000,
      listScanRows: 100,
      cronCheckBudgetSeconds: 0.2,
      // A second is far more than a listing here needs; the pool's own timeout is tested below.
      listTimeoutSeconds: 1,
    });
  });
  afterAll(async () => {
    await node?.cleanup();
  });

  async function rowCount(): Promise<number> {
    const [row] = await node.sql<{ n: number }>('SELECT count(*)::int AS n FROM tasks');
    return row!.n;
  }

  /** Every page of a listing, following `next_token`. */
  async function listAll(query: string): Promise<TaskPage[]> {
    const pages: TaskPage[] = [];
    let next: string | null = null;
    do {
      const res: { status: number; body: TaskPage } = await api<TaskPage>(
        node.url,
        'GET',
        `/api/tasks?${query}${next === null ? '' : `&next_token=${next}`}`,
      );
      expect(res.status).toBe(200);
      pages.push(res.body);
      next = res.body.next_token;
    } while (next !== null && pages.length < 200);
    return pages;
  }

  it('answers a payload nested 4 200 deep with 400 and writes nothing', async () => {
    const before = await rowCount();
    const deep = '['.repeat(4200) + ']'.repeat(4200);
    for (const body of [
      `{"task_type":"deep","payload":${deep}}`,
      `{"task_type":"deep","idempotency_key":"deep","payload":${deep}}`,
    ]) {
      const res = await api<ErrorJson>(node.url, 'POST', '/api/tasks', body);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
    expect(await rowCount()).toBe(before);
  });

  it('answers a malformed next_token with 400: above 2^31, not digits, not a token at all', async () => {
    const submitted = await api<{ task_id: string }>(node.url, 'POST', '/api/tasks', { task_type: 'tokens' });
    const id = submitted.body.task_id;
    for (const bad of [token('3000000000'), token('2147483648'), token('1e3'), token(' 5'), token('-1'), '%00', 'x']) {
      const history = await api<ErrorJson>(node.url, 'GET', `/api/tasks/${id}/history?next_token=${bad}`);
      expect(history.status, `history ${bad}`).toBe(400);
      expect(history.body.error).toMatchObject({ code: 'validation_failed', details: { field: 'next_token' } });
    }
    for (const bad of [token('zzz'), token('3000000000'), token(`${id}x`), 'x', '%00']) {
      const list = await api<ErrorJson>(node.url, 'GET', `/api/tasks?next_token=${bad}`);
      expect(list.status, `list ${bad}`).toBe(400);
      expect(list.body.error.details.field).toBe('next_token');
    }
    expect((await api(node.url, 'GET', `/api/tasks/${id}/history?next_token=${token('2147483647')}`)).status).toBe(200);
  });

  it('stops a list page at maxPageBytes and goes on with next_token', async () => {
    const blob = 'x'.repeat(100_000);
    const batch = await api<{ tasks: { task_id: string }[] }>(node.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: 5 }, () => ({ task_type: 'bytes', payload: { blob } })),
    });
    expect(batch.status).toBe(201);
    const pages = await listAll('task_type=bytes&limit=50');
    for (const page of pages) expect(page.tasks.length).toBeLessThanOrEqual(2);
    expect(pages[0]!.tasks).toHaveLength(2);
    expect(pages[0]!.next_token).not.toBeNull();
    expect(pages.flatMap((p) => p.tasks.map((t) => t.task_id)).sort()).toEqual(
      batch.body.tasks.map((t) => t.task_id).sort(),
    );
  });

  it('walks at most listScanRows rows for a filter with no index, with an empty page that goes on', async () => {
    const rare = await api<{ tasks: { task_id: string }[] }>(node.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: 3 }, () => ({ task_type: 'rare' })),
    });
    await api(node.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: 250 }, () => ({ task_type: 'common' })),
    });
    const first = await api<TaskPage>(node.url, 'GET', '/api/tasks?task_type=rare&limit=10');
    expect(first.body.tasks, 'the 100 newest rows hold none').toEqual([]);
    expect(first.body.next_token).not.toBeNull();
    const pages = await listAll('task_type=rare&limit=10');
    expect(pages.flatMap((p) => p.tasks.map((t) => t.task_id)).sort()).toEqual(
      rare.body.tasks.map((t) => t.task_id).sort(),
    );
  });

  it('refuses a cron rule whose fire times cannot be found within the budget with 400 invalid_cron, fast', async () => {
    const before = await rowCount();
    // A fifth Monday (or Sunday) in February: once in decades. Distinct per backend, so that the
    // rule's remembered answers from the other run do not help.
    const expression = backend === 'postgres' ? '0 0 * 2 1#5' : '0 0 * 2 0#5';
    const started = performance.now();
    const res = await api<ErrorJson>(node.url, 'POST', '/api/tasks', {
      task_type: 'cron',
      schedule: { type: 'cron', cron_expression: expression, jitter_seconds: 1 },
    });
    const tookMs = performance.now() - started;
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: 'invalid_cron',
      details: { field: 'schedule.cron_expression', budget_ms: 200 },
    });
    expect(tookMs, 'the check gave up at its budget (the walk takes about 2 s)').toBeLessThan(1500);
    expect(await rowCount()).toBe(before);

    const hourly = await api(node.url, 'POST', '/api/tasks', {
      task_type: 'cron',
      schedule: { type: 'cron', cron_expression: '0 * * * *', jitter_seconds: 10 },
    });
    expect(hourly.status, 'an ordinary rule is checked well within it').toBe(201);
  });

  it('refuses more dependencies than maxDependencies with 400 and writes nothing', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await api<{ task_id: string }>(node.url, 'POST', '/api/tasks', { task_type: 'dep' })).body.task_id);
    }
    const before = await rowCount();
    const res = await api<ErrorJson>(node.url, 'POST', '/api/tasks', { task_type: 'dep', dependencies: ids });
    expect(res.status).toBe(400);
    expect(res.body.error.details).toMatchObject({ field: 'dependencies', limit: 2 });
    const dag = await api<ErrorJson>(node.url, 'POST', '/api/dags', {
      tasks: [{ ref: 'a', task_type: 'dep', depends_on: ids }],
    });
    expect(dag.status).toBe(400);
    expect(await rowCount()).toBe(before);
  });

  it('answers a poll past pollMaxConcurrent 429 too_many_polls with Retry-After', async () => {
    // The first poll holds the node's one slot once the route hands it to the worker service.
    const workers = node.node.services.workers;
    const poll = workers.poll.bind(workers);
    const holding = new Promise<void>((resolve) => {
      vi.spyOn(workers, 'poll').mockImplementationOnce((request, signal) => {
        resolve();
        return poll(request, signal);
      });
    });
    const waiting = api(node.url, 'POST', '/api/workers/poll', {
      worker_id: 'w1',
      task_types: ['idle'],
      wait_ms: 1500,
    });
    await holding;
    vi.restoreAllMocks();
    const refused = await api<ErrorJson>(node.url, 'POST', '/api/workers/poll', {
      worker_id: 'w2',
      task_types: ['idle'],
      wait_ms: 0,
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.body.error.code).toBe('too_many_polls');
    expect((await waiting).status).toBe(200);
    const again = await api(node.url, 'POST', '/api/workers/poll', {
      worker_id: 'w2',
      task_types: ['idle'],
      wait_ms: 0,
    });
    expect(again.status).toBe(200);
  });

  it('refuses 101 task types in a poll with 400', async () => {
    const res = await api<ErrorJson>(node.url, 'POST', '/api/workers/poll', {
      worker_id: 'w',
      task_types: Array.from({ length: 101 }, (_, i) => `t${i}`),
      wait_ms: 0,
    });
    expect(res.status).toBe(400);
    expect(res.body.error.details).toMatchObject({ field: 'task_types', limit: 100 });
  });

  it('stops a poll answer at maxPageBytes and hands the rest back, their attempt not counted', async () => {
    const blob = 'y'.repeat(100_000);
    await api(node.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: 3 }, () => ({ task_type: 'big', payload: { blob } })),
    });
    const seen = new Set<string>();
    const deadline = Date.now() + 10_000;
    while (seen.size < 3 && Date.now() < deadline) {
      const res = await api<{ tasks: { task_id: string; attempt: number }[] }>(node.url, 'POST', '/api/workers/poll', {
        worker_id: 'w',
        task_types: ['big'],
        max_tasks: 3,
        wait_ms: 500,
      });
      expect(res.status).toBe(200);
      expect(res.body.tasks.length).toBeLessThanOrEqual(2);
      for (const task of res.body.tasks) {
        expect(task.attempt, 'a task handed back is claimed again as its first attempt').toBe(1);
        seen.add(task.task_id);
      }
    }
    expect(seen.size).toBe(3);
  });

  it('refuses U+0000 in payloads and stored fields with 400, and keeps a worker error with it replaced', async () => {
    const before = await rowCount();
    for (const body of [
      { task_type: 'nul', payload: 'a\u0000b' },
      { task_type: 'nul', payload: { 'k\u0000': 1 } },
      { task_type: 'nul', idempotency_key: 'k\u0000' },
      // A lone surrogate is not UTF-8: stored as U+FFFD, the key did not read back as itself (500).
      { task_type: 'nul', idempotency_key: '\ud800' },
      { task_type: 'nul', payload: '\ud800' },
    ]) {
      const res = await api<ErrorJson>(node.url, 'POST', '/api/tasks', body);
      expect(res.status).toBe(400);
    }
    const poll = await api<ErrorJson>(node.url, 'POST', '/api/workers/poll', {
      worker_id: 'w\u0000',
      task_types: ['nul'],
      wait_ms: 0,
    });
    expect(poll.status).toBe(400);
    expect(await rowCount()).toBe(before);

    const { body: task } = await api<{ task_id: string }>(node.url, 'POST', '/api/tasks', {
      task_type: 'nul',
      max_retries: 0,
    });
    const claimed = await api<{ tasks: { task_id: string; lease_token: string }[] }>(
      node.url,
      'POST',
      '/api/workers/poll',
      {
        worker_id: 'w',
        task_types: ['nul'],
        wait_ms: 1000,
      },
    );
    const lease = claimed.body.tasks.find((t) => t.task_id === task.task_id)!;
    const done = await api(node.url, 'POST', `/api/tasks/${task.task_id}/complete`, {
      lease_token: lease.lease_token,
      status: 'failed',
      error: 'bad\u0000byte',
    });
    expect(done.status).toBe(200);
    const read = await api<{ last_error: string }>(node.url, 'GET', `/api/tasks/${task.task_id}`);
    expect(read.body.last_error).toBe('bad\uFFFDbyte');
  });

  it('answers a NUL in an admin actor kind or key with 400', async () => {
    for (const path of [
      '/admin/actors/%00/x',
      '/admin/actors/a%00b/x',
      '/admin/actors?kind=%00',
      '/admin/actors/lease/%00',
    ]) {
      const res = await api<ErrorJson>(node.url, 'GET', path);
      expect(res.status, path).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
    }
  });

  it.runIf(backend === 'postgres')('runs listings on a pool of their own whose statements time out', async () => {
    const { listings, db } = node.node.backend;
    expect(listings).not.toBe(db);
    const [setting] = (await listings.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows;
    expect(setting?.statement_timeout).toBe('1s');
    await expect(listings.query('SELECT pg_sleep(1.5)')).rejects.toMatchObject({
      code: 'store_unavailable',
      status: 503,
    });
    await db.query('SELECT pg_sleep(0.01)');
  });
});
