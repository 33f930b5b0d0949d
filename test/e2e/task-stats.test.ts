import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodeEvents } from '../../src/domain/events.js';
import { TypedEvents } from '../../src/lib/events.js';
import { systemClock } from '../../src/runtime/clock.js';
import { TaskStatsRollup } from '../../src/services/task-stats.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { ended, startOperation } from '../support/operations.js';
import { eventually } from '../support/waits.js';

/**
 * The kept history of task activity (`task_stats`, GET /admin/stats;
 * docs/decisions/0034-task-stats-rollup.md) on each backend, over HTTP: what workers did to
 * the tasks of a type is what the route's totals say once the node has flushed, summed over
 * the nodes that counted it, and it is still there after a restart.
 */
interface Totals {
  submitted: number;
  started: number;
  succeeded: number;
  failed: number;
  retried: number;
  cancelled: number;
  expired: number;
  failure_rate: number | null;
  start_lag_p50_ms: number | null;
  start_lag_p99_ms: number | null;
  start_lag_max_ms: number | null;
}
interface Stats {
  task_type: string | null;
  from: string;
  to: string;
  step_seconds: number;
  totals: Totals;
  series: (Totals & { at: string })[];
  now: { ready: number; running: number; running_capped: boolean };
  task_types: string[];
}
interface Polled {
  tasks: { task_id: string; lease_token: string }[];
}

describe.each(BACKENDS)('task activity history on %s', (backend) => {
  let c: TestCluster;
  const type = `stats.${backend}.${randomBytes(3).toString('hex')}`;
  const N = 7;
  const SUCCEED = 3;
  const FAIL = 2; // for good (max_retries 0)
  const RETRY = 1; // fails once, back to pending
  // and one stays running

  beforeAll(async () => {
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent', statsFlushSeconds: 0.1 });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const stats = async (query: string): Promise<Stats> => {
    const r = await api<Stats>(c.url, 'GET', `/admin/stats?${query}`);
    if (r.status !== 200) throw new Error(`GET /admin/stats?${query}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  /** The totals of `of` (default: `type`) once they say `expected` (the node flushes every 0.1 s). */
  const totalsReach = (expected: Partial<Totals>, of = type): Promise<Stats> =>
    eventually(
      async () => {
        const s = await stats(`task_type=${encodeURIComponent(of)}`);
        return Object.entries(expected).every(([k, v]) => s.totals[k as keyof Totals] === v) ? s : undefined;
      },
      10_000,
      `the totals of ${of} to reach ${JSON.stringify(expected)}`,
    );
  /**
   * The totals of `of` once all the node counted until now is written: a flush takes all it
   * counted at once, so once a submission made now is in the totals, everything before it is.
   */
  const settledTotals = async (of: string): Promise<Totals> => {
    const tick = `${type}.tick`;
    const before = (await stats(`task_type=${encodeURIComponent(tick)}`)).totals.submitted;
    expect((await api(c.url, 'POST', '/api/tasks', { task_type: tick })).status).toBe(201);
    await totalsReach({ submitted: before + 1 }, tick);
    return (await stats(`task_type=${encodeURIComponent(of)}`)).totals;
  };

  it('counts exactly what happened to the tasks of a type: submitted, started, succeeded, failed, retried', async () => {
    for (let i = 0; i < N; i++) {
      const r = await api(c.url, 'POST', '/api/tasks', { task_type: type, max_retries: i < SUCCEED + FAIL ? 0 : 1 });
      expect(r.status).toBe(201);
    }
    // Another type's tasks are not in this type's totals (they are in the unfiltered ones).
    expect((await api(c.url, 'POST', '/api/tasks', { task_type: `${type}.other` })).status).toBe(201);

    const leases: Polled['tasks'] = [];
    await eventually(async () => {
      const polled = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
        worker_id: 'w-stats',
        task_types: [type],
        max_tasks: N - leases.length,
        wait_ms: 1000,
      });
      leases.push(...polled.body.tasks);
      return leases.length === N ? true : undefined;
    });
    const outcomes = [...Array<string>(SUCCEED).fill('succeeded'), ...Array<string>(FAIL + RETRY).fill('failed')];
    // Submission order is not poll order: which task fails for good is its max_retries'
    // business, so the outcomes go by the submission's index.
    const byId = new Map<string, number>();
    const list = await api<{ tasks: { task_id: string; max_retries: number }[] }>(
      c.url,
      'GET',
      `/api/tasks?task_type=${encodeURIComponent(type)}&limit=100`,
    );
    for (const t of list.body.tasks) byId.set(t.task_id, t.max_retries);
    const once = leases.filter((l) => byId.get(l.task_id) === 0);
    const twice = leases.filter((l) => byId.get(l.task_id) === 1);
    expect([once.length, twice.length]).toEqual([SUCCEED + FAIL, N - SUCCEED - FAIL]);
    const ends = [...once.map((l, i) => [l, outcomes[i]] as const), [twice[0]!, 'failed'] as const];
    for (const [lease, status] of ends) {
      const r = await api(c.url, 'POST', `/api/tasks/${lease.task_id}/complete`, {
        lease_token: lease.lease_token,
        status,
        ...(status === 'failed' ? { error: 'no' } : {}),
      });
      expect(r.status).toBe(200);
    }

    const s = await totalsReach({ submitted: N, started: N, succeeded: SUCCEED, failed: FAIL, retried: RETRY });
    expect(s.totals).toMatchObject({ cancelled: 0, expired: 0, failure_rate: FAIL / (SUCCEED + FAIL) });
    expect(s.totals.start_lag_p99_ms).toEqual(expect.any(Number));
    expect(s.totals.start_lag_p99_ms!).toBeLessThanOrEqual(s.totals.start_lag_max_ms!);
    expect(s.task_type).toBe(type);
    expect(s.task_types).toEqual(expect.arrayContaining([type, `${type}.other`]));
    // The series adds up to the totals, and one task still runs.
    expect(s.series.reduce((n, x) => n + x.succeeded, 0)).toBe(SUCCEED);
    expect(s.series.reduce((n, x) => n + x.started, 0)).toBe(N);
    expect(s.now.running).toBe(1);
    // Unfiltered, the other type's submission is counted too.
    expect((await stats('')).totals.submitted).toBeGreaterThanOrEqual(N + 1);
  });

  it('counts tasks cancelled before they ran (DELETE, an operation) once, and a running task once at its end', async () => {
    const cancelType = `${type}.cancel`;
    const submit = async (body: Record<string, unknown>): Promise<string> => {
      const r = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', { task_type: cancelType, ...body });
      expect(r.status).toBe(201);
      return r.body.task_id;
    };
    // One running: its cancel is requested, and counted when its attempt ends cancelled.
    const running = await submit({});
    const leased = await eventually(async () => {
      const polled = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
        worker_id: 'w-stats-cancel',
        task_types: [cancelType],
        max_tasks: 1,
        wait_ms: 1000,
      });
      return polled.body.tasks[0];
    });
    expect(leased.task_id).toBe(running);
    expect((await api(c.url, 'DELETE', `/api/tasks/${running}`)).status).toBe(200);
    const result = await api(c.url, 'POST', `/api/tasks/${running}/complete`, {
      lease_token: leased.lease_token,
      status: 'succeeded',
    });
    expect(result.status).toBe(200);
    // Three that never ran: one by DELETE, two by an operation.
    const later = { schedule: { type: 'delayed', delay_seconds: 3600 } };
    const deleted = await submit(later);
    await submit(later);
    await submit(later);
    expect((await api(c.url, 'DELETE', `/api/tasks/${deleted}`)).status).toBe(200);
    const op = await startOperation(c.url, { action: 'cancel', filter: { task_type: cancelType, status: 'pending' } });
    expect(await ended(() => c.url, op.operation_id)).toMatchObject({ state: 'done', done: 2 });

    await totalsReach({ submitted: 4, started: 1, cancelled: 4 }, cancelType);
    expect(await settledTotals(cancelType)).toMatchObject({ submitted: 4, started: 1, cancelled: 4, failed: 0 });
  });

  it('does not count a wait with no unfinished child as a retry', async () => {
    const waitType = `${type}.wait`;
    expect((await api(c.url, 'POST', '/api/tasks', { task_type: waitType })).status).toBe(201);
    const pollOne = () =>
      eventually(async () => {
        const polled = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
          worker_id: 'w-stats-wait',
          task_types: [waitType],
          max_tasks: 1,
          wait_ms: 1000,
        });
        return polled.body.tasks[0];
      });
    const complete = async (lease: Polled['tasks'][number], status: string): Promise<void> => {
      const r = await api(c.url, 'POST', `/api/tasks/${lease.task_id}/complete`, {
        lease_token: lease.lease_token,
        status,
      });
      expect(r.status).toBe(200);
    };
    // It has no child: back to pending at once, and it runs again.
    await complete(await pollOne(), 'waiting_children');
    await complete(await pollOne(), 'succeeded');
    await totalsReach({ submitted: 1, started: 2, succeeded: 1 }, waitType);
    expect(await settledTotals(waitType)).toMatchObject({ started: 2, succeeded: 1, retried: 0, failed: 0 });
  });

  it("adds up two nodes' rows: another node's counts of the same minutes join this one's", async () => {
    const before = (await stats(`task_type=${encodeURIComponent(type)}`)).totals;
    // A second node's rollup, on the same store, counting from events of its own.
    const events = new TypedEvents<NodeEvents>();
    const other = new TaskStatsRollup({
      store: c.node.backend.stats,
      nodeId: 'stats-other-node',
      clock: systemClock,
      retentionMs: 86_400_000,
      maxTaskTypes: 100,
      events,
    });
    other.listen(events);
    const nowMs = Date.now();
    events.emit('task:submitted', { taskIds: ['a', 'b'], taskTypes: [type, type] });
    events.emit('task:claimed', {
      workerId: 'w2',
      taskIds: ['a', 'b'],
      tasks: [
        { taskType: type, dueMs: nowMs - 40 },
        { taskType: type, dueMs: nowMs - 20_000 },
      ],
      startedMs: nowMs,
    });
    await other.flush();
    const after = await totalsReach({ submitted: before.submitted + 2, started: before.started + 2 });
    expect(after.totals.succeeded).toBe(before.succeeded);
    // The longest lag is the other node's 20 s one.
    expect(after.totals.start_lag_max_ms).toBe(20_000);
    const rows = await c.sql<{ node_id: string }>('SELECT DISTINCT node_id FROM task_stats WHERE task_type = $1', [
      type,
    ]);
    expect(rows.map((r) => r.node_id).sort()).toEqual([c.node.options.nodeId, 'stats-other-node'].sort());
  });

  it('keeps the history across a restart of the node, with what it counted since its last flush', async () => {
    const before = (await stats(`task_type=${encodeURIComponent(type)}`)).totals;
    expect(before.submitted).toBeGreaterThan(0);
    // Submitted just before the node stops: its last flush, on the way out, writes them.
    for (let i = 0; i < 2; i++) expect((await api(c.url, 'POST', '/api/tasks', { task_type: type })).status).toBe(201);
    await c.restart();
    const after = (await stats(`task_type=${encodeURIComponent(type)}`)).totals;
    expect(after).toEqual({ ...before, submitted: before.submitted + 2 });
  });

  it('answers steps of whole minutes over the range, and refuses a step that is not', async () => {
    const from = new Date(Date.now() - 30 * 60_000).toISOString();
    const s = await stats(`task_type=${encodeURIComponent(type)}&from=${from}&step=300`);
    expect(s.step_seconds).toBe(300);
    expect(s.series.length).toBeGreaterThanOrEqual(6);
    expect(s.series.length).toBeLessThanOrEqual(8);
    expect(s.series.reduce((n, x) => n + x.submitted, 0)).toBe(s.totals.submitted);
    expect((await api(c.url, 'GET', '/admin/stats?step=90')).status).toBe(400);
    expect((await api(c.url, 'GET', `/admin/stats?from=${encodeURIComponent('not a time')}`)).status).toBe(400);
  });
});
