import { describe, expect, it } from 'vitest';
import { defineKind, type Ask, type Behavior } from '../../src/runtime/actor.js';
import { FakeClock } from '../../src/runtime/clock.js';
import {
  every,
  retryDelayMs,
  retryUntilDone,
  type DutyFailure,
  type DutyFailuresEnded,
} from '../../src/runtime/supervision.js';
import { flushMicrotasks, testSystem } from './helpers.js';

/**
 * A duty never stops silently: an actor's timer message whose handler fails is delivered again
 * with backoff, a periodic node duty comes back sooner after a failure, a one-shot duty retries
 * until it succeeds — and every failure is reported with its count, and the end of a run of
 * failures once (so that a log can say "failing" and "recovered" instead of a line per retry).
 */
type Start = { type: 'start'; delayMs: number };
type Work = { type: 'work' };
type Log = Ask<{ type: 'log' }, number[]>;
type WorkerMessage = Start | Work | Log;
const FLAKY = defineKind<WorkerMessage>('flaky');

/** An actor whose timed 'work' fails while `failures` says so, then re-arms itself every second. */
function flakyWorker(failures: { left: number }, clock: FakeClock): Behavior<{ ran: number[] }, WorkerMessage> {
  return {
    kind: FLAKY,
    persistence: 'external',
    activate: async () => ({ ran: [] }),
    receive(state, message, ctx) {
      switch (message.type) {
        case 'start':
          ctx.schedule(message.delayMs, { type: 'work' });
          return state;
        case 'work':
          state.ran.push(clock.now());
          if (failures.left > 0) {
            failures.left--;
            throw new Error('the store is down');
          }
          ctx.schedule(1_000, { type: 'work' });
          return state;
        case 'log':
          ctx.reply(message, [...state.ran]);
          return state;
      }
    },
  };
}

describe('an actor duty (a timer message)', () => {
  it('is delivered again after a failing handler, with a growing backoff, until it succeeds', async () => {
    const clock = new FakeClock(0);
    const failures = { left: 3 };
    const { system, errors } = testSystem({ clock });
    system.register(flakyWorker(failures, clock));
    const ref = system.ref(FLAKY, 'a');
    ref.tell({ type: 'start', delayMs: 100 });
    await clock.advance(0);
    await clock.advance(10_000);
    const ran = await ref.ask({ type: 'log' });
    // Three failures, each retried; then the handler's own one-second rhythm.
    expect(ran.slice(0, 4)[0]).toBe(100);
    const gaps = ran.slice(1, 4).map((t, i) => t - ran[i]!);
    expect(gaps[0]).toBeGreaterThanOrEqual(50);
    expect(gaps[0]).toBeLessThanOrEqual(100);
    expect(gaps[1]).toBeGreaterThanOrEqual(100);
    expect(gaps[1]).toBeLessThanOrEqual(200);
    expect(gaps[2]).toBeGreaterThanOrEqual(200);
    expect(gaps[2]).toBeLessThanOrEqual(400);
    expect(ran[4]! - ran[3]!).toBe(1_000);
    expect(errors.map((e) => [e.info.messageType, e.info.attempt])).toEqual([
      ['work', 1],
      ['work', 2],
      ['work', 3],
    ]);
    expect(errors.every((e) => typeof e.info.retryInMs === 'number')).toBe(true);
  });

  it('reports the end of its failures once, when it succeeds', async () => {
    const clock = new FakeClock(0);
    const failures = { left: 3 };
    const { system, dutiesEnded } = testSystem({ clock });
    system.register(flakyWorker(failures, clock));
    system.ref(FLAKY, 'r').tell({ type: 'start', delayMs: 100 });
    await clock.advance(0);
    await clock.advance(10_000);
    expect(dutiesEnded).toEqual([{ kind: 'flaky', key: 'r', messageType: 'work', failures: 3, outcome: 'recovered' }]);
  });

  it('reports a duty still failing when its actor leaves as abandoned', async () => {
    const clock = new FakeClock(0);
    const failures = { left: 100 };
    const { system, dutiesEnded } = testSystem({ clock });
    system.register(flakyWorker(failures, clock));
    system.ref(FLAKY, 'x').tell({ type: 'start', delayMs: 10 });
    await clock.advance(0);
    await clock.advance(1_000);
    expect(dutiesEnded).toEqual([]);
    await system.passivate('flaky', 'x');
    expect(dutiesEnded).toEqual([expect.objectContaining({ key: 'x', messageType: 'work', outcome: 'abandoned' })]);
    expect(dutiesEnded[0]!.failures).toBeGreaterThanOrEqual(3);
  });

  it('starts its backoff again after a success', async () => {
    const clock = new FakeClock(0);
    const failures = { left: 2 };
    const { system, errors } = testSystem({ clock });
    system.register(flakyWorker(failures, clock));
    const ref = system.ref(FLAKY, 'b');
    ref.tell({ type: 'start', delayMs: 0 });
    await clock.advance(0);
    await clock.advance(5_000);
    failures.left = 1;
    await clock.advance(5_000);
    expect(errors.map((e) => e.info.attempt)).toEqual([1, 2, 1]);
  });

  it('keeps failing at the backoff ceiling while the fault lasts, and is not lost', async () => {
    const clock = new FakeClock(0);
    const failures = { left: 1_000 };
    const { system, errors } = testSystem({ clock });
    system.register(flakyWorker(failures, clock));
    const ref = system.ref(FLAKY, 'c');
    ref.tell({ type: 'start', delayMs: 0 });
    await clock.advance(0);
    await clock.advance(60_000);
    // 100 ms doubling to a 2 s ceiling (times 0.5…1): at least 30 tries in a minute.
    expect(errors.length).toBeGreaterThanOrEqual(30);
    failures.left = 0;
    await clock.advance(3_000);
    const ran = await ref.ask({ type: 'log' });
    expect(ran.at(-1)! - ran.at(-2)!).toBe(1_000);
  });

  it('is not delivered again once the actor stopped', async () => {
    const clock = new FakeClock(0);
    const failures = { left: 100 };
    const { system, errors } = testSystem({ clock });
    system.register(flakyWorker(failures, clock));
    const ref = system.ref(FLAKY, 'd');
    ref.tell({ type: 'start', delayMs: 10 });
    await clock.advance(0);
    await clock.advance(10);
    await flushMicrotasks();
    expect(errors).toHaveLength(1);
    await system.passivate('flaky', 'd');
    await clock.advance(60_000);
    expect(errors).toHaveLength(1);
  });
});

describe('retryDelayMs', () => {
  it('doubles from the base to the ceiling, scaled by 0.5…1', () => {
    const policy = { baseMs: 100, maxMs: 2_000 };
    expect([1, 2, 3, 4, 5, 6, 50].map((n) => retryDelayMs(n, policy, () => 1))).toEqual([
      100, 200, 400, 800, 1_600, 2_000, 2_000,
    ]);
    expect(retryDelayMs(1, policy, () => 0)).toBe(50);
  });
});

describe('every (a periodic node duty)', () => {
  it('runs on its interval, comes back sooner after a failure, and reports each one', async () => {
    const clock = new FakeClock(0);
    const runs: number[] = [];
    const failed: DutyFailure[] = [];
    let fail = 2;
    const stop = every(
      clock,
      'sweep',
      5_000,
      async () => {
        runs.push(clock.now());
        if (fail-- > 0) throw new Error('down');
      },
      (_error, failure) => failed.push(failure),
    );
    await clock.advance(20_000);
    stop();
    expect(runs[0]).toBe(5_000);
    // Two failures, retried within 100 and 200 ms, then the 5 s rhythm again.
    expect(runs[1]! - runs[0]!).toBeLessThanOrEqual(100);
    expect(runs[2]! - runs[1]!).toBeLessThanOrEqual(200);
    expect(runs[3]! - runs[2]!).toBe(5_000);
    expect(failed.map((f) => [f.duty, f.attempt])).toEqual([
      ['sweep', 1],
      ['sweep', 2],
    ]);
    const before = runs.length;
    await clock.advance(20_000);
    expect(runs).toHaveLength(before);
  });

  it('reports the end of its failures: recovered at the first success, abandoned when stopped while failing', async () => {
    const clock = new FakeClock(0);
    const ended: DutyFailuresEnded[] = [];
    let fail = 2;
    const stop = every(
      clock,
      'sweep',
      1_000,
      async () => {
        if (fail-- > 0) throw new Error('down');
      },
      () => undefined,
      undefined,
      (e) => ended.push(e),
    );
    await clock.advance(10_000);
    expect(ended).toEqual([{ duty: 'sweep', failures: 2, outcome: 'recovered' }]);
    fail = 1_000;
    await clock.advance(2_000);
    stop();
    expect(ended).toHaveLength(2);
    expect(ended[1]).toEqual(expect.objectContaining({ duty: 'sweep', outcome: 'abandoned' }));
    stop();
    expect(ended).toHaveLength(2);
  });
});

describe('retryUntilDone (a one-shot duty)', () => {
  it('runs until it succeeds, reporting each failure', async () => {
    const clock = new FakeClock(0);
    let calls = 0;
    const failed: number[] = [];
    const { done } = retryUntilDone(
      clock,
      'place',
      async () => {
        calls++;
        if (calls < 4) throw new Error('unreachable');
      },
      (_error, failure) => failed.push(failure.attempt),
    );
    let finished = false;
    void done.then(() => (finished = true));
    await clock.advance(0);
    await clock.advance(10_000);
    expect(finished).toBe(true);
    expect(calls).toBe(4);
    expect(failed).toEqual([1, 2, 3]);
  });

  it('reports the end of its failures when it succeeds, and when cancelled while failing', async () => {
    const clock = new FakeClock(0);
    const ended: DutyFailuresEnded[] = [];
    let calls = 0;
    retryUntilDone(
      clock,
      'place',
      async () => {
        if (++calls < 3) throw new Error('unreachable');
      },
      () => undefined,
      undefined,
      0,
      (e) => ended.push(e),
    );
    const failing = retryUntilDone(
      clock,
      'place-forever',
      async () => {
        throw new Error('unreachable');
      },
      () => undefined,
      undefined,
      0,
      (e) => ended.push(e),
    );
    await clock.advance(0);
    await clock.advance(10_000);
    expect(ended).toEqual([{ duty: 'place', failures: 2, outcome: 'recovered' }]);
    failing.cancel();
    expect(ended[1]).toEqual(expect.objectContaining({ duty: 'place-forever', outcome: 'abandoned' }));
  });

  it('stops retrying when cancelled', async () => {
    const clock = new FakeClock(0);
    let calls = 0;
    const { cancel } = retryUntilDone(
      clock,
      'place',
      async () => {
        calls++;
        throw new Error('unreachable');
      },
      () => undefined,
    );
    await clock.advance(0);
    await clock.advance(1_000);
    cancel();
    const seen = calls;
    await clock.advance(60_000);
    expect(calls).toBe(seen);
  });
});
