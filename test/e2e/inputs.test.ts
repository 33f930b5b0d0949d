import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';

/**
 * Results handed on (docs/api.md, "Children of a running task"): a DAG dependent and a parent
 * resumed after its children get `inputs`, each predecessor's result by its id, through the
 * HTTP routes of a real node on each backend; a result over the inline bound (16 KiB) is named
 * in `inputs_omitted`, and predecessors past the first 100 are counted in `inputs_more`.
 */

interface Assignment {
  task_id: string;
  task_type: string;
  attempt: number;
  lease_token: string;
  inputs?: Record<string, unknown>;
  inputs_omitted?: string[];
  inputs_more?: number;
}

describe.each(BACKENDS)('results handed on as inputs, on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const poll = async (type: string, max: number): Promise<Assignment[]> => {
    const polled = await api<{ tasks: Assignment[] }>(c.url, 'POST', '/api/workers/poll', {
      worker_id: 'w-inputs',
      task_types: [type],
      max_tasks: max,
      wait_ms: 5_000,
    });
    expect(polled.status, JSON.stringify(polled.body)).toBe(200);
    return polled.body.tasks;
  };
  /** Polls until `n` tasks of `type` are in hand. */
  const pollAll = async (type: string, n: number): Promise<Assignment[]> => {
    const got: Assignment[] = [];
    for (let i = 0; i < 50 && got.length < n; i++) got.push(...(await poll(type, n - got.length)));
    expect(got).toHaveLength(n);
    return got;
  };
  const complete = async (task: Assignment, body: Record<string, unknown>): Promise<void> => {
    const res = await api(c.url, 'POST', `/api/tasks/${task.task_id}/complete`, {
      lease_token: task.lease_token,
      ...body,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };

  it('hands a DAG dependent its predecessors’ results, naming one too large to go inline', async () => {
    const type = uniqueType('inputs-dag');
    const big = 'x'.repeat(20 * 1024);
    const dag = await api<{ tasks: { ref: string; task_id: string }[] }>(c.url, 'POST', '/api/dags', {
      tasks: [
        { ref: 'a', task_type: `${type}.first`, payload: { n: 1 } },
        { ref: 'b', task_type: `${type}.first`, payload: { n: 2 } },
        { ref: 'huge', task_type: `${type}.first`, payload: { n: 3 } },
        { ref: 'none', task_type: `${type}.first`, payload: { n: 4 } },
        { ref: 'c', task_type: `${type}.then`, depends_on: ['a', 'b', 'huge', 'none'] },
        { ref: 'solo', task_type: `${type}.solo` },
      ],
    });
    expect(dag.status, JSON.stringify(dag.body)).toBe(201);
    const id = (ref: string): string => dag.body.tasks.find((t) => t.ref === ref)!.task_id;

    // A task with no predecessors carries no inputs.
    const [solo] = await poll(`${type}.solo`, 1);
    expect(solo).toBeDefined();
    expect(solo).not.toHaveProperty('inputs');

    const firsts = await pollAll(`${type}.first`, 4);
    for (const task of firsts) {
      expect(task).not.toHaveProperty('inputs');
      if (task.task_id === id('huge')) await complete(task, { status: 'succeeded', result: { big } });
      else if (task.task_id === id('none')) await complete(task, { status: 'succeeded' });
      else await complete(task, { status: 'succeeded', result: { from: task.task_id, list: [1, 'two', null] } });
    }
    const [then] = await pollAll(`${type}.then`, 1);
    expect(then!.task_id).toBe(id('c'));
    expect(then!.inputs).toEqual({
      [id('a')]: { from: id('a'), list: [1, 'two', null] },
      [id('b')]: { from: id('b'), list: [1, 'two', null] },
      [id('none')]: null,
    });
    expect(then!.inputs_omitted).toEqual([id('huge')]);
    expect(then).not.toHaveProperty('inputs_more');
  });

  it('hands a resumed parent its first 100 children’s results and counts the rest', async () => {
    const type = uniqueType('inputs-parent');
    const parentId = (await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', { task_type: `${type}.parent` })).body
      .task_id;
    const [parent] = await pollAll(`${type}.parent`, 1);
    const spawned = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', `/api/tasks/${parentId}/children`, {
      lease_token: parent!.lease_token,
      tasks: Array.from({ length: 103 }, (_, i) => ({ task_type: `${type}.child`, child_key: `k-${i}`, payload: i })),
    });
    expect(spawned.status, JSON.stringify(spawned.body)).toBe(201);
    await complete(parent!, { status: 'waiting_children', on_child_failure: 'continue' });

    const children = await pollAll(`${type}.child`, 103);
    const ids = children.map((t) => t.task_id).sort();
    for (const [i, child] of children.entries()) {
      if (i === 0) await complete(child, { status: 'failed', error: 'no', retryable: false });
      else await complete(child, { status: 'succeeded', result: { child: child.task_id } });
    }
    const [resumed] = await pollAll(`${type}.parent`, 1);
    expect(resumed!.attempt).toBe(2);
    const first100 = ids.slice(0, 100);
    expect(Object.keys(resumed!.inputs ?? {}).sort()).toEqual(first100);
    for (const childId of first100) {
      expect(resumed!.inputs![childId]).toEqual(childId === children[0]!.task_id ? null : { child: childId });
    }
    expect(resumed!.inputs_more).toBe(3);
    expect(resumed).not.toHaveProperty('inputs_omitted');
  });
});
