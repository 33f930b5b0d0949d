import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidv7 } from '../../src/lib/ids.js';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { eventually } from '../support/waits.js';

/**
 * Retention through a node: with `retentionSeconds: 1` the node's sweep (every second at
 * that retention) removes a finished task about a second after it ends (the store's tests
 * check its executions and the rules of what stays);
 * every per-task route then answers 404 `task_not_found` saying that it passed retention. An
 * id that never named a task (a v7 id made now, a v4 id) still gets the plain 404, and a
 * delayed task due in an hour stays.
 */
/** Each wait is for a second or two; generous, for a machine busy with other suites. */
const WAIT_MS = 30_000;

describe.each(BACKENDS)('retention on %s', (backend: BackendName) => {
  let c: TestCluster;

  beforeAll(async () => {
    c = await startTestNode(backend, { retentionSeconds: 1, builtinExecutors: true });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  interface ErrorBody {
    error: { code: string; message: string; details: Record<string, unknown> };
  }

  const submit = async (body: Record<string, unknown>): Promise<string> => {
    const res = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', body);
    expect(res.status).toBe(201);
    return res.body.task_id;
  };

  it('removes a finished task after the retention; its routes answer 404 saying why', async () => {
    const ran = await submit({ task_type: 'wheelhouse.noop' });
    const cancelled = await submit({ task_type: 'retention.test', schedule: { type: 'delayed', delay_seconds: 3600 } });
    const waiting = await submit({ task_type: 'retention.test', schedule: { type: 'delayed', delay_seconds: 3600 } });
    expect((await api(c.url, 'DELETE', `/api/tasks/${cancelled}`)).status).toBe(200);
    const dag = await api<{ dag_id: string; tasks: { task_id: string }[] }>(c.url, 'POST', '/api/dags', {
      tasks: [{ ref: 'only', task_type: 'retention.test', schedule: { type: 'delayed', delay_seconds: 3600 } }],
    });
    expect(dag.status).toBe(201);
    expect((await api(c.url, 'DELETE', `/api/tasks/${dag.body.tasks[0]!.task_id}`)).status).toBe(200);

    // The noop task runs at once and, a second after it succeeded, is gone (it may be gone
    // before this first looks: only a finished task can be).
    const gone = await eventually(
      async () => {
        const res = await api<ErrorBody>(c.url, 'GET', `/api/tasks/${ran}`);
        return res.status === 404 ? res : undefined;
      },
      WAIT_MS,
      'the finished task to pass retention',
    );
    expect(gone.body.error.code).toBe('task_not_found');
    expect(gone.body.error.message).toMatch(
      new RegExp(
        `^Task ${ran} was not found: finished tasks are removed 1 second after they end, and this one was created before \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\.$`,
      ),
    );
    expect(gone.body.error.details).toMatchObject({ task_id: ran, retention_seconds: 1 });

    // Every route of a task says the same; the cancelled task and the graph went too.
    await eventually(
      async () => ((await api(c.url, 'GET', `/api/tasks/${cancelled}`)).status === 404 ? true : undefined),
      WAIT_MS,
      'the cancelled task to pass retention',
    );
    for (const [method, path] of [
      ['GET', `/api/tasks/${cancelled}`],
      ['GET', `/api/tasks/${cancelled}/explain`],
      ['GET', `/api/tasks/${cancelled}/history`],
      ['POST', `/api/tasks/${cancelled}/retry`],
      ['DELETE', `/api/tasks/${cancelled}`],
      ['POST', `/api/tasks/${cancelled}/pause`],
    ] as const) {
      const res = await api<ErrorBody>(c.url, method, path);
      expect([method, path, res.status, res.body.error.code]).toEqual([method, path, 404, 'task_not_found']);
      expect(res.body.error.message).toContain('finished tasks are removed 1 second after they end');
    }
    const graph = await eventually(
      async () => {
        const res = await api<ErrorBody>(c.url, 'GET', `/api/dags/${dag.body.dag_id}`);
        return res.status === 404 ? res : undefined;
      },
      WAIT_MS,
      'the graph to pass retention',
    );
    expect(graph.body.error.message).toContain(`Graph ${dag.body.dag_id} was not found: a graph's tasks are removed`);

    // The delayed task waits on: unfinished tasks never pass retention.
    expect((await api<{ status: string }>(c.url, 'GET', `/api/tasks/${waiting}`)).body.status).toBe('pending');

    // Ids that never named a task: the plain 404.
    for (const id of [uuidv7(), randomUUID()]) {
      const res = await api<ErrorBody>(c.url, 'GET', `/api/tasks/${id}`);
      expect(res.status).toBe(404);
      expect(res.body.error).toMatchObject({ code: 'task_not_found', message: `no task has id ${id}` });
    }
  });
});
