import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { eventually } from '../support/waits.js';

/**
 * Cron schedules through a DST change in Europe/Berlin, through a real node on each backend,
 * on a FakeClock: the schedule actor, going from fire to fire, applies the rules of
 * docs/decisions/0004-cron-semantics.md.
 * - Spring forward (2026-03-29, 02:00 CET → 03:00 CEST at 01:00Z): a local time that does not
 *   exist fires once, at the transition; every missing time of the gap, and a fire at the
 *   gap's end, collapse into that one fire.
 * - Fall back (2026-10-25, 03:00 CEST → 02:00 CET at 01:00Z): a local time that occurs twice
 *   fires once, at its first occurrence; nothing fires in the second pass.
 * The resolver's own tests (test/tasks/cron-rule.test.ts) check the rule on its answers; these
 * check the instances a node creates: one per fire time, at that fire time, none skipped, none
 * doubled, each handed to a worker once. Time moves five minutes at a time, and the misfire
 * threshold is an hour, so a fire time handled up to a step late is late, not missed (every
 * one still gets its instance); after each step the test waits until every schedule has its
 * next instance in the future again.
 */
const ZONE = 'Europe/Berlin';
const MINUTE = 60_000;
const STEP_MS = 5 * MINUTE;

/** An instant written as local time with its offset, as the ADR speaks of it. */
const at = (iso: string): number => Date.parse(iso);
/** `n` instants `everyMinutes` apart from `iso`. */
const every = (iso: string, n: number, everyMinutes: number): number[] =>
  Array.from({ length: n }, (_, i) => at(iso) + i * everyMinutes * MINUTE);

interface InstanceRow extends Record<string, unknown> {
  id: string;
  fire_ms: number;
  due_ms: number;
}

describe.each(BACKENDS)('cron schedules through a DST change on %s', (backend: BackendName) => {
  let c: TestCluster | undefined;
  afterEach(async () => {
    await c?.cleanup();
    c = undefined;
  });

  /** A node on `clock` whose schedules write their next instance right at a fire. */
  const start = async (clock: FakeClock): Promise<TestCluster> => {
    c = await startTestNode(
      backend,
      { logLevel: process.env.TEST_LOG ?? 'silent', cronAdvanceSpreadSeconds: 0, cronMisfireThresholdSeconds: 3_600 },
      { clock },
    );
    return c;
  };
  const submitCron = async (type: string, cronExpression: string): Promise<string> => {
    const r = await api<{ task_id: string; status: string }>(c!.url, 'POST', '/api/tasks', {
      task_type: type,
      schedule: { type: 'cron', cron_expression: cronExpression, timezone: ZONE },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.task_id;
  };
  const instances = (scheduleId: string): Promise<InstanceRow[]> =>
    c!.sql<InstanceRow>(
      `SELECT id::text, round(date_part('epoch', fire_time) * 1000)::float8 AS fire_ms,
              round(date_part('epoch', due_time) * 1000)::float8 AS due_ms
       FROM tasks WHERE schedule_id = $1 ORDER BY fire_time, id`,
      [scheduleId],
    );
  /** Moves time a step at a time until `untilMs`; after each step, waits until every schedule has a future instance. */
  const stepUntil = async (ids: string[], clock: FakeClock, untilMs: number): Promise<void> => {
    while (clock.now() < untilMs) {
      await clock.advance(STEP_MS);
      await eventually(
        async () => {
          await clock.advance(0);
          const [row] = await c!.sql<{ n: number }>(
            `SELECT count(DISTINCT schedule_id)::int AS n FROM tasks
             WHERE schedule_id = ANY($1::uuid[]) AND status IN ('pending', 'blocked') AND due_time > to_timestamp($2::float8 / 1000)`,
            [ids, clock.now()],
          );
          return row!.n === ids.length ? true : undefined;
        },
        20_000,
        `the schedules to have their next instance after ${new Date(clock.now()).toISOString()}`,
      );
    }
  };
  /** Polls `type` (completing what it gets) until `count` tasks were handed out; their ids. */
  const handOut = async (type: string, count: number, clock: FakeClock): Promise<string[]> => {
    const handed: string[] = [];
    await eventually(
      async () => {
        await clock.advance(0);
        const polled = await api<{ tasks: { task_id: string; lease_token: string }[] }>(
          c!.url,
          'POST',
          '/api/workers/poll',
          {
            worker_id: 'w-dst',
            task_types: [type],
            max_tasks: 100,
            wait_ms: 0,
          },
        );
        const got = polled.body.tasks;
        handed.push(...got.map((t) => t.task_id));
        if (got.length > 0) {
          const results = got.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token, status: 'succeeded' }));
          expect((await api(c!.url, 'POST', '/api/workers/complete', { results })).status).toBe(200);
        }
        return handed.length >= count ? true : undefined;
      },
      20_000,
      `${count} instances of ${type} to be handed out`,
    );
    return handed;
  };
  /**
   * Runs schedules from `fromIso` to `untilIso` and checks, for each, the fire times of its
   * instances (all that fired, then the one future instance), that each is due at its fire
   * time (no jitter), and that the fired ones were each handed out once.
   */
  const runThrough = async (fromIso: string, untilIso: string, expected: Record<string, number[]>): Promise<void> => {
    const clock = new FakeClock(at(fromIso));
    await start(clock);
    const schedules = Object.entries(expected).map(([expression, fireTimes], i) => ({
      expression,
      fireTimes,
      type: `cron.dst.${i}`,
      id: '',
    }));
    for (const s of schedules) s.id = await submitCron(s.type, s.expression);
    await stepUntil(
      schedules.map((s) => s.id),
      clock,
      at(untilIso),
    );

    const iso = (ms: number): string => new Date(ms).toISOString();
    for (const { expression, fireTimes, type, id } of schedules) {
      const rows = await instances(id);
      expect(
        rows.map((r) => iso(Number(r.fire_ms))),
        expression,
      ).toEqual(fireTimes.map(iso));
      expect(
        rows.filter((r) => Number(r.due_ms) !== Number(r.fire_ms)),
        expression,
      ).toEqual([]);
      const fired = rows.filter((r) => Number(r.fire_ms) <= clock.now()).map((r) => r.id);
      const handed = await handOut(type, fired.length, clock);
      expect(handed.sort(), expression).toEqual(fired.sort());
    }
  };

  it('spring forward: the missing hour fires once, at the transition', async () => {
    await runThrough('2026-03-29T01:50:30+01:00', '2026-03-29T03:10:30+02:00', {
      // 01:55 CET; 02:00–02:55 do not exist and 03:00 is the gap's end: one fire at the
      // transition (03:00 CEST); then 03:05, 03:10 CEST, and the next instance, 03:15.
      '*/5 * * * *': [at('2026-03-29T01:55:00+01:00'), ...every('2026-03-29T03:00:00+02:00', 4, 5)],
      // 02:30 does not exist: it fires at the transition; the next is 03:30 CEST.
      '30 * * * *': [at('2026-03-29T03:00:00+02:00'), at('2026-03-29T03:30:00+02:00')],
      '30 2 * * *': [at('2026-03-29T03:00:00+02:00'), at('2026-03-30T02:30:00+02:00')],
    });
  });

  it('fall back: the repeated hour fires in its first pass only', async () => {
    await runThrough('2026-10-25T02:20:30+02:00', '2026-10-25T03:10:30+01:00', {
      // 02:30, 02:45 CEST; nothing while 02:00–02:59 come again in CET; 03:00 CET, and the next, 03:15.
      '*/15 * * * *': [...every('2026-10-25T02:30:00+02:00', 2, 15), ...every('2026-10-25T03:00:00+01:00', 2, 15)],
      // 02:30 occurs twice: once, at 02:30 CEST; the next is 03:30 CET, two hours later.
      '30 * * * *': [at('2026-10-25T02:30:00+02:00'), at('2026-10-25T03:30:00+01:00')],
      '30 2 * * *': [at('2026-10-25T02:30:00+02:00'), at('2026-10-26T02:30:00+01:00')],
    });
  });
});
