import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { ended, startOperation, type OperationBody } from '../support/operations.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * A parent that waits for its children without holding a worker (docs/api.md, "Children of a
 * running task"; docs/decisions/0033-waiting-for-children.md), through the HTTP routes of a
 * real node, on each backend: `status: waiting_children` ends the attempt, the task is
 * `waiting` with no lease, its children run meanwhile under the parent's own limit of
 * concurrency 1 (so its permit went back), and once they have ended it runs once more with
 * their summary; `on_child_failure` both ways; a retried attempt that spawned half; a lease
 * that is not held cannot make it wait.
 */

interface Assignment {
  task_id: string;
  task_type: string;
  attempt: number;
  lease_token: string;
  children?: { total: number; succeeded: number; failed: number; cancelled: number };
}
interface TaskJson {
  status: string;
  attempts: number;
  last_error: string | null;
}

describe.each(BACKENDS)('a parent waits for its children, on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const poll = async (types: string[], wait = 5_000): Promise<Assignment[]> => {
    const polled = await api<{ tasks: Assignment[] }>(c.url, 'POST', '/api/workers/poll', {
      worker_id: 'w-one-slot',
      task_types: types,
      max_tasks: 1,
      wait_ms: wait,
    });
    expect(polled.status, JSON.stringify(polled.body)).toBe(200);
    return polled.body.tasks;
  };
  const pollOne = async (type: string): Promise<Assignment> => {
    const [task] = await poll([type]);
    expect(task, `a task of ${type}`).toBeDefined();
    return task!;
  };
  const complete = (task: Pick<Assignment, 'task_id' | 'lease_token'>, body: Record<string, unknown>) =>
    api<{ ok?: boolean; error?: { code: string } }>(c.url, 'POST', `/api/tasks/${task.task_id}/complete`, {
      lease_token: task.lease_token,
      ...body,
    });
  const getTask = async (id: string): Promise<TaskJson> => (await api<TaskJson>(c.url, 'GET', `/api/tasks/${id}`)).body;
  const spawn = async (parent: Assignment, tasks: Record<string, unknown>[]): Promise<string[]> => {
    const res = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', `/api/tasks/${parent.task_id}/children`, {
      lease_token: parent.lease_token,
      tasks,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.tasks.map((t) => t.task_id);
  };
  const submit = async (type: string, extra: Record<string, unknown> = {}): Promise<string> => {
    const res = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', { task_type: type, ...extra });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.task_id;
  };
  const keyed = (type: string, from: number, n: number, extra: Record<string, unknown> = {}) =>
    Array.from({ length: n }, (_, i) => ({ task_type: type, child_key: `k-${from + i}`, ...extra }));

  it('waits for 300 children spawned in 3 requests, holding no permit, and runs once more with their summary', async () => {
    const parentType = uniqueType('parent');
    const childType = uniqueType('child');
    // One permit for the parent and its children together: were the waiting parent still
    // holding it, no child could start.
    const limit = `onewait-${Math.random().toString(36).slice(2, 8)}`;
    expect((await api(c.url, 'PUT', `/api/limits/${limit}`, { concurrency: 1 })).status).toBe(200);
    const parentId = await submit(parentType, { limits: [limit] });
    const first = await pollOne(parentType);
    expect(first.task_id).toBe(parentId);
    expect(first.children).toBeUndefined();
    // The first request's first child carries no limit, so that it can run (and end) before
    // the wait, while the parent still holds the permit: it is counted all the same.
    const [early] = await spawn(first, [
      { task_type: childType, child_key: 'k-0' },
      ...keyed(childType, 1, 99, { limits: [limit] }),
    ]);
    const earlyRun = await pollOne(childType);
    expect(earlyRun.task_id).toBe(early);
    expect((await complete(earlyRun, { status: 'succeeded', result: { early: true } })).status).toBe(200);
    for (let r = 1; r < 3; r++) await spawn(first, keyed(childType, r * 100, 100, { limits: [limit] }));
    const waited = await complete(first, { status: 'waiting_children' });
    expect(waited.status, JSON.stringify(waited.body)).toBe(200);
    expect((await getTask(parentId)).status).toBe('waiting');

    // One task at a time, of either type: the children run while the parent waits, and the
    // parent comes back once, after the last of them.
    let childRuns = 0;
    let again: Assignment | undefined;
    while (again === undefined) {
      const [task] = await poll([parentType, childType]);
      if (task === undefined) throw new Error(`nothing to run after ${childRuns} children`);
      if (task.task_type === parentType) again = task;
      else {
        childRuns++;
        expect((await complete(task, { status: 'succeeded' })).status).toBe(200);
      }
    }
    expect(childRuns).toBe(299);
    expect(again.task_id).toBe(parentId);
    expect(again.attempt).toBe(2);
    expect(again.children).toEqual({ total: 300, succeeded: 300, failed: 0, cancelled: 0 });
    expect((await complete(again, { status: 'succeeded' })).status).toBe(200);
    expect(await poll([parentType], 0)).toEqual([]);
    const done = await getTask(parentId);
    expect(done.status).toBe('succeeded');
    expect(done.attempts).toBe(2);
    const history = await api<{ executions: { attempt: number; status: string }[] }>(
      c.url,
      'GET',
      `/api/tasks/${parentId}/history`,
    );
    expect(history.body.executions.map((e) => [e.attempt, e.status])).toEqual([
      [2, 'succeeded'],
      [1, 'waiting'],
    ]);
  }, 60_000);

  it('refuses a wait whose lease is not held (409), and then the parent is not waiting', async () => {
    const type = uniqueType('stale');
    const id = await submit(type);
    const run = await pollOne(type);
    await spawn(run, [{ task_type: uniqueType('never') }]);
    const wrong = await complete(
      { task_id: id, lease_token: `${run.lease_token.slice(0, -2)}xx` },
      {
        status: 'waiting_children',
      },
    );
    expect(wrong.status).toBe(409);
    expect(wrong.body.error?.code).toBe('lease_not_held');
    expect((await getTask(id)).status).toBe('running');
    expect((await complete(run, { status: 'waiting_children' })).status).toBe(200);
    // The same token again: its attempt has ended.
    const stale = await complete(run, { status: 'waiting_children' });
    expect(stale.status).toBe(409);
    expect((await getTask(id)).status).toBe('waiting');
    const explained = await api<{ sentence: string }>(c.url, 'GET', `/api/tasks/${id}/explain`);
    expect(explained.body.sentence).toBe(
      'Waiting for 1 of 1 child: it runs again once all have ended, and holds no worker meanwhile.',
    );
  });

  /** `wheelhouse_tasks_finished_total` of `type`, by outcome, from `/metrics`. */
  const finishedAttempts = async (type: string): Promise<Record<string, number>> => {
    const text = (await api<string>(c.url, 'GET', '/metrics')).body;
    const counts: Record<string, number> = {};
    for (const [, labels = '', value] of text.matchAll(/^wheelhouse_tasks_finished_total\{([^}]*)\} (\S+)$/gm)) {
      if (!labels.includes(`task_type="${type}"`)) continue;
      const outcome = /outcome="([^"]*)"/.exec(labels)?.[1] ?? '';
      counts[outcome] = (counts[outcome] ?? 0) + Number(value);
    }
    return counts;
  };

  it('runs a parent with no unfinished child again at once, its wait counted as one and not as a failure', async () => {
    const type = uniqueType('nochild');
    const id = await submit(type);
    const run = await pollOne(type);
    expect((await complete(run, { status: 'waiting_children' })).status).toBe(200);
    const again = await pollOne(type);
    expect(again.task_id).toBe(id);
    expect(again.attempt).toBe(2);
    expect(again.children).toEqual({ total: 0, succeeded: 0, failed: 0, cancelled: 0 });
    // The attempt that waited ended as a wait does (the handler ended well), not as a retry's failure.
    expect(await finishedAttempts(type)).toEqual({ succeeded: 1 });
  });

  /** Runs every ready child of `type` to the end, failing those whose id is in `fail` for good. */
  const runChildren = async (type: string, n: number, fail: ReadonlySet<string> = new Set()): Promise<void> => {
    for (let i = 0; i < n; i++) {
      const task = await pollOne(type);
      const body = fail.has(task.task_id)
        ? { status: 'failed', error: 'broken page', retryable: false }
        : { status: 'succeeded' };
      expect((await complete(task, body)).status).toBe(200);
    }
  };

  it('on_child_failure fail (the default): a child that fails for good fails the parent, naming it; the others run on', async () => {
    const type = uniqueType('strict');
    const childType = uniqueType('strict-child');
    const id = await submit(type);
    const run = await pollOne(type);
    const kids = await spawn(run, keyed(childType, 0, 3));
    expect((await complete(run, { status: 'waiting_children' })).status).toBe(200);
    const task = await pollOne(childType);
    expect((await complete(task, { status: 'failed', error: 'broken page', retryable: false })).status).toBe(200);
    const failed = await eventually(async () => {
      const t = await getTask(id);
      return t.status === 'failed' ? t : undefined;
    });
    expect(failed.last_error).toBe(`child ${task.task_id} failed`);
    // Its other children are not touched: they run as any task.
    const others = kids.filter((k) => k !== task.task_id);
    for (const k of others) expect(['pending', 'ready']).toContain((await getTask(k)).status);
    await runChildren(childType, 2);
    expect(await poll([type], 0)).toEqual([]);
    expect((await getTask(id)).status).toBe('failed');
  });

  it('on_child_failure fail: a child that failed before the wait fails the parent at once; with continue it only counts', async () => {
    for (const mode of ['fail', 'continue'] as const) {
      const type = uniqueType(`early-${mode}`);
      const childType = uniqueType(`early-${mode}-child`);
      const id = await submit(type);
      const run = await pollOne(type);
      const kids = await spawn(run, keyed(childType, 0, 2));
      // Both children end while the parent's attempt still runs: one fails for good.
      const first = await pollOne(childType);
      expect((await complete(first, { status: 'failed', error: 'broken page', retryable: false })).status).toBe(200);
      await runChildren(childType, 1);
      expect((await complete(run, { status: 'waiting_children', on_child_failure: mode })).status).toBe(200);
      if (mode === 'fail') {
        const failed = await getTask(id);
        expect(failed.status).toBe('failed');
        expect(failed.last_error).toBe(`child ${first.task_id} failed`);
        expect(await poll([type], 0)).toEqual([]);
      } else {
        const again = await pollOne(type);
        expect(again.children).toEqual({ total: 2, succeeded: 1, failed: 1, cancelled: 0 });
      }
      expect(kids).toContain(first.task_id);
    }
  });

  it('on_child_failure continue: the parent runs again once every child has ended, whatever its end', async () => {
    const type = uniqueType('lenient');
    const childType = uniqueType('lenient-child');
    const id = await submit(type);
    const run = await pollOne(type);
    const kids = await spawn(run, keyed(childType, 0, 4));
    const cancelled = await spawn(run, [{ task_type: uniqueType('cancelled-child') }]);
    const waited = await complete(run, { status: 'waiting_children', on_child_failure: 'continue' });
    expect(waited.status).toBe(200);
    expect((await api(c.url, 'DELETE', `/api/tasks/${cancelled[0]}`)).status).toBeLessThan(300);
    await runChildren(childType, 4, new Set([kids[1]!]));
    const again = await pollOne(type);
    expect(again.task_id).toBe(id);
    expect(again.attempt).toBe(2);
    expect(again.children).toEqual({ total: 5, succeeded: 3, failed: 1, cancelled: 1 });
  });

  it('a retried attempt that spawned half spawns the rest and waits: no child twice, and the wait uses no retry', async () => {
    const type = uniqueType('retried');
    const childType = uniqueType('retried-child');
    const id = await submit(type, { max_retries: 2 });
    const first = await pollOne(type);
    const half = await spawn(first, keyed(childType, 0, 50));
    expect((await complete(first, { status: 'failed', error: 'lost the index', retryable: true })).status).toBe(200);
    const second = await eventually(async () => (await poll([type], 1_000))[0], 15_000, 'the retry');
    expect(second.attempt).toBe(2);
    const all = await spawn(second, keyed(childType, 0, 100));
    expect(all.slice(0, 50)).toEqual(half);
    expect(new Set(all).size).toBe(100);
    expect((await complete(second, { status: 'waiting_children' })).status).toBe(200);
    await runChildren(childType, 100);
    const third = await pollOne(type);
    expect(third.task_id).toBe(id);
    expect(third.attempt).toBe(3);
    expect(third.children).toEqual({ total: 100, succeeded: 100, failed: 0, cancelled: 0 });
    // Attempt 3 is only the second that counts against max_retries 2 (the wait was not a
    // failure), so its failure is retried.
    expect((await complete(third, { status: 'failed', error: 'once more', retryable: true })).status).toBe(200);
    expect((await getTask(id)).status).toBe('pending');
  }, 60_000);

  it('cancels a waiting parent with its unfinished children: pending ones at once, a running one at its next result', async () => {
    const type = uniqueType('cancelled');
    const childType = uniqueType('cancelled-child');
    const id = await submit(type);
    const run = await pollOne(type);
    const kids = await spawn(run, keyed(childType, 0, 3));
    const finished = await pollOne(childType);
    expect((await complete(finished, { status: 'succeeded' })).status).toBe(200);
    const running = await pollOne(childType);
    expect((await complete(run, { status: 'waiting_children' })).status).toBe(200);
    expect((await api(c.url, 'DELETE', `/api/tasks/${id}`)).status).toBe(200);
    expect((await getTask(id)).status).toBe('cancelled');
    expect((await getTask(finished.task_id)).status).toBe('succeeded');
    const pending = kids.filter((k) => k !== finished.task_id && k !== running.task_id);
    for (const k of pending) {
      const child = await getTask(k);
      expect(child.status).toBe('cancelled');
      expect(child.last_error).toBe(`parent ${id} cancelled`);
    }
    expect((await complete(running, { status: 'succeeded' })).status).toBe(200);
    expect((await getTask(running.task_id)).status).toBe('cancelled');
    expect(await poll([type, childType], 0)).toEqual([]);
  });

  /** A parent waiting for `n` children of `childType`, one of which waits for 2 of its own: ids. */
  const twoGenerations = async (type: string, childType: string) => {
    const id = await submit(type);
    const run = await pollOne(type);
    const kids = await spawn(run, keyed(childType, 0, 3));
    expect((await complete(run, { status: 'waiting_children' })).status).toBe(200);
    const middle = await pollOne(childType);
    const grandchildren = await spawn(middle, keyed(`${childType}-g`, 0, 2));
    expect((await complete(middle, { status: 'waiting_children' })).status).toBe(200);
    return { id, kids, middle: middle.task_id, grandchildren };
  };

  it('an operation’s cancel of a waiting parent takes its children, and theirs, with it', async () => {
    const type = uniqueType('op-cancelled');
    const childType = uniqueType('op-cancelled-child');
    const { id, kids, middle, grandchildren } = await twoGenerations(type, childType);
    const started = await startOperation(c.url, { action: 'cancel', filter: { task_type: type, status: 'waiting' } });
    const op: OperationBody = await ended(() => c.url, started.operation_id);
    expect(op).toMatchObject({ state: 'done', matched: 1, done: 1 });
    expect((await getTask(id)).status).toBe('cancelled');
    for (const k of kids) expect((await getTask(k)).last_error).toBe(`parent ${id} cancelled`);
    for (const g of grandchildren) {
      const grandchild = await getTask(g);
      expect(grandchild.status).toBe('cancelled');
      expect(grandchild.last_error).toBe(`parent ${middle} cancelled`);
    }
    expect(await poll([type, childType, `${childType}-g`], 0)).toEqual([]);
  });

  it('a parent cancelled while it runs takes its children with it when its attempt ends waiting', async () => {
    const type = uniqueType('late-cancelled');
    const childType = uniqueType('late-cancelled-child');
    const id = await submit(type);
    const run = await pollOne(type);
    const kids = await spawn(run, keyed(childType, 0, 2));
    expect((await api(c.url, 'DELETE', `/api/tasks/${id}`)).status).toBe(200);
    expect((await complete(run, { status: 'waiting_children' })).status).toBe(200);
    expect((await getTask(id)).status).toBe('cancelled');
    for (const k of kids) {
      const child = await eventually(async () => {
        const t = await getTask(k);
        return t.status === 'cancelled' ? t : undefined;
      });
      expect(child.last_error).toBe(`parent ${id} cancelled`);
    }
  });

  it('DELETE of a waiting parent reaches its grandchildren', async () => {
    const type = uniqueType('deep-cancelled');
    const childType = uniqueType('deep-cancelled-child');
    const { id, middle, grandchildren } = await twoGenerations(type, childType);
    expect((await api(c.url, 'DELETE', `/api/tasks/${id}`)).status).toBe(200);
    expect((await getTask(middle)).status).toBe('cancelled');
    for (const g of grandchildren) expect((await getTask(g)).status).toBe('cancelled');
  });
});
