import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import type { WheelhouseOptions } from '../../src/lib/config.js';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually, quiescent } from '../support/waits.js';

/**
 * Cron schedules out of memory between fires, through a real node on each backend, on a
 * FakeClock: the wheel partition of a schedule's row wakes its actor at its wake time, the
 * actor creates the next instance and leaves memory again, so a node holds next to no
 * schedule actors however many schedules it runs (docs/decisions/0016-cron-passivation.md).
 */
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const quiet: WheelhouseOptions = { logLevel: process.env.TEST_LOG ?? 'silent' };

interface Polled {
  tasks: { task_id: string; lease_token: string }[];
}

describe.each(BACKENDS)('cron schedules between fires on %s', (backend: BackendName) => {
  let c: TestCluster | undefined;
  afterEach(async () => {
    await c?.cleanup();
    c = undefined;
  });

  const cronActors = (): number => c!.node.system.countByKind().get('cron') ?? 0;
  /** (fire time, instances for it) of each schedule of `type`, counted in Postgres. */
  const firesOf = async (type: string): Promise<{ schedules: number; fires: number; pairs: number }> => {
    const [row] = await c!.sql<{ schedules: number; fires: number; pairs: number }>(
      `SELECT count(DISTINCT i.schedule_id)::int AS schedules, count(*)::int AS fires,
              count(DISTINCT (i.schedule_id, i.fire_time))::int AS pairs
       FROM tasks i JOIN tasks s ON s.id = i.schedule_id WHERE s.task_type = $1`,
      [type],
    );
    return row!;
  };
  /** Waits until every schedule of `type` has its instance for `fireMs`. */
  const allHave = async (type: string, fireMs: number, clock: FakeClock, n: number): Promise<void> => {
    await eventually(
      async () => {
        await clock.advance(0);
        const [row] = await c!.sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM tasks i JOIN tasks s ON s.id = i.schedule_id
           WHERE s.task_type = $1 AND i.fire_time = to_timestamp($2::float8 / 1000)`,
          [type, fireMs],
        );
        return row!.n === n ? true : undefined;
      },
      60_000,
      `${n} schedules of ${type} to have their instance for ${new Date(fireMs).toISOString()}`,
    );
  };

  it('holds no schedule actor after 2 000 per-minute schedules fired (500 on PGlite)', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 12, 0, 10));
    c = await startTestNode(backend, quiet, { clock });
    const type = uniqueType('many');
    // PGlite takes ~5 ms of a core per fire, as before schedules left memory: fewer there.
    const N = backend === 'postgres' ? 2_000 : 500;
    for (let b = 0; b < N; b += 1000) {
      const batch = Array.from({ length: Math.min(1000, N - b) }, () => ({
        task_type: type,
        schedule: { type: 'cron', cron_expression: '* * * * *' },
      }));
      const r = await api(c.url, 'POST', '/api/tasks/batch', { tasks: batch });
      expect(r.status).toBe(201);
    }
    const first = Date.UTC(2026, 10, 30, 12, 1);
    await allHave(type, first, clock, N);
    await quiescent(c.node, { clock, allowReady: true });
    const afterSubmit = cronActors();

    // Over the minute: the instances fire at 12:01, each schedule is woken 30–54 s later (the
    // spread of the next instance's write) and creates its 12:02 instance.
    let most = 0;
    for (let t = first - 5 * SECOND; t <= first + 55 * SECOND; t += 5 * SECOND) {
      await clock.advanceTo(t);
      await quiescent(c.node, { clock, allowReady: true, timeoutMs: 30_000 });
      most = Math.max(most, cronActors());
    }
    await allHave(type, first + MINUTE, clock, N);
    await quiescent(c.node, { clock, allowReady: true });
    console.log(
      `[cron-passivation ${backend}] ${N} schedules: cron actors held after submit ${afterSubmit}, ` +
        `at most ${most} at the step samples over the minute, ${cronActors()} after`,
    );
    expect(afterSubmit).toBe(0);
    expect(cronActors()).toBe(0);
    // Each schedule fired once for 12:01 and has one instance for 12:02.
    expect(await firesOf(type)).toEqual({ schedules: N, fires: 2 * N, pairs: 2 * N });
  });

  it('fires a per-second schedule every second exactly once, out of memory between fires, across restarts', async () => {
    const start = Date.UTC(2026, 10, 30, 13, 0, 0, 500);
    let clock = new FakeClock(start);
    const options = { ...quiet, cronAwakeIntervalSeconds: 0, cronAdvanceSpreadSeconds: 0 };
    c = await startTestNode(backend, options, { clock });
    const type = uniqueType('second');
    const created = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
      task_type: type,
      schedule: { type: 'cron', cron_expression: '* * * * * *' },
    });
    expect(created.status).toBe(201);
    const id = created.body.task_id;
    const second = (i: number): number => start + 500 + i * SECOND;
    const handed: string[] = [];
    /** Moves on second by second: each fire time's next instance exists and the actor has left. */
    const run = async (from: number, to: number): Promise<void> => {
      for (let i = from; i <= to; i++) {
        await clock.advanceTo(Math.max(clock.now(), second(i - 1)));
        await allHave(type, second(i), clock, 1);
        await eventually(
          async () => {
            await clock.advance(0);
            return c!.node.system.holds('cron', id) ? undefined : true;
          },
          10_000,
          'the schedule to leave memory',
        );
        const polled = await api<Polled>(c!.url, 'POST', '/api/workers/poll', {
          worker_id: 'w',
          task_types: [type],
          max_tasks: 100,
          wait_ms: 0,
        });
        handed.push(...polled.body.tasks.map((t) => t.task_id));
      }
    };
    await run(0, 5);
    // A restart at the same instant, then one after a 4 s outage (late, not a misfire).
    for (const [gapMs, from, to] of [
      [0, 6, 10],
      [4 * SECOND, 15, 18],
    ] as const) {
      clock = new FakeClock(clock.now() + gapMs);
      await c.restart({ clock });
      await run(from, to);
    }
    await quiescent(c.node, { clock, allowReady: true, allowLeases: true });
    const rest = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
      worker_id: 'w',
      task_types: [type],
      max_tasks: 100,
      wait_ms: 0,
    });
    handed.push(...rest.body.tasks.map((t) => t.task_id));
    const rows = await c.sql<{ id: string; fire_ms: number }>(
      `SELECT id::text, round(date_part('epoch', fire_time) * 1000)::float8 AS fire_ms
       FROM tasks WHERE schedule_id = $1 ORDER BY fire_time`,
      [id],
    );
    // Every second from the first to the next one ahead, once; each that came due handed out once.
    expect(rows.map((r) => Number(r.fire_ms))).toEqual(Array.from({ length: 19 }, (_, i) => second(i)));
    expect(handed.slice().sort()).toEqual(
      rows
        .slice(0, 18)
        .map((r) => r.id)
        .sort(),
    );
  });

  it.runIf(backend === 'postgres')('wakes a schedule whose wake was in the Redis buckets Redis lost', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 13, 0, 10));
    c = await startTestNode(backend, { ...quiet, safetyNetSeconds: 1 }, { clock });
    const type = uniqueType('flushed');
    const created = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
      task_type: type,
      schedule: { type: 'cron', cron_expression: '0 * * * *' },
    });
    expect(created.status).toBe(201);
    const id = created.body.task_id;
    const at14 = Date.UTC(2026, 10, 30, 14, 0);
    await allHave(type, at14, clock, 1);
    await quiescent(c.node, { clock, allowReady: true });
    expect(c.node.system.holds('cron', id)).toBe(false);
    // Its wake (14:00 plus the spread, 30–60 s) is an hour off: in its partition's Redis bucket.
    const [row] = await c.sql<{ wake_ms: number }>(
      `SELECT round(date_part('epoch', wake_time) * 1000)::float8 AS wake_ms FROM tasks WHERE id = $1`,
      [id],
    );
    const wakeMs = Number(row!.wake_ms);
    expect(wakeMs).toBeGreaterThan(at14);

    await c.flushRedis();
    // Each partition's check notices within a second and rebuilds from Postgres, wakes included.
    await clock.advance(2 * SECOND);
    await quiescent(c.node, { clock, allowReady: true });
    // Woken by the wheel at its time: within the safety net's grace (10 s) of it.
    await clock.advanceTo(wakeMs + 5 * SECOND);
    await allHave(type, at14 + 60 * MINUTE, clock, 1);
    expect(await c.node.metrics.value('wheelhouse_safety_net_recovered_total', { kind: 'schedule' })).toBe(0);
  });
});
