import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAG } from '../../src/actors/dag-node.js';
import { FakeClock } from '../../src/runtime/clock.js';
import { dagClient, idsOf, ms, rowCounts, type DagClient, type Polled } from '../support/dags.js';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { eventually, quiescent } from '../support/waits.js';
import { tokenDigest, uniqueType } from '../support/tasks.js';

const quiet = { logLevel: process.env.TEST_LOG ?? 'silent' };

/**
 * Time-dependent behaviour on a FakeClock: a dependent's own delayed schedule, the periodic
 * outbox replay and the safety-net sweep (both only look at what settled 5 s ago), and the
 * passivation of idle DAG actors.
 */
describe.each(BACKENDS)('DAG timing on %s, on a FakeClock', (backend: BackendName) => {
  let c: TestCluster;
  let w: DagClient;
  const clock = new FakeClock();
  beforeAll(async () => {
    c = await startTestNode(
      backend,
      { ...quiet, dagSweepSeconds: 1, dagIdlePassivationSeconds: 5, cronAdvanceSpreadSeconds: 0 },
      { clock },
    );
    w = dagClient(() => c.url);
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  /** Polls without waiting, after letting due timers run. */
  const pollNow = async (types: string[], max = 1000): Promise<Polled[]> => {
    await clock.advance(0);
    return w.poll(types, max, 0);
  };
  /** Polls until `n` tasks came (time does not move). */
  const takeNow = async (types: string[], n: number): Promise<Polled[]> => {
    const got: Polled[] = [];
    await eventually(
      async () => {
        got.push(...(await pollNow(types, n - got.length)));
        return got.length >= n ? true : undefined;
      },
      30_000,
      `${n} tasks of ${types.join(', ')}`,
    );
    expect(got).toHaveLength(n);
    return got;
  };
  /** Moves time in steps of `stepMs` until `check` holds. */
  const advanceUntil = async <T>(
    stepMs: number,
    maxMs: number,
    check: () => Promise<T | undefined>,
    what: string,
  ): Promise<T> => {
    const start = clock.now();
    for (;;) {
      const value = await check();
      if (value !== undefined) return value;
      if (clock.now() - start > maxMs) throw new Error(`${what}: not after ${maxMs} ms of fake time`);
      await clock.advance(stepMs);
      await quiescent(c.node, { clock, intervalMs: 20, allowReady: true, allowLeases: true });
    }
  };
  const counter = (name: string): Promise<number> => c.node.metrics.value(name);
  /** Blocked tasks the DAG sweep (a safety net) found and reconciled. */
  const sweptCount = (): Promise<number> =>
    c.node.metrics.value('wheelhouse_safety_net_recovered_total', { kind: 'blocked' });

  it('releases a dependent with its own delay at the later of its due time and its predecessor success', async () => {
    const type = uniqueType('delay');
    const t0 = clock.now();
    const submitted = await w.submitDag({
      tasks: [
        { ref: 'p', task_type: type, timeout_seconds: 3600 },
        { ref: 'late', task_type: type, depends_on: ['p'], schedule: { type: 'delayed', delay_seconds: 60 } },
        { ref: 'early', task_type: type, depends_on: ['p'], schedule: { type: 'delayed', delay_seconds: 10 } },
      ],
    });
    expect(submitted.status).toBe(201);
    const id = idsOf(submitted.body);
    expect(submitted.body.tasks.map((t) => [t.status, ms(t.due_time) - t0])).toEqual([
      ['pending', 0],
      ['blocked', 60_000],
      ['blocked', 10_000],
    ]);
    const [p] = await takeNow([type], 1);
    // The predecessor runs 30 s: past the early one's own due time, before the late one's.
    await clock.advance(30_000);
    expect(await pollNow([type])).toEqual([]);
    await w.complete([p!]);

    const early = await w.waitStatus(id.early!, ['pending', 'ready']);
    expect(early.status).toBe('ready');
    expect(ms(early.due_time)).toBe(t0 + 30_000);
    const late = await w.waitStatus(id.late!, ['pending', 'ready']);
    expect(late.status).toBe('pending');
    expect(ms(late.due_time)).toBe(t0 + 60_000);
    const [e] = await takeNow([type], 1);
    expect(e!.task_id).toBe(id.early);
    await w.complete([e!]);

    await clock.advance(29_999);
    expect(await pollNow([type])).toEqual([]);
    expect((await w.task(id.late!)).status).toBe('pending');
    await clock.advance(1);
    const [l] = await advanceUntil(
      10,
      10_000,
      async () => {
        const got = await pollNow([type]);
        return got.length > 0 ? got : undefined;
      },
      'the late task',
    );
    expect(l!.task_id).toBe(id.late);
    expect(ms((await w.task(id.late!)).started_at)).toBeGreaterThanOrEqual(t0 + 60_000);
    await w.complete([l!]);
  });

  /** p → d, with p's result written by the store behind the node's back (no live delivery). */
  const completedBehindTheBack = async (type: string): Promise<{ p: string; d: string }> => {
    const submitted = await w.submitDag({
      tasks: [
        { ref: 'p', task_type: type, timeout_seconds: 3600 },
        { ref: 'd', task_type: type, depends_on: ['p'] },
      ],
    });
    const id = idsOf(submitted.body);
    const [p] = await takeNow([type], 1);
    const [transition] = await c.node.backend.tasks.complete(
      [
        {
          taskId: id.p!,
          tokenDigest: tokenDigest(p!.lease_token),
          outcome: 'succeeded',
          error: null,
          retryable: true,
        },
      ],
      clock.now(),
      { baseMs: 1000, maxMs: 1000 },
    );
    expect(transition).toMatchObject({ status: 'succeeded', notifyDependents: true });
    expect((await w.task(id.d!)).status).toBe('blocked');
    return { p: id.p!, d: id.d! };
  };

  it('delivers an outbox event the live path missed with the periodic replay', async () => {
    const type = uniqueType('replay');
    const [replayed, swept] = [await counter('wheelhouse_dag_events_replayed_total'), await sweptCount()];
    const { d } = await completedBehindTheBack(type);
    await advanceUntil(
      1000,
      20_000,
      async () => ((await w.task(d)).status === 'blocked' ? undefined : true),
      'the replay',
    );
    const [task] = await takeNow([type], 1);
    expect(task!.task_id).toBe(d);
    await w.complete([task!]);
    expect((await counter('wheelhouse_dag_events_replayed_total')) - replayed).toBe(1);
    expect((await sweptCount()) - swept).toBe(0);
    expect(await rowCounts(c)).toMatchObject({ events: 0 });
  });

  it('finds a dependent whose outbox event was lost with the sweep, and counts it', async () => {
    const type = uniqueType('sweep');
    const [replayed, swept] = [await counter('wheelhouse_dag_events_replayed_total'), await sweptCount()];
    const { p, d } = await completedBehindTheBack(type);
    await c.sql('DELETE FROM dag_events WHERE predecessor_id = $1', [p]);
    await advanceUntil(
      1000,
      20_000,
      async () => ((await w.task(d)).status === 'blocked' ? undefined : true),
      'the sweep',
    );
    const [task] = await takeNow([type], 1);
    expect(task).toMatchObject({ task_id: d, attempt: 1 });
    await w.complete([task!]);
    expect((await sweptCount()) - swept).toBe(1);
    expect((await counter('wheelhouse_dag_events_replayed_total')) - replayed).toBe(0);
    const metrics = await api<string>(c.url, 'GET', '/metrics');
    expect(metrics.body).toMatch(/^wheelhouse_safety_net_recovered_total\{kind="blocked"\} [1-9]/m);
    // Nothing else was stuck: more sweeps find nothing.
    await clock.advance(3000);
    await clock.advance(3000);
    expect((await sweptCount()) - swept).toBe(1);
  });

  it("takes a cron instance as predecessor: its success releases the dependent; the schedule's delete cancels the next one's dependent", async () => {
    const type = uniqueType('cron');
    const schedule = await w.submitTask({ task_type: type, schedule: { type: 'cron', cron_expression: '* * * * *' } });
    expect(schedule.status).toBe(201);
    const scheduleId = schedule.body.task_id;
    /** The schedule's waiting instance. */
    const nextInstance = (after: string | null): Promise<string> =>
      eventually(
        async () => {
          await clock.advance(0);
          const rows = await c.sql<{ id: string }>(
            "SELECT id::text FROM tasks WHERE schedule_id = $1 AND status IN ('pending', 'blocked') ORDER BY fire_time",
            [scheduleId],
          );
          const id = rows[0]?.id;
          return id !== undefined && id !== after ? id : undefined;
        },
        30_000,
        'the next instance',
      );

    const i1 = await nextInstance(null);
    const d1 = await w.submitTask({ task_type: `${type}.dep`, dependencies: [i1] });
    expect(d1.body.status).toBe('blocked');
    await clock.advance(Math.ceil((clock.now() + 1) / 60_000) * 60_000 - clock.now());
    const [fired] = await advanceUntil(
      100,
      10_000,
      async () => {
        const got = await pollNow([type]);
        return got.length > 0 ? got : undefined;
      },
      'the first instance',
    );
    expect(fired!.task_id).toBe(i1);
    await w.complete([fired!]);
    const [dep] = await takeNow([`${type}.dep`], 1);
    expect(dep!.task_id).toBe(d1.body.task_id);
    await w.complete([dep!]);

    const i2 = await nextInstance(i1);
    const d2 = await w.submitTask({ task_type: `${type}.dep`, dependencies: [i2] });
    expect(d2.body.status).toBe('blocked');
    const swept = await sweptCount();
    expect((await w.cancel(scheduleId)).status).toBe(200);
    expect((await w.task(i2)).status).toBe('cancelled');
    // Not on the live path: the outbox replay takes it to the dependent within seconds.
    const cancelled = await advanceUntil(
      1000,
      20_000,
      async () => {
        const t = await w.task(d2.body.task_id);
        return t.status === 'blocked' ? undefined : t;
      },
      'the replay',
    );
    expect(cancelled).toMatchObject({ status: 'cancelled', last_error: `predecessor ${i2} cancelled` });
    expect((await sweptCount()) - swept).toBe(0);
    expect(await pollNow([`${type}.dep`])).toEqual([]);
  });

  it('keeps blocked tasks as rows, not actors: the actors a predecessor woke passivate when idle', async () => {
    const type = uniqueType('passivate');
    const n = 300;
    const actors = () => c.node.system.countByKind().get(DAG.name) ?? 0;
    const submitted = await w.submitDag({
      tasks: [
        { ref: 'r1', task_type: type, payload: 'r1', timeout_seconds: 3600 },
        { ref: 'r2', task_type: type, payload: 'r2', timeout_seconds: 3600 },
        ...Array.from({ length: n }, (_, i) => ({ ref: `t${i}`, task_type: `${type}.leaf`, depends_on: ['r1', 'r2'] })),
      ],
    });
    expect(submitted.status).toBe(201);
    const dagId = submitted.body.dag_id;
    const satisfied = async (k: number): Promise<number> =>
      (
        await c.sql<{ n: number }>(
          'SELECT count(*)::int AS n FROM tasks WHERE dag_id = $1 AND deps_total = 2 AND deps_satisfied = $2',
          [dagId, k],
        )
      )[0]!.n;
    // Submitted and waiting: no actor at all.
    expect(actors()).toBe(0);

    const roots = await takeNow([type], 2);
    await w.complete(roots.filter((t) => t.payload === 'r1'));
    await eventually(async () => ((await satisfied(1)) === n ? true : undefined), 30_000, 'every leaf to count r1');
    // Each leaf's actor took the event in and waits, idle (time has not moved).
    expect(actors()).toBe(n);
    await clock.advance(4000);
    expect(actors()).toBe(n);
    await clock.advance(1000);
    await eventually(
      async () => {
        await clock.advance(0);
        return actors() === 0 ? true : undefined;
      },
      30_000,
      'the idle DAG actors to passivate',
    );
    expect(await satisfied(1)).toBe(n);

    // The second root: every leaf is released, its actor stops at once (no idle time needed).
    await w.complete(roots.filter((t) => t.payload === 'r2'));
    const leaves = await takeNow([`${type}.leaf`], n);
    expect(new Set(leaves.map((t) => t.task_id)).size).toBe(n);
    await eventually(async () => (actors() === 0 ? true : undefined), 30_000, 'released actors to stop');
    await w.complete(leaves);
    expect((await w.waitDagDone(dagId)).counts).toEqual({ succeeded: n + 2 });
  });
});
