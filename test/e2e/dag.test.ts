import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TIMED_OUT } from '../../src/domain/attempt-errors.js';
import { DAG } from '../../src/actors/dag-node.js';
import { ConfigError, compileOptions } from '../../src/lib/config.js';
import { chain, dagClient, idsOf, ms, rowCounts, type DagClient, type Polled } from '../support/dags.js';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { eventually, sleep } from '../support/waits.js';
import { tokenDigest, uniqueType } from '../support/tasks.js';

/**
 * Task dependencies end to end, through a real node on each backend: graphs submitted with
 * POST /api/dags (or tasks with `dependencies`), run by a worker over HTTP and by the
 * built-in `wheelhouse.noop` executor. A task runs only once all its predecessors have
 * succeeded; a predecessor that fails for good or is cancelled cancels its dependents, all
 * the way down; nothing is written for a refused graph; a completion whose dependents were
 * not told before the node stopped is delivered when it starts again, exactly once.
 */
const NOOP = 'wheelhouse.noop';
const quiet = { logLevel: process.env.TEST_LOG ?? 'silent' };

describe.each(BACKENDS)('DAGs on %s', (backend: BackendName) => {
  let c: TestCluster;
  let w: DagClient;
  beforeAll(async () => {
    c = await startTestNode(backend, {
      ...quiet,
      builtinExecutors: true,
      retryBaseSeconds: 0.05,
      retryMaxSeconds: 0.2,
    });
    w = dagClient(() => c.url);
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  it('runs a chain in order, each task after its predecessor completed', async () => {
    const submitted = await w.submitDag({ tasks: chain('c', 12, NOOP) });
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(201);
    expect(submitted.body.tasks.map((t) => t.status)).toEqual(['pending', ...Array<string>(11).fill('blocked')]);
    const done = await w.waitDagDone(submitted.body.dag_id);
    expect(done.status).toBe('succeeded');
    expect(done.counts).toEqual({ succeeded: 12 });
    expect(done.tasks.map((t) => t.ref)).toEqual(Array.from({ length: 12 }, (_, i) => `c${i}`));
    for (let i = 1; i < 12; i++) {
      const [prev, t] = [done.tasks[i - 1]!, done.tasks[i]!];
      expect(t.depends_on).toEqual([prev.ref]);
      expect(t.attempts).toBe(1);
      expect(ms(t.started_at)).toBeGreaterThanOrEqual(ms(prev.completed_at));
    }
  });

  it('runs a diamond: fan-out after the root, fan-in only after both branches; shows blocked tasks and the graph', async () => {
    const type = uniqueType('diamond');
    const submitted = await w.submitDag({
      tasks: [
        { ref: 'a', task_type: type, payload: { n: 'a' } },
        { ref: 'b', task_type: type, depends_on: ['a'] },
        { ref: 'c', task_type: type, depends_on: ['a'] },
        { ref: 'd', task_type: type, depends_on: ['b', 'c'] },
      ],
    });
    expect(submitted.status).toBe(201);
    expect(submitted.body.tasks.map((t) => [t.ref, t.status])).toEqual([
      ['a', 'pending'],
      ['b', 'blocked'],
      ['c', 'blocked'],
      ['d', 'blocked'],
    ]);
    const id = idsOf(submitted.body);
    const dagId = submitted.body.dag_id;

    const d0 = await w.task(id.d!);
    expect(d0).toMatchObject({
      status: 'blocked',
      dependencies: [id.b, id.c].sort(),
      dependencies_satisfied: 0,
      dag_id: dagId,
      ref: 'd',
    });
    const graph0 = await w.dag(dagId);
    expect(graph0.status).toBe('running');
    expect(graph0.tasks.map((t) => [t.ref, t.task_id, t.depends_on])).toEqual([
      ['a', id.a, []],
      ['b', id.b, ['a']],
      ['c', id.c, ['a']],
      ['d', id.d, ['b', 'c']],
    ]);
    expect(graph0.tasks[0]!.status).toMatch(/^(pending|ready)$/);
    const blocked = await api<{ tasks: { task_id: string }[] }>(
      c.url,
      'GET',
      `/api/tasks?status=blocked&task_type=${type}`,
    );
    expect(blocked.body.tasks.map((t) => t.task_id).sort()).toEqual([id.b, id.c, id.d].sort());
    expect(graph0.tasks.slice(1).map((t) => t.status)).toEqual(['blocked', 'blocked', 'blocked']);

    const [a] = await w.take([type], 1);
    expect(a!.task_id).toBe(id.a);
    expect(await w.poll([type], 10, 200)).toEqual([]);
    await w.complete([a!]);

    const branches = await w.take([type], 2);
    expect(branches.map((t) => t.task_id).sort()).toEqual([id.b, id.c].sort());
    const b = branches.find((t) => t.task_id === id.b)!;
    const cTask = branches.find((t) => t.task_id === id.c)!;
    await w.complete([b]);
    // One of two predecessors counted: still blocked, not handed out.
    await eventually(
      async () => ((await w.task(id.d!)).dependencies_satisfied === 1 ? true : undefined),
      30_000,
      'd to count b',
    );
    expect((await w.task(id.d!)).status).toBe('blocked');
    expect(await w.poll([type], 10, 200)).toEqual([]);

    await w.complete([cTask]);
    const [d] = await w.take([type], 1);
    expect(d!.task_id).toBe(id.d);
    expect(d!.attempt).toBe(1);
    await w.complete([d!]);
    const done = await w.waitDagDone(dagId);
    expect(done.status).toBe('succeeded');
    const byRef = Object.fromEntries(done.tasks.map((t) => [t.ref, t]));
    expect(ms(byRef.d!.started_at)).toBeGreaterThanOrEqual(
      Math.max(ms(byRef.b!.completed_at), ms(byRef.c!.completed_at)),
    );
    expect(ms(byRef.b!.started_at)).toBeGreaterThanOrEqual(ms(byRef.a!.completed_at));
    expect(await w.task(id.d!)).toMatchObject({ status: 'succeeded', dependencies_satisfied: 2, attempts: 1 });
  });

  it('counts every task a submission writes, blocked ones included, in wheelhouse_tasks_submitted_total', async () => {
    const submitted = (): Promise<number> => c.node.metrics.value('wheelhouse_tasks_submitted_total');
    const before = await submitted();
    const type = uniqueType('counted');
    const graph = await w.submitDag({
      tasks: [
        { ref: 'a', task_type: type },
        { ref: 'b', task_type: type, depends_on: ['a'] },
        { ref: 'c', task_type: type, depends_on: ['b'] },
      ],
    });
    expect(await submitted()).toBe(before + 3);
    expect(graph.status).toBe(201);
    const one = await api<{ status: string }>(c.url, 'POST', '/api/tasks', {
      task_type: type,
      dependencies: [idsOf(graph.body)['c']],
    });
    expect(one.body.status).toBe('blocked');
    expect(await submitted()).toBe(before + 4);
  });

  it('runs a task with 1 000 predecessors once, after all of them', async () => {
    const sinkType = uniqueType('fanin');
    const preds = Array.from({ length: 1000 }, (_, i) => ({ ref: `p${i}`, task_type: NOOP, payload: { i } }));
    const submitted = await w.submitDag({
      tasks: [...preds, { ref: 'sink', task_type: sinkType, depends_on: preds.map((p) => p.ref) }],
    });
    expect(submitted.status, JSON.stringify(submitted.body).slice(0, 500)).toBe(201);
    const sinkId = idsOf(submitted.body).sink!;
    expect((await w.task(sinkId)).dependencies).toHaveLength(1000);

    const [sink] = await w.take([sinkType], 1, 90_000);
    expect(sink).toMatchObject({ task_id: sinkId, attempt: 1 });
    const [row] = await c.sql<{ max_ms: number; n: number; succeeded: number }>(
      `SELECT round(date_part('epoch', max(completed_at)) * 1000)::float8 AS max_ms, count(*)::int AS n,
              count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded
       FROM tasks WHERE dag_id = $1 AND id <> $2`,
      [submitted.body.dag_id, sinkId],
    );
    expect(row).toMatchObject({ n: 1000, succeeded: 1000 });
    const running = await w.task(sinkId);
    expect(running).toMatchObject({ status: 'running', dependencies_satisfied: 1000 });
    expect(ms(running.started_at)).toBeGreaterThanOrEqual(Number(row!.max_ms));
    await w.complete([sink!]);
    expect((await w.waitDagDone(submitted.body.dag_id)).counts).toEqual({ succeeded: 1001 });
    expect(await w.poll([sinkType], 10, 200)).toEqual([]);
    // Every dependent took its events in: the outbox empties.
    await eventually(async () => ((await rowCounts(c)).events === 0 ? true : undefined), 30_000, 'the outbox to empty');
  });

  it('cancels three levels down when a predecessor fails for good (not retryable, retries spent, lease expired); a retried one does not', async () => {
    const type = uniqueType('fail');
    const submitted = await w.submitDag({
      tasks: [
        // Fails with retries left but not retryable: failed at once.
        { ref: 'a', task_type: type, max_retries: 3, payload: 'a' },
        { ref: 'b', task_type: type, depends_on: ['a'] },
        { ref: 'c', task_type: type, depends_on: ['b'] },
        { ref: 'd', task_type: type, depends_on: ['c'] },
        // Unrelated branch of the same graph: runs.
        { ref: 's', task_type: NOOP },
        { ref: 'e', task_type: NOOP, depends_on: ['s'] },
        // Retryable failures: once with a retry left (its dependent waits), once with none.
        { ref: 'x', task_type: type, max_retries: 1, payload: 'x' },
        { ref: 'y', task_type: NOOP, depends_on: ['x'] },
        { ref: 'z', task_type: type, max_retries: 0, payload: 'z' },
        { ref: 'zz', task_type: NOOP, depends_on: ['z'] },
        // A lease that runs out with no retry left.
        { ref: 'l', task_type: type, max_retries: 0, timeout_seconds: 1, payload: 'l' },
        { ref: 'll', task_type: NOOP, depends_on: ['l'] },
      ],
    });
    expect(submitted.status).toBe(201);
    const id = idsOf(submitted.body);

    const roots = await w.take([type], 4);
    const root = (p: string): Polled => roots.find((t) => t.payload === p)!;
    await w.complete([root('a')], 'failed', { error: 'bad input', retryable: false });
    await w.complete([root('x'), root('z')], 'failed', { error: 'flaky', retryable: true });
    // l is never completed: its lease runs out.

    const d = await w.waitStatus(id.d!, 'cancelled');
    expect(await w.task(id.a!)).toMatchObject({ status: 'failed', attempts: 1, last_error: 'bad input' });
    expect(await w.task(id.b!)).toMatchObject({
      status: 'cancelled',
      attempts: 0,
      last_error: `predecessor ${id.a} failed`,
    });
    expect(await w.task(id.c!)).toMatchObject({
      status: 'cancelled',
      attempts: 0,
      last_error: `predecessor ${id.b} cancelled`,
    });
    expect(d).toMatchObject({ attempts: 0, last_error: `predecessor ${id.c} cancelled`, started_at: null });
    expect(d.completed_at).not.toBeNull();

    expect(await w.waitStatus(id.zz!, 'cancelled')).toMatchObject({ last_error: `predecessor ${id.z} failed` });
    expect(await w.task(id.z!)).toMatchObject({ status: 'failed', attempts: 1 });
    expect(await w.waitStatus(id.ll!, 'cancelled', 60_000)).toMatchObject({ last_error: `predecessor ${id.l} failed` });
    expect(await w.task(id.l!)).toMatchObject({ status: 'failed', last_error: TIMED_OUT });

    // x went back to pending: y still waits, then runs once x succeeds on its second attempt.
    expect((await w.task(id.y!)).status).toBe('blocked');
    const [x2] = await w.take([type], 1);
    expect(x2).toMatchObject({ task_id: id.x, attempt: 2 });
    expect((await w.task(id.y!)).status).toBe('blocked');
    await w.complete([x2!]);
    expect(await w.waitStatus(id.y!, 'succeeded')).toMatchObject({ attempts: 1 });

    const done = await w.waitDagDone(submitted.body.dag_id);
    expect(done.status).toBe('failed');
    expect(done.counts).toEqual({ failed: 3, cancelled: 5, succeeded: 4 });
    // None of the cancelled ones was ever handed out.
    expect(await w.poll([type], 10, 200)).toEqual([]);
    for (const ref of ['b', 'c', 'd', 'zz', 'll']) {
      const history = await api<{ executions: unknown[] }>(c.url, 'GET', `/api/tasks/${id[ref]}/history`);
      expect(history.body.executions, ref).toEqual([]);
    }
  });

  it('cancels the dependents of a cancelled task: blocked, pending and running ones', async () => {
    const type = uniqueType('cancel');
    const submitted = await w.submitDag({
      tasks: [
        ...chain('m', 4, type),
        { ref: 'later', task_type: type, schedule: { type: 'delayed', delay_seconds: 3600 } },
        ...chain('q', 3, type).map((t, i) => (i === 0 ? { ...t, depends_on: ['later'] } : t)),
        { ref: 'run', task_type: type, payload: 'run' },
        { ref: 'after', task_type: type, depends_on: ['run'] },
      ],
    });
    expect(submitted.status).toBe(201);
    const id = idsOf(submitted.body);

    // A blocked task in the middle of a chain: it and everything below it.
    const del = await w.cancel(id.m1!);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ ok: true, cancelled_instances: 1 });
    expect((await w.task(id.m1!)).status).toBe('cancelled');
    expect(await w.waitStatus(id.m3!, 'cancelled')).toMatchObject({ last_error: `predecessor ${id.m2} cancelled` });
    expect(await w.task(id.m2!)).toMatchObject({ status: 'cancelled', last_error: `predecessor ${id.m1} cancelled` });
    expect((await w.cancel(id.m1!)).status).toBe(409);
    expect((await w.cancel(id.m3!)).status).toBe(409);

    // A pending root (due in an hour): its chain, three levels.
    expect((await w.cancel(id.later!)).status).toBe(200);
    expect(await w.waitStatus(id.q2!, 'cancelled')).toMatchObject({ last_error: `predecessor ${id.q1} cancelled` });
    expect(await w.task(id.q0!)).toMatchObject({
      status: 'cancelled',
      last_error: `predecessor ${id.later} cancelled`,
    });

    // A running one: cancel is requested; its report then records cancelled, and the dependent follows.
    const taken = await w.take([type], 2);
    const m0 = taken.find((t) => t.task_id === id.m0)!;
    const run = taken.find((t) => t.task_id === id.run)!;
    expect(m0).toBeDefined();
    expect(run).toBeDefined();
    expect((await w.cancel(id.run!)).status).toBe(200);
    expect((await w.task(id.after!)).status).toBe('blocked');
    await w.complete([run, m0]);
    expect((await w.task(id.run!)).status).toBe('cancelled');
    expect(await w.waitStatus(id.after!, 'cancelled')).toMatchObject({ last_error: `predecessor ${id.run} cancelled` });
    // m0 succeeded, but its dependent was cancelled before: nothing runs.
    expect((await w.task(id.m0!)).status).toBe('succeeded');
    expect(await w.poll([type], 10, 300)).toEqual([]);
    const done = await w.waitDagDone(submitted.body.dag_id);
    expect(done).toMatchObject({ status: 'cancelled', counts: { succeeded: 1, cancelled: 9 } });
  });

  it('decides a task submitted on finished predecessors at once: succeeded → pending, failed or cancelled → cancelled', async () => {
    const type = uniqueType('late');
    const submitted = await w.submitDag({
      tasks: [
        { ref: 'ok', task_type: type, payload: 'ok' },
        { ref: 'bad', task_type: type, payload: 'bad', max_retries: 0 },
        { ref: 'gone', task_type: type, schedule: { type: 'delayed', delay_seconds: 3600 } },
        { ref: 'open', task_type: type, schedule: { type: 'delayed', delay_seconds: 3600 } },
      ],
    });
    const id = idsOf(submitted.body);
    const two = await w.take([type], 2);
    await w.complete(two.filter((t) => t.payload === 'ok'));
    await w.complete(
      two.filter((t) => t.payload === 'bad'),
      'failed',
      { error: 'x', retryable: false },
    );
    expect((await w.cancel(id.gone!)).status).toBe(200);

    const onOk = await w.submitTask({ task_type: type, dependencies: [id.ok] });
    expect(onOk.status).toBe(201);
    expect(onOk.body.status).toBe('pending');
    const [ran] = await w.take([type], 1);
    expect(ran!.task_id).toBe(onOk.body.task_id);
    await w.complete([ran!]);

    const onBad = await w.submitTask({ task_type: type, dependencies: [id.ok, id.bad] });
    expect(onBad.status).toBe(201);
    expect(onBad.body.status).toBe('cancelled');
    expect(await w.task(onBad.body.task_id)).toMatchObject({
      status: 'cancelled',
      last_error: `predecessor ${id.bad} failed`,
    });
    const onGone = await w.submitTask({ task_type: type, dependencies: [id.gone] });
    expect(onGone.body.status).toBe('cancelled');
    expect((await w.task(onGone.body.task_id)).last_error).toBe(`predecessor ${id.gone} cancelled`);

    // The same predecessor twice (any case) is one edge; a batch takes the same path.
    const twice = await api<{ tasks: { task_id: string; status: string }[] }>(c.url, 'POST', '/api/tasks/batch', {
      tasks: [
        { task_type: type, dependencies: [id.ok, id.ok!.toUpperCase()] },
        { task_type: type, dependencies: [id.bad] },
      ],
    });
    expect(twice.status).toBe(201);
    expect(twice.body.tasks.map((t) => t.status)).toEqual(['pending', 'cancelled']);
    expect(await w.task(twice.body.tasks[0]!.task_id)).toMatchObject({
      dependencies: [id.ok],
      dependencies_satisfied: 1,
    });
    const [again] = await w.take([type], 1);
    expect(again!.task_id).toBe(twice.body.tasks[0]!.task_id);
    await w.complete([again!]);

    const mixed = await w.submitTask({ task_type: type, dependencies: [id.open, id.ok] });
    expect(mixed.body.status).toBe('blocked');
    expect(await w.task(mixed.body.task_id)).toMatchObject({
      status: 'blocked',
      dependencies: [id.ok, id.open].sort(),
      dependencies_satisfied: 1,
    });
    // And a graph naming existing tasks by id.
    const graph = await w.submitDag({
      tasks: [
        { ref: 'n1', task_type: type, depends_on: [id.ok!] },
        { ref: 'n2', task_type: type, depends_on: [id.bad!.toUpperCase()] },
        { ref: 'n3', task_type: type, depends_on: ['n2'] },
      ],
    });
    expect(graph.status).toBe(201);
    expect(graph.body.tasks.map((t) => t.status)).toEqual(['pending', 'cancelled', 'cancelled']);
    const g = idsOf(graph.body);
    expect((await w.dag(graph.body.dag_id)).tasks.map((t) => [t.ref, t.depends_on])).toEqual([
      ['n1', [id.ok]],
      ['n2', [id.bad]],
      ['n3', ['n2']],
    ]);
    expect((await w.task(g.n3!)).last_error).toBe(`predecessor ${g.n2} cancelled`);
    const [n1] = await w.take([type], 1);
    expect(n1!.task_id).toBe(g.n1);
    await w.complete([n1!]);
    expect(await w.poll([type], 10, 200)).toEqual([]);
  });

  it('runs or cancels every dependent submitted while its predecessor ends (no dependent left blocked)', async () => {
    for (const ending of ['succeeded', 'cancelled'] as const) {
      const type = uniqueType(`race.${ending}`);
      const p = await w.submitTask({ task_type: type });
      const [taken] = await w.take([type], 1);
      // 30 submissions spread over a few milliseconds, the predecessor's end in the middle.
      const submissions = Array.from({ length: 30 }, async (_, i) => {
        await sleep(i % 10); // real time is the subject: spreads the submissions over 10 ms
        return w.submitTask({ task_type: `${type}.dep`, dependencies: [p.body.task_id] });
      });
      await sleep(4); // real time is the subject: the end lands in the middle of the submissions
      if (ending === 'succeeded') await w.complete([taken!]);
      else expect((await w.cancel(p.body.task_id)).status).toBe(200);
      const results = await Promise.all(submissions);
      expect(results.map((r) => r.status)).toEqual(Array(30).fill(201));
      const ids = results.map((r) => r.body.task_id).sort();
      if (ending === 'succeeded') {
        const ran = await w.take([`${type}.dep`], 30);
        expect(ran.map((t) => t.task_id).sort()).toEqual(ids);
        await w.complete(ran);
      } else {
        // Running when cancelled: its report ends it.
        await w.complete([taken!]);
        for (const id of ids)
          expect(await w.waitStatus(id, 'cancelled')).toMatchObject({
            last_error: `predecessor ${p.body.task_id} cancelled`,
          });
      }
      expect(await w.poll([`${type}.dep`], 100, 200)).toEqual([]);
    }
  });

  it('refuses cycles, unknown refs and ids, duplicate refs and invalid tasks with 400, writing nothing', async () => {
    const type = uniqueType('refuse');
    const [existing] = (
      await w.submitDag({ tasks: [{ ref: 'e', task_type: type, schedule: { type: 'delayed', delay_seconds: 3600 } }] })
    ).body.tasks;
    const cron = await w.submitTask({ task_type: type, schedule: { type: 'cron', cron_expression: '0 0 1 1 *' } });
    expect(cron.status).toBe(201);
    const unknownId = '01a22a51-78a4-791b-b49b-95e4238cdce3';
    // Nothing moves while the rows are counted: the schedule has its instance, the outbox is empty.
    await eventually(
      async () => {
        const [row] = await c.sql<{ n: number }>('SELECT count(*)::int AS n FROM tasks WHERE schedule_id = $1', [
          cron.body.task_id,
        ]);
        return row!.n > 0 && (await rowCounts(c)).events === 0 ? true : undefined;
      },
      30_000,
      'the node to settle',
    );
    const before = await rowCounts(c);

    const cases: [string, string, unknown, string][] = [
      [
        'cycle',
        '/api/dags',
        {
          tasks: [
            { ref: 'a', task_type: type, depends_on: ['c'] },
            { ref: 'b', task_type: type, depends_on: ['a'] },
            { ref: 'c', task_type: type, depends_on: ['b'] },
          ],
        },
        'dependency_cycle',
      ],
      [
        'self',
        '/api/dags',
        {
          tasks: [
            { ref: 'a', task_type: type },
            { ref: 'b', task_type: type, depends_on: ['a', 'b'] },
          ],
        },
        'dependency_cycle',
      ],
      [
        'unknown ref',
        '/api/dags',
        {
          tasks: [
            { ref: 'a', task_type: type },
            { ref: 'b', task_type: type, depends_on: ['nope'] },
          ],
        },
        'unknown_dependency',
      ],
      [
        'unknown id',
        '/api/dags',
        {
          idempotency_key: `k-${type}`,
          tasks: [
            { ref: 'a', task_type: type },
            { ref: 'b', task_type: type, depends_on: ['a', unknownId] },
          ],
        },
        'unknown_dependency',
      ],
      [
        'duplicate ref',
        '/api/dags',
        {
          tasks: [
            { ref: 'a', task_type: type },
            { ref: 'a', task_type: type },
          ],
        },
        'validation_failed',
      ],
      [
        'invalid task',
        '/api/dags',
        {
          tasks: [
            { ref: 'a', task_type: type },
            { ref: 'b', task_type: type, priority: 12, depends_on: ['a'] },
          ],
        },
        'validation_failed',
      ],
      [
        'cron in a graph',
        '/api/dags',
        { tasks: [{ ref: 'a', task_type: type, schedule: { type: 'cron', cron_expression: '* * * * *' } }] },
        'validation_failed',
      ],
      [
        'cron predecessor',
        '/api/dags',
        { tasks: [{ ref: 'a', task_type: type, depends_on: [cron.body.task_id] }] },
        'validation_failed',
      ],
      [
        'dependencies in a graph',
        '/api/dags',
        { tasks: [{ ref: 'a', task_type: type, dependencies: [existing!.task_id] }] },
        'validation_failed',
      ],
      ['empty graph', '/api/dags', { tasks: [] }, 'validation_failed'],
      [
        'task on unknown id',
        '/api/tasks',
        { task_type: type, dependencies: [existing!.task_id, unknownId] },
        'unknown_dependency',
      ],
      [
        'task on a cron schedule',
        '/api/tasks',
        { task_type: type, dependencies: [cron.body.task_id] },
        'validation_failed',
      ],
      [
        'cron task with dependencies',
        '/api/tasks',
        {
          task_type: type,
          schedule: { type: 'cron', cron_expression: '* * * * *' },
          dependencies: [existing!.task_id],
        },
        'validation_failed',
      ],
      [
        'batch with an unknown id',
        '/api/tasks/batch',
        { tasks: [{ task_type: type }, { task_type: type, dependencies: [unknownId] }] },
        'unknown_dependency',
      ],
    ];
    for (const [what, path, body, code] of cases) {
      const r = await api<{ error: { code: string; message: string } }>(c.url, 'POST', path, body);
      expect({ what, status: r.status, code: r.body.error?.code }).toEqual({ what, status: 400, code });
    }
    expect(await rowCounts(c)).toEqual(before);
    expect((await w.task(existing!.task_id)).status).toBe('pending');
    // The refused graph did not keep its idempotency key.
    const valid = await w.submitDag({
      idempotency_key: `k-${type}`,
      tasks: [{ ref: 'a', task_type: type, schedule: { type: 'delayed', delay_seconds: 3600 } }],
    });
    expect(valid.status).toBe(201);
    expect((await api(c.url, 'DELETE', `/api/tasks/${cron.body.task_id}`)).status).toBe(200);
  });

  it('replays a graph by idempotency key with 200 and the same ids, and refuses the key with another graph with 409', async () => {
    const type = uniqueType('idem');
    const key = `nightly-${type}`;
    const body = {
      idempotency_key: key,
      tasks: [
        {
          ref: 'extract',
          task_type: type,
          payload: { day: 30, src: 'a' },
          schedule: { type: 'delayed', delay_seconds: 3600 },
        },
        { ref: 'transform', task_type: type, depends_on: ['extract'] },
        { ref: 'load', task_type: type, depends_on: ['transform'], schedule: { type: 'delayed', delay_seconds: 30 } },
      ],
    };
    const first = await w.submitDag(body);
    expect(first.status).toBe(201);
    await eventually(async () => ((await rowCounts(c)).events === 0 ? true : undefined), 30_000, 'the outbox to empty');
    const before = await rowCounts(c);

    // The same graph, members written in another order: a replay.
    const reordered = {
      tasks: body.tasks.map((t) => Object.fromEntries(Object.entries(t).reverse())),
      idempotency_key: key,
    };
    const again = await w.submitDag(reordered);
    expect(again.status).toBe(200);
    expect(again.body.dag_id).toBe(first.body.dag_id);
    expect(again.body.tasks.map((t) => [t.ref, t.task_id])).toEqual(first.body.tasks.map((t) => [t.ref, t.task_id]));
    expect(await rowCounts(c)).toEqual(before);

    const other = await w.submitDag({
      ...body,
      tasks: [{ ...body.tasks[0]!, payload: { day: 31, src: 'a' } }, ...body.tasks.slice(1)],
    });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('idempotency_conflict');
    expect(await rowCounts(c)).toEqual(before);
    // A task's own key and a graph's key live apart: the same key on a task is a task of its own,
    // and a task with dependencies replays like any other.
    const extract = first.body.tasks[0]!.task_id;
    const withDeps = { task_type: type, idempotency_key: key, dependencies: [extract] };
    const own = await w.submitTask(withDeps);
    expect(own.status).toBe(201);
    expect(own.body.status).toBe('blocked');
    const ownCounts = await rowCounts(c);
    const replayed = await w.submitTask(withDeps);
    expect(replayed.status).toBe(200);
    expect(replayed.body.task_id).toBe(own.body.task_id);
    expect((await w.submitTask({ ...withDeps, dependencies: [first.body.tasks[1]!.task_id] })).status).toBe(409);
    expect(await rowCounts(c)).toEqual(ownCounts);

    expect((await w.cancel(first.body.tasks[0]!.task_id)).status).toBe(200);
    const cancelled = await eventually(async () => {
      const d = await w.dag(first.body.dag_id);
      return d.status === 'cancelled' ? d : undefined;
    });
    expect(cancelled.counts).toEqual({ cancelled: 3 });
    expect(await w.waitStatus(own.body.task_id, 'cancelled')).toMatchObject({
      last_error: `predecessor ${extract} cancelled`,
    });
    // A replay after the graph moved on answers its state now.
    const late = await w.submitDag(body);
    expect(late.status).toBe(200);
    expect(late.body.tasks.map((t) => t.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
  });

  it('answers 404 for an unknown graph and 400 for a malformed id', async () => {
    const missing = await api<{ error: { code: string } }>(
      c.url,
      'GET',
      '/api/dags/01a22a51-78a4-791b-b49b-95e4238cdce3',
    );
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('task_not_found');
    expect((await api(c.url, 'GET', '/api/dags/not-a-uuid')).status).toBe(400);
  });

  it('counts a duplicated predecessor_succeeded once, and a message naming a predecessor that did not succeed not at all', async () => {
    const type = uniqueType('dup');
    const submitted = await w.submitDag({
      tasks: [
        { ref: 'p1', task_type: type, payload: 'p1' },
        { ref: 'p2', task_type: type, payload: 'p2', timeout_seconds: 600 },
        { ref: 'w', task_type: type, depends_on: ['p1', 'p2'] },
      ],
    });
    const id = idsOf(submitted.body);
    const roots = await w.take([type], 2);
    const p1 = roots.find((t) => t.payload === 'p1')!;
    const p2 = roots.find((t) => t.payload === 'p2')!;
    // p1 succeeds; p2 keeps running.
    await w.complete([p1]);
    await eventually(
      async () => ((await w.task(id.w!)).dependencies_satisfied === 1 ? true : undefined),
      30_000,
      'w to count p1',
    );

    const row = async () =>
      (
        await c.sql<{ status: string; deps_satisfied: number; version: number }>(
          'SELECT status, deps_satisfied, version FROM tasks WHERE id = $1',
          [id.w],
        )
      )[0]!;
    const settled = await row();
    const actor = () => c.node.system.ref(DAG, id.w!);
    // The same event twice, one after the other, then five at once.
    expect(await actor().ask({ type: 'predecessor_succeeded', predecessorIds: [id.p1!] })).toEqual({
      status: 'unchanged',
    });
    expect(await actor().ask({ type: 'predecessor_succeeded', predecessorIds: [id.p1!] })).toEqual({
      status: 'unchanged',
    });
    const burst = await Promise.all(
      Array.from({ length: 5 }, () => actor().ask({ type: 'predecessor_succeeded', predecessorIds: [id.p1!] })),
    );
    expect(burst).toEqual(Array(5).fill({ status: 'unchanged' }));
    // A message is a hint: one naming p2, which has not succeeded, counts nothing.
    expect(await actor().ask({ type: 'predecessor_succeeded', predecessorIds: [id.p2!] })).toEqual({
      status: 'unchanged',
    });
    expect(await actor().ask({ type: 'reconcile' })).toEqual({ status: 'unchanged' });
    // The store's reconcile, twice and concurrently: nothing to change.
    expect(await c.node.backend.dags.reconcile([id.w!], Date.now())).toEqual([]);
    expect(await c.node.backend.dags.reconcile([id.w!], Date.now())).toEqual([]);
    expect((await Promise.all([1, 2, 3].map(() => c.node.backend.dags.reconcile([id.w!], Date.now())))).flat()).toEqual(
      [],
    );
    expect(await row()).toEqual(settled);
    expect(settled).toMatchObject({ status: 'blocked', deps_satisfied: 1 });
    const edges = await c.sql<{ predecessor_id: string; satisfied: boolean }>(
      'SELECT predecessor_id::text, satisfied FROM task_dependencies WHERE task_id = $1',
      [id.w],
    );
    expect(Object.fromEntries(edges.map((e) => [e.predecessor_id, e.satisfied]))).toEqual({
      [id.p1!]: true,
      [id.p2!]: false,
    });
    expect(await w.poll([type], 10, 200)).toEqual([]);

    // p2 succeeds; then w runs, once.
    await w.complete([p2]);
    const [wTask] = await w.take([type], 1);
    expect(wTask).toMatchObject({ task_id: id.w, attempt: 1 });
    // Late duplicates of both events, while w runs and after it succeeded, change nothing.
    expect(await actor().ask({ type: 'predecessor_succeeded', predecessorIds: [id.p1!, id.p2!] })).toEqual({
      status: 'unchanged',
    });
    await w.complete([wTask!]);
    expect(await actor().ask({ type: 'predecessor_succeeded', predecessorIds: [id.p2!] })).toEqual({
      status: 'unchanged',
    });
    expect(await w.task(id.w!)).toMatchObject({ status: 'succeeded', attempts: 1, dependencies_satisfied: 2 });
    expect(await w.poll([type], 10, 200)).toEqual([]);
  });

  // Last of this block: it restarts the node.
  it('delivers a completion written just before the node stopped when it starts again: the dependent runs exactly once', async () => {
    const type = uniqueType('crash');
    const submitted = await w.submitDag({
      tasks: [
        { ref: 'p', task_type: type, payload: 'p', timeout_seconds: 600 },
        { ref: 'd', task_type: type, depends_on: ['p'], payload: 'd' },
        { ref: 'q', task_type: type, payload: 'q' },
        { ref: 'e', task_type: type, depends_on: ['q'], payload: 'e' },
        { ref: 'r', task_type: type, payload: 'r', schedule: { type: 'delayed', delay_seconds: 3600 } },
        { ref: 'f', task_type: type, depends_on: ['r'] },
        { ref: 'g', task_type: type, depends_on: ['f'] },
      ],
    });
    const id = idsOf(submitted.body);
    const roots = await w.take([type], 2);
    const p = roots.find((t) => t.payload === 'p')!;
    const q = roots.find((t) => t.payload === 'q')!;
    // q → e the ordinary way: e runs and succeeds.
    await w.complete([q]);
    const [e] = await w.take([type], 1);
    expect(e!.task_id).toBe(id.e);
    await w.complete([e!]);
    await eventually(async () => ((await rowCounts(c)).events === 0 ? true : undefined), 30_000, 'the outbox to empty');

    // p's result is written by the store directly — the statement a completion runs, outbox
    // row included — and the node stops before anything tells d.
    const [transition] = await c.node.backend.tasks.complete(
      [{ taskId: id.p!, tokenDigest: tokenDigest(p.lease_token), outcome: 'succeeded', error: null, retryable: true }],
      Date.now(),
      { baseMs: 50, maxMs: 200 },
    );
    expect(transition).toMatchObject({ status: 'succeeded', notifyDependents: true });
    // The same for a cancel: written, and nobody told.
    expect(await c.node.backend.tasks.cancel(id.r!, Date.now())).toMatchObject({ kind: 'cancelled' });
    // And q's event comes back, as if the node had died between telling e and clearing it.
    await c.sql("INSERT INTO dag_events (predecessor_id, status, created_at) VALUES ($1, 'succeeded', now())", [id.q]);
    expect((await w.task(id.d!)).status).toBe('blocked');
    expect((await w.task(id.f!)).status).toBe('blocked');
    const outbox = await c.sql<{ id: string }>('SELECT predecessor_id::text AS id FROM dag_events ORDER BY 1');
    expect(outbox.map((r) => r.id)).toEqual([id.p, id.q, id.r].sort());

    await c.restart();
    // The start delivered the three events before the node answered anything.
    expect(await c.node.metrics.value('wheelhouse_dag_events_replayed_total')).toBe(3);
    expect((await w.task(id.d!)).status).toMatch(/^(pending|ready)$/);
    expect(await w.task(id.f!)).toMatchObject({ status: 'cancelled', last_error: `predecessor ${id.r} cancelled` });
    expect(await w.waitStatus(id.g!, 'cancelled')).toMatchObject({ last_error: `predecessor ${id.f} cancelled` });
    await eventually(async () => ((await rowCounts(c)).events === 0 ? true : undefined), 30_000, 'the outbox to empty');

    const [d] = await w.take([type], 1);
    expect(d).toMatchObject({ task_id: id.d, attempt: 1 });
    await w.complete([d!]);
    expect(await w.poll([type], 10, 500)).toEqual([]);
    expect(await w.task(id.d!)).toMatchObject({ status: 'succeeded', attempts: 1, dependencies_satisfied: 1 });
    expect(await w.task(id.e!)).toMatchObject({ status: 'succeeded', attempts: 1 });
    for (const ref of ['d', 'e']) {
      const history = await api<{ executions: { attempt: number }[] }>(c.url, 'GET', `/api/tasks/${id[ref]}/history`);
      expect(
        history.body.executions.map((x) => x.attempt),
        ref,
      ).toEqual([1]);
    }
    expect((await w.dag(submitted.body.dag_id)).counts).toEqual({ succeeded: 4, cancelled: 3 });
  });
});

describe('DAG options', () => {
  it('refuses an idle passivation time of 0, naming the option, and accepts a small positive one', () => {
    expect(() => compileOptions({ dagIdlePassivationSeconds: 0 })).toThrow(ConfigError);
    expect(() => compileOptions({ dagIdlePassivationSeconds: 0 })).toThrow(/dagIdlePassivationSeconds/);
    expect(compileOptions({ dagIdlePassivationSeconds: 0.05 }).dagIdlePassivationMs).toBe(50);
  });
});
