import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import type { WheelhouseOptions } from '../../src/lib/config.js';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { eventually, quiescent } from '../support/waits.js';

/**
 * Cron schedules end to end, through a real node on each backend, on a FakeClock: a
 * schedule's actor keeps one future instance, which fires through the wheel like any task.
 * Time moves in steps; after each step the test waits until the schedule has caught up
 * (its next fire time is in the future again) before looking at what fired.
 */
const SECOND = 1000;
const MINUTE = 60 * SECOND;

interface Polled {
  tasks: { task_id: string; lease_token: string; attempt: number }[];
}
interface TaskJson {
  task_id: string;
  status: string;
  due_time: string;
  next_due_time?: string | null;
  last_fired_at?: string | null;
  cron_expression?: string;
  timezone?: string;
  schedule_id?: string;
  fire_time?: string;
  last_error: string | null;
}
interface InstanceRow extends Record<string, unknown> {
  id: string;
  status: string;
  fire_ms: number;
  due_ms: number;
  last_error: string | null;
}

const quiet: WheelhouseOptions = { logLevel: process.env.TEST_LOG ?? 'silent' };
/**
 * Most tests have schedules create their next instance right at a fire, so that "caught up"
 * (a future instance exists) holds as soon as time has passed a fire. The first test runs
 * with the default spread of those writes.
 */
const atOnce: WheelhouseOptions = { cronAdvanceSpreadSeconds: 0 };

describe.each(BACKENDS)('cron schedules on %s', (backend: BackendName) => {
  let c: TestCluster | undefined;
  afterEach(async () => {
    await c?.cleanup();
    c = undefined;
  });

  const start = async (clock: FakeClock, options: WheelhouseOptions = atOnce): Promise<TestCluster> => {
    c = await startTestNode(backend, { ...quiet, ...options }, { clock });
    return c;
  };
  const submitCron = async (
    type: string,
    schedule: Record<string, unknown>,
    extra: Record<string, unknown> = {},
  ): Promise<string> => {
    const r = await api<{ task_id: string; status: string }>(c!.url, 'POST', '/api/tasks', {
      task_type: type,
      schedule: { type: 'cron', ...schedule },
      ...extra,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.status).toBe('active');
    return r.body.task_id;
  };
  const getTask = async (id: string): Promise<TaskJson> =>
    (await api<TaskJson>(c!.url, 'GET', `/api/tasks/${id}`)).body;
  /**
   * Waits until the schedule's actor has handled every fire time up to now: its one future
   * instance (due after now, jitter included) exists.
   */
  const caughtUp = async (id: string, clock: FakeClock): Promise<TaskJson> =>
    eventually(
      async () => {
        await clock.advance(0);
        const t = await getTask(id);
        if (t.status !== 'active') return t;
        const [row] = await c!.sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM tasks
         WHERE schedule_id = $1 AND status IN ('pending', 'blocked') AND due_time > to_timestamp($2::float8 / 1000)`,
          [id, clock.now()],
        );
        return row!.n > 0 ? t : undefined;
      },
      20_000,
      `schedule ${id} to catch up`,
    );
  /** Moves time in steps, letting the schedules catch up after each. */
  const step = async (ids: string[], clock: FakeClock, stepMs: number, steps: number): Promise<void> => {
    for (let i = 0; i < steps; i++) {
      await clock.advance(stepMs);
      for (const id of ids) await caughtUp(id, clock);
    }
  };
  /**
   * Takes every ready task of `type` (completing them unless told not to): done when a poll
   * made after the node fell quiet finds nothing.
   */
  const drain = async (type: string, clock: FakeClock, complete = true): Promise<Polled['tasks']> => {
    const all: Polled['tasks'] = [];
    for (let quiet = false; ;) {
      await clock.advance(0);
      const got = (
        await api<Polled>(c!.url, 'POST', '/api/workers/poll', {
          worker_id: 'w',
          task_types: [type],
          max_tasks: 100,
          wait_ms: 0,
        })
      ).body.tasks;
      if (got.length === 0) {
        if (quiet) break;
        await quiescent(c!.node, { clock, allowReady: true, allowLeases: true });
        quiet = true;
        continue;
      }
      quiet = false;
      all.push(...got);
      if (complete) {
        const results = got.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token, status: 'succeeded' }));
        expect((await api(c!.url, 'POST', '/api/workers/complete', { results })).status).toBe(200);
      }
    }
    return all;
  };
  const instances = (scheduleId: string): Promise<InstanceRow[]> =>
    c!.sql<InstanceRow>(
      `SELECT id::text, status, last_error,
              round(date_part('epoch', fire_time) * 1000)::float8 AS fire_ms,
              round(date_part('epoch', due_time) * 1000)::float8 AS due_ms
       FROM tasks WHERE schedule_id = $1 ORDER BY fire_time`,
      [scheduleId],
    );
  const fireTimes = (rows: InstanceRow[]): number[] => rows.map((r) => Number(r.fire_ms));

  it('fires a per-second schedule once per second and a per-minute one once per minute', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 12, 0, 0, 500));
    // The default spread: a per-second schedule (in memory) writes its next instance 0.1–0.5 s
    // after a fire, a per-minute one (read back into memory) 30–54 s after.
    await start(clock, {});
    const t0 = clock.now();
    const perSecond = await submitCron('cron.sec', { cron_expression: '* * * * * *' });
    const perMinute = await submitCron('cron.min', { cron_expression: '* * * * *' });
    const first = await getTask(perSecond);
    expect(first).toMatchObject({
      status: 'active',
      cron_expression: '* * * * * *',
      timezone: 'UTC',
      last_fired_at: null,
    });
    expect(Date.parse(first.next_due_time!)).toBe(t0 + 500);

    const handed: string[] = [];
    for (let i = 0; i < 5; i++) {
      await step([perSecond], clock, SECOND, 30);
      handed.push(...(await drain('cron.sec', clock)).map((t) => t.task_id));
    }
    // 150 s from 12:00:00.5: fire times 12:00:01 … 12:02:30 and the minutes 12:01, 12:02.
    const seconds = await instances(perSecond);
    const fired = seconds.filter((r) => Number(r.fire_ms) <= clock.now());
    expect(fireTimes(fired)).toEqual(Array.from({ length: 150 }, (_, i) => t0 + 500 + i * SECOND));
    expect(new Set(handed).size).toBe(150);
    expect(handed.length).toBe(150);
    expect(fired.every((r) => r.status === 'succeeded')).toBe(true);
    // Exactly one future instance, for the next second.
    expect(fireTimes(seconds.filter((r) => Number(r.fire_ms) > clock.now()))).toEqual([t0 + 500 + 150 * SECOND]);

    const after = await getTask(perSecond);
    expect(after.last_fired_at).toBe(new Date(t0 + 500 + 149 * SECOND).toISOString());

    // The history of a schedule is its instances' executions, newest first, paginated.
    const page1 = await api<{ executions: { task_id: string; status: string }[]; next_token: string | null }>(
      c!.url,
      'GET',
      `/api/tasks/${perSecond}/history?limit=100`,
    );
    expect(page1.status).toBe(200);
    expect(page1.body.executions).toHaveLength(100);
    expect(page1.body.executions[0]!.task_id).toBe(fired.at(-1)!.id);
    const page2 = await api<{ executions: { task_id: string }[]; next_token: string | null }>(
      c!.url,
      'GET',
      `/api/tasks/${perSecond}/history?limit=100&next_token=${page1.body.next_token}`,
    );
    expect(page2.body.executions).toHaveLength(50);
    expect(page2.body.next_token).toBeNull();
    const all = [...page1.body.executions, ...page2.body.executions].map((e) => e.task_id);
    expect(all).toEqual(fired.map((r) => r.id).reverse());

    // Listing by schedule: its instances only, newest (latest fire time) first.
    const listed = await api<{ tasks: TaskJson[] }>(c!.url, 'GET', `/api/tasks?schedule_id=${perSecond}&limit=3`);
    expect(listed.status).toBe(200);
    expect(listed.body.tasks.map((t) => t.fire_time)).toEqual(
      [150, 149, 148].map((i) => new Date(t0 + 500 + i * SECOND).toISOString()),
    );
    expect(listed.body.tasks.every((t) => t.schedule_id === perSecond)).toBe(true);
    expect((await api(c!.url, 'GET', '/api/tasks?schedule_id=nope')).status).toBe(400);

    // The per-minute schedule writes its 12:03 instance 30–54 s after 12:02.
    await clock.advanceTo(Date.UTC(2026, 10, 30, 12, 2, 55));
    await caughtUp(perMinute, clock);
    const minutes = await drain('cron.min', clock);
    expect(minutes.length).toBe(2);
    expect(fireTimes(await instances(perMinute))).toEqual([
      Date.UTC(2026, 10, 30, 12, 1),
      Date.UTC(2026, 10, 30, 12, 2),
      Date.UTC(2026, 10, 30, 12, 3),
    ]);
  });

  it('pauses, resumes and deletes a schedule', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 9, 0, 10));
    await start(clock);
    const id = await submitCron('cron.pause', { cron_expression: '* * * * *' });
    await step([id], clock, MINUTE, 1);
    expect((await drain('cron.pause', clock)).length).toBe(1);

    const paused = await api<TaskJson>(c!.url, 'POST', `/api/tasks/${id}/pause`);
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ status: 'paused', next_due_time: null });
    const pending = (await instances(id)).at(-1)!;
    expect(pending).toMatchObject({ status: 'cancelled', last_error: 'the schedule was paused' });
    expect((await api<TaskJson>(c!.url, 'POST', `/api/tasks/${id}/pause`)).status).toBe(200);

    await clock.advance(3 * MINUTE);
    expect(await drain('cron.pause', clock)).toEqual([]);

    // Resumed 20 s into a minute: it goes on from now, without catching up what it paused through.
    await clock.advance(20 * SECOND);
    const resumed = await api<TaskJson>(c!.url, 'POST', `/api/tasks/${id}/resume`);
    expect(resumed.status).toBe(200);
    expect(resumed.body.status).toBe('active');
    const next = Date.UTC(2026, 10, 30, 9, 5);
    expect(Date.parse(resumed.body.next_due_time!)).toBe(next);
    await step([id], clock, 40 * SECOND, 1);
    const afterResume = await drain('cron.pause', clock);
    expect(afterResume.length).toBe(1);

    const deleted = await api<{ ok: boolean; cancelled_instances: number }>(c!.url, 'DELETE', `/api/tasks/${id}`);
    expect(deleted.body).toEqual({ ok: true, cancelled_instances: 1 });
    expect((await getTask(id)).status).toBe('cancelled');
    await clock.advance(5 * MINUTE);
    expect(await drain('cron.pause', clock)).toEqual([]);
    expect((await api(c!.url, 'DELETE', `/api/tasks/${id}`)).status).toBe(409);
    expect((await api(c!.url, 'POST', `/api/tasks/${id}/resume`)).status).toBe(409);

    // Pause is for schedules only.
    const plain = await api<{ task_id: string }>(c!.url, 'POST', '/api/tasks', { task_type: 'cron.plain' });
    const refused = await api<{ error: { code: string } }>(c!.url, 'POST', `/api/tasks/${plain.body.task_id}/pause`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('invalid_transition');
    expect((await api(c!.url, 'POST', '/api/tasks/0192f3a4-5b6c-7d8e-9f00-112233445566/pause')).status).toBe(404);
  });

  it('applies each misfire policy after a three-hour outage', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 6, 0, 30));
    await start(clock, { ...atOnce, cronFireAllLimit: 100 });
    const every10 = '*/10 * * * *';
    const once = await submitCron('cron.misfire.once', { cron_expression: every10 });
    const skip = await submitCron('cron.misfire.skip', { cron_expression: every10, misfire_policy: 'skip' });
    const all = await submitCron('cron.misfire.all', { cron_expression: every10, misfire_policy: 'fire_all' });

    // Down from 06:00:30 to 09:05:00: fire times 06:10 … 09:00 (18 of them) passed meanwhile.
    const later = new FakeClock(Date.UTC(2026, 10, 30, 9, 5, 0));
    await c!.restart({ clock: later });
    for (const id of [once, skip, all]) await caughtUp(id, later);

    const onceRan = await drain('cron.misfire.once', later);
    expect(onceRan.length).toBe(1);
    expect(await drain('cron.misfire.skip', later)).toEqual([]);
    const allRan = await drain('cron.misfire.all', later);
    expect(allRan.length).toBe(18);

    const tenMinutes = (fromH: number, fromM: number, n: number): number[] =>
      Array.from({ length: n }, (_, i) => Date.UTC(2026, 10, 30, fromH, fromM) + i * 10 * MINUTE);
    // fire_once: the overdue 06:10 instance ran as the one catch-up; next is 09:10.
    expect(fireTimes(await instances(once))).toEqual([Date.UTC(2026, 10, 30, 6, 10), Date.UTC(2026, 10, 30, 9, 10)]);
    // skip: the overdue instance was cancelled, naming the misfire; next is 09:10.
    const skipped = await instances(skip);
    expect(fireTimes(skipped)).toEqual([Date.UTC(2026, 10, 30, 6, 10), Date.UTC(2026, 10, 30, 9, 10)]);
    expect(skipped[0]).toMatchObject({ status: 'cancelled' });
    expect(skipped[0]!.last_error).toMatch(/^misfire: skipped/);
    // fire_all: every missed time once, then 09:10.
    expect(fireTimes(await instances(all))).toEqual([...tenMinutes(6, 10, 18), Date.UTC(2026, 10, 30, 9, 10)]);
    for (const id of [once, skip, all])
      expect(Date.parse((await getTask(id)).next_due_time!)).toBe(Date.UTC(2026, 10, 30, 9, 10));
  });

  it('caps fire_all at the configured limit, keeping the latest fire times', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 6, 0, 30));
    await start(clock, { ...atOnce, cronFireAllLimit: 5 });
    const id = await submitCron('cron.misfire.cap', { cron_expression: '*/10 * * * *', misfire_policy: 'fire_all' });
    const later = new FakeClock(Date.UTC(2026, 10, 30, 9, 5, 0));
    await c!.restart({ clock: later });
    await caughtUp(id, later);
    expect((await drain('cron.misfire.cap', later)).length).toBe(5);
    // The overdue instance itself, then the latest four missed times.
    expect(fireTimes(await instances(id))).toEqual([
      Date.UTC(2026, 10, 30, 6, 10),
      Date.UTC(2026, 10, 30, 8, 30),
      Date.UTC(2026, 10, 30, 8, 40),
      Date.UTC(2026, 10, 30, 8, 50),
      Date.UTC(2026, 10, 30, 9, 0),
      Date.UTC(2026, 10, 30, 9, 10),
    ]);
  });

  it('skips fire times while the previous instance still runs (overlap_policy skip)', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 15, 0, 0, 200));
    await start(clock);
    const id = await submitCron(
      'cron.overlap',
      { cron_expression: '* * * * * *', overlap_policy: 'skip' },
      { timeout_seconds: 300 },
    );
    await step([id], clock, SECOND, 1);
    const [long] = await drain('cron.overlap', clock, false);
    expect(long).toBeDefined();
    // Three more seconds while it runs: those fire times are skipped, nothing is handed out.
    await step([id], clock, SECOND, 3);
    expect(await drain('cron.overlap', clock, false)).toEqual([]);
    const rows = await instances(id);
    expect(rows.slice(1, 4).map((r) => r.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(rows[1]!.last_error).toMatch(/previous instance .* still running/);
    expect(rows.at(-1)!.status).toBe('blocked');

    await api(c!.url, 'POST', '/api/workers/complete', {
      results: [{ task_id: long!.task_id, lease_token: long!.lease_token, status: 'succeeded' }],
    });
    await step([id], clock, SECOND, 1);
    const next = await drain('cron.overlap', clock);
    expect(next.map((t) => t.task_id)).toEqual([rows.at(-1)!.id]);
  });

  it('ends at end_time: the last fire time before it fires, then the schedule has succeeded', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 20, 0, 0, 300));
    await start(clock);
    const id = await submitCron('cron.end', { cron_expression: '* * * * * *', end_time: '2026-11-30T20:00:03.500Z' });
    await step([id], clock, SECOND, 4);
    expect((await drain('cron.end', clock)).length).toBe(3);
    expect(fireTimes(await instances(id))).toEqual([1, 2, 3].map((s) => Date.UTC(2026, 10, 30, 20, 0, s)));
    const ended = await getTask(id);
    expect(ended).toMatchObject({
      status: 'succeeded',
      next_due_time: null,
      last_fired_at: '2026-11-30T20:00:03.000Z',
    });
    await clock.advance(5 * SECOND);
    expect(await drain('cron.end', clock)).toEqual([]);
    // Its actor left memory; pausing or deleting it now is a 409.
    expect((await api(c!.url, 'GET', `/admin/actors/cron/${id}`)).status).toBe(404);
    expect((await api(c!.url, 'POST', `/api/tasks/${id}/pause`)).status).toBe(409);
    expect((await api(c!.url, 'DELETE', `/api/tasks/${id}`)).status).toBe(409);
  });

  it('brings back a schedule whose actor left memory, and catches up its fire times', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 22, 0, 0, 500));
    await start(clock);
    const id = await submitCron('cron.keeper', { cron_expression: '* * * * * *' });
    await step([id], clock, SECOND, 2);
    // Its actor goes (as after a fence), its own timer with it; the wake of its row is still
    // on the wheel, which brings it back. Late fire times (< 60 s) all get instances.
    await c!.node.system.passivate('cron', id);
    expect(c!.node.system.holds('cron', id)).toBe(false);
    await clock.advance(5 * SECOND);
    await caughtUp(id, clock);
    // A per-second schedule stays in memory between fires once it is back.
    expect(c!.node.system.holds('cron', id)).toBe(true);
    const t0 = Date.UTC(2026, 10, 30, 22, 0, 1);
    const fires = fireTimes(await instances(id));
    expect(fires).toEqual(Array.from({ length: fires.length }, (_, i) => t0 + i * SECOND));
    expect(fires.at(-1)).toBeGreaterThan(clock.now());
    expect((await drain('cron.keeper', clock)).length).toBe(fires.length - 1);
  });

  it('spreads instances by jitter within its bound', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 18, 0, 5));
    await start(clock);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++)
      ids.push(await submitCron('cron.jitter', { cron_expression: '* * * * *', jitter_seconds: 30 }));
    await step(ids, clock, 30 * SECOND, 7);
    const offsets: number[] = [];
    for (const id of ids) for (const r of await instances(id)) offsets.push(Number(r.due_ms) - Number(r.fire_ms));
    expect(offsets.length).toBeGreaterThanOrEqual(60);
    expect(Math.min(...offsets)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...offsets)).toBeLessThanOrEqual(30 * SECOND);
    // Spread: the offsets cover most of the range and hardly repeat.
    expect(Math.max(...offsets) - Math.min(...offsets)).toBeGreaterThan(20 * SECOND);
    expect(new Set(offsets).size).toBeGreaterThan(offsets.length * 0.9);
    // Every instance still ran once, after its jittered due time.
    expect((await drain('cron.jitter', clock)).length).toBe(60);
  });

  it('fires each fire time exactly once across restarts mid-schedule', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 21, 0, 0, 250));
    await start(clock);
    const t0 = Date.UTC(2026, 10, 30, 21, 0, 1);
    const id = await submitCron('cron.restart', { cron_expression: '* * * * * *' });
    const handed: string[] = [];
    await step([id], clock, SECOND, 5);
    handed.push(...(await drain('cron.restart', clock)).map((t) => t.task_id));

    // Restart at once (the same instant), then after a 4 s outage (late, not a misfire), then
    // into the middle of a second.
    let now = clock.now();
    for (const gap of [0, 4 * SECOND, 1_600]) {
      now += gap;
      const next = new FakeClock(now);
      await c!.restart({ clock: next });
      await caughtUp(id, next);
      await step([id], next, SECOND, 3);
      handed.push(...(await drain('cron.restart', next)).map((t) => t.task_id));
      now = next.now();
    }
    const rows = (await instances(id)).filter((r) => Number(r.fire_ms) <= now);
    const expected = Array.from({ length: Math.floor((now - t0) / SECOND) + 1 }, (_, i) => t0 + i * SECOND);
    expect(fireTimes(rows)).toEqual(expected);
    expect(rows.every((r) => r.status === 'succeeded')).toBe(true);
    expect(handed.length).toBe(expected.length);
    expect(new Set(handed).size).toBe(expected.length);
  });
});

describe('cron validation', () => {
  let c: TestCluster | undefined;
  afterEach(async () => {
    await c?.cleanup();
    c = undefined;
  });

  it('refuses bad schedules with 400 and writes nothing', async () => {
    c = await startTestNode('postgres', quiet);
    const cases: [Record<string, unknown>, string, string][] = [
      [{ schedule: { type: 'cron', cron_expression: '61 * * * *' } }, 'invalid_cron', 'schedule.cron_expression'],
      [{ schedule: { type: 'cron', cron_expression: '* * *' } }, 'invalid_cron', 'schedule.cron_expression'],
      [{ schedule: { type: 'cron', cron_expression: '0 0 30 2 *' } }, 'invalid_cron', 'schedule.cron_expression'],
      [
        { schedule: { type: 'cron', cron_expression: '* * * * *', timezone: 'Mars/Olympus' } },
        'unknown_timezone',
        'schedule.timezone',
      ],
      [
        { schedule: { type: 'cron', cron_expression: '*/5 * * * *', jitter_seconds: 300 } },
        'validation_failed',
        'schedule.jitter_seconds',
      ],
      [
        { schedule: { type: 'cron', cron_expression: '* * * * * *', jitter_seconds: 2 } },
        'validation_failed',
        'schedule.jitter_seconds',
      ],
      [
        { schedule: { type: 'cron', cron_expression: '* * * * *', end_time: '2001-01-01T00:00:00Z' } },
        'validation_failed',
        'schedule.end_time',
      ],
      [
        { schedule: { type: 'cron', cron_expression: '* * * * *', misfire_policy: 'sometimes' } },
        'validation_failed',
        'schedule.misfire_policy',
      ],
      [
        {
          schedule: { type: 'cron', cron_expression: '* * * * *' },
          dependencies: ['0192f3a4-5b6c-7d8e-9f00-112233445566'],
        },
        'validation_failed',
        'dependencies',
      ],
    ];
    for (const [body, code, field] of cases) {
      const r = await api<{ error: { code: string; message: string; details: { field?: string } } }>(
        c.url,
        'POST',
        '/api/tasks',
        {
          task_type: 'cron.bad',
          ...body,
        },
      );
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code, JSON.stringify(r.body)).toBe(code);
      expect(r.body.error.message.startsWith(field), r.body.error.message).toBe(true);
    }
    expect(await c.sql('SELECT id FROM tasks')).toEqual([]);
  });
});
