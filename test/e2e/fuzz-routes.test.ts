/**
 * Fuzzing every route of a real node, on each backend: thousands of requests generated from the
 * route table and each route's schemas (test/support/route-fuzz.ts) — bodies that match,
 * bodies broken in one place, arbitrary JSON and text that is not JSON; query strings; path
 * values matching, broken and oddly encoded; headers right and wrong. Every answer is below
 * 500; every 4xx carries the catalogue's error body with its code's status; and no refused
 * request changes how many tasks there are.
 *
 * Deterministic: one fixed seed (printed; WHEELHOUSE_FUZZ_SEED runs another) and a fixed number
 * of runs per route. Cron instances are left out of the count: a schedule a valid request
 * created fires on its own time.
 */
import type { FastifyInstance } from 'fastify';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE, ERROR_CODES, type ErrorCode } from '../../src/lib/errors.js';
import { api, BACKENDS, startTestNode, type TestCluster } from '../support/nodes.js';
import { requestArb, routeTable, type FuzzRequest, type FuzzRoute, type Known } from '../support/route-fuzz.js';

const SEED = Number(process.env.WHEELHOUSE_FUZZ_SEED ?? 1_402_2026);
/** Requests per route and backend: about 2 500 per backend in all. */
const RUNS_PER_ROUTE = 110;
const CLUSTER_SECRET = 'fuzz-cluster-secret-of-32-bytes-or-more';
/** The node asks for keys: most requests carry this one, the rest none or a wrong one. */
const ADMIN_KEY = 'fuzz-admin-key-of-16-bytes-or-more';
const AUTH = { authorization: `Bearer ${ADMIN_KEY}` };

describe.each(BACKENDS)('fuzzing every route on %s', (backend) => {
  let node: TestCluster;
  let server: FastifyInstance;
  let routes: FuzzRoute[];
  const known: Known = { taskIds: [], leaseTokens: [], clusterSecret: CLUSTER_SECRET, adminKey: ADMIN_KEY };

  beforeAll(async () => {
    node = await startTestNode(backend, {
      // Polls answer at once; cron checks give up fast; the rest as a node runs by default.
      pollMaxWaitSeconds: 0,
      cronCheckBudgetSeconds: 0.05,
      clusterSecret: CLUSTER_SECRET,
      adminToken: ADMIN_KEY,
    });
    server = node.node.server;
    routes = await routeTable();
    // Things for the generated requests to name: a plain task, a schedule, a graph, a running task.
    const plain = await api<{ task_id: string }>(node.url, 'POST', '/api/tasks', { task_type: 'fuzz' }, AUTH);
    const cron = await api<{ task_id: string }>(
      node.url,
      'POST',
      '/api/tasks',
      {
        task_type: 'fuzz',
        schedule: { type: 'cron', cron_expression: '0 0 1 1 *' },
      },
      AUTH,
    );
    const dag = await api<{ dag_id: string; tasks: { task_id: string }[] }>(
      node.url,
      'POST',
      '/api/dags',
      {
        tasks: [
          { ref: 'a', task_type: 'fuzz.other' },
          { ref: 'b', task_type: 'fuzz.other', depends_on: ['a'] },
        ],
      },
      AUTH,
    );
    const polled = await api<{ tasks: { task_id: string; lease_token: string }[] }>(
      node.url,
      'POST',
      '/api/workers/poll',
      { worker_id: 'fuzz', task_types: ['fuzz'], max_tasks: 1, wait_ms: 0 },
      AUTH,
    );
    known.taskIds.push(plain.body.task_id, cron.body.task_id, dag.body.dag_id, ...dag.body.tasks.map((t) => t.task_id));
    known.leaseTokens.push(...polled.body.tasks.map((t) => t.lease_token));
    expect(known.taskIds).toHaveLength(5);
  });
  afterAll(async () => {
    await node?.cleanup();
  });

  async function taskCount(): Promise<number> {
    const { rows } = await node.node.backend.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM tasks WHERE schedule_id IS NULL',
    );
    return rows[0]!.n;
  }

  it('answers every generated request below 500, each 4xx with the catalogue body, and refuses without writing', async () => {
    console.log(`route fuzz on ${backend}: seed ${SEED}, ${RUNS_PER_ROUTE} runs on each of ${routes.length} routes`);
    expect(routes.length).toBeGreaterThan(20);
    const statuses = new Map<number, number>();
    let count = await taskCount();

    const check = async (request: FuzzRequest): Promise<void> => {
      const res = await server.inject(request);
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      const said = `${request.method} ${request.url.slice(0, 200)} → ${res.statusCode} ${res.body.slice(0, 300)}`;
      expect(res.statusCode, said).toBeLessThan(500);
      const after = await taskCount();
      if (res.statusCode >= 400) {
        const body = JSON.parse(res.body) as { error?: { code?: string; message?: unknown; details?: unknown } };
        expect(Object.keys(body), said).toEqual(['error']);
        expect(Object.keys(body.error ?? {}).sort(), said).toEqual(['code', 'details', 'message']);
        expect(ERROR_CODES, said).toContain(body.error?.code);
        expect(ERROR_CATALOGUE[body.error?.code as ErrorCode].status, said).toBe(res.statusCode);
        expect(typeof body.error?.message, said).toBe('string');
        expect(after, `a refused request changed the task count: ${said}`).toBe(count);
      }
      count = after;
    };

    for (const route of routes) {
      await fc.assert(fc.asyncProperty(requestArb(route, known), check), {
        seed: SEED,
        numRuns: RUNS_PER_ROUTE,
        // A failure is reported with its request; shrinking it against a live node adds little.
        endOnFailure: true,
      });
    }
    const total = [...statuses.values()].reduce((a, b) => a + b, 0);
    console.log(
      `route fuzz on ${backend}: ${total} requests, by status ${JSON.stringify(Object.fromEntries(statuses))}`,
    );
    expect(total).toBeGreaterThanOrEqual(2000);
    // The generated requests reach the handlers too, not only the validators.
    expect([...statuses.keys()].some((s) => s >= 200 && s < 300)).toBe(true);
  });
});
