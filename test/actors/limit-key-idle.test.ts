import { describe, expect, it } from 'vitest';
import { LIMIT, QUIET_PASSIVATION_MS, limitKeyBehavior } from '../../src/actors/limit-key.js';
import type { ResolvedLimit } from '../../src/domain/limits.js';
import type { DueEntry } from '../../src/domain/model.js';
import { NO_EVENTS } from '../../src/lib/events.js';
import { testSystem } from '../runtime/helpers.js';

/** The kind's idle time, as `limitIdleSeconds` sets it by default. */
const IDLE_MS = 30_000;

/**
 * A limit key leaves memory soon once it holds nothing (issue 28: a million keys that each ran
 * one task must not all stay live for the full idle time), and not before a rate it applies has
 * forgotten its last start (a new activation starts with a fresh window).
 */
function keySystem(limit: Omit<ResolvedLimit, 'key' | 'declaredAs' | 'family'>) {
  const t = testSystem();
  const pushed: DueEntry[] = [];
  t.system.register(
    limitKeyBehavior({
      store: { stillRunning: async () => new Set() },
      holders: async () => [],
      waitingTasks: async () => ({ waiting: [], truncated: false }),
      resolve: (key) => ({ ...limit, key, declaredAs: 'k:*', family: 'k:*' }),
      reload: async () => undefined,
      handOn: () => undefined,
      ready: {
        push: async (entries: DueEntry[]) => {
          pushed.push(...entries);
          return entries.length;
        },
      },
      cancel: () => undefined,
      events: NO_EVENTS,
      admitWindow: 256,
      readMoreBelow: 256,
      idlePassivationMs: IDLE_MS,
      reconcileMs: 2_000,
    }),
  );
  const live = () => t.system.countByKind().get(LIMIT.name) ?? 0;
  return { ...t, pushed, live };
}

const entry = (taskId: string): DueEntry => ({ taskId, taskType: 't', priority: 0, dueMs: 0, limits: ['k:1'] });

/** One task through the key: offered, admitted, granted; its permit back when `returned`. */
async function runOne(s: ReturnType<typeof keySystem>, taskId: string): Promise<() => Promise<void>> {
  const ref = s.system.ref(LIMIT, 'k:1');
  ref.tell({ type: 'offer', entries: [entry(taskId)] });
  const grant = await ref.ask({ type: 'grant', entries: [entry(taskId)] }, 1_000);
  expect(grant.granted).toEqual([taskId]);
  return async () => {
    ref.tell({ type: 'returned', taskIds: [taskId] });
    await ref.ask({ type: 'inspect' }, 1_000);
  };
}

describe('idle limit keys', () => {
  it('a key that ran its task and holds nothing leaves memory long before the idle time', async () => {
    const s = keySystem({ concurrency: 1, rate: null, onLimit: 'queue', weight: 1 });
    const returned = await runOne(s, 't1');
    // Its permit is out: it stays (a running task's key keeps the kind's idle time).
    await s.clock.advance(QUIET_PASSIVATION_MS * 2);
    expect(s.live()).toBe(1);
    await returned();
    expect(s.live()).toBe(1);
    await s.clock.advance(QUIET_PASSIVATION_MS);
    expect(s.live()).toBe(0);
    expect(QUIET_PASSIVATION_MS * 10).toBeLessThanOrEqual(IDLE_MS);
  });

  it('a rate key stays until its last start has left the period, then leaves', async () => {
    const periodMs = 60_000;
    const s = keySystem({ concurrency: null, rate: { limit: 1, periodMs, burst: 0 }, onLimit: 'queue', weight: 1 });
    const returned = await runOne(s, 't1');
    await returned();
    // Past the kind's idle time, the window still remembers the start: the key keeps it.
    await s.clock.advance(IDLE_MS + QUIET_PASSIVATION_MS);
    expect(s.live()).toBe(1);
    const ref = s.system.ref(LIMIT, 'k:1');
    const second = await ref.ask({ type: 'grant', entries: [entry('t2')] }, 1_000);
    expect(second.granted).toEqual([]); // one a minute: still refused
    await s.clock.advance(periodMs);
    expect(s.live()).toBe(1); // t2 waits here now: the key holds it
  });

  it('a rate key with nothing left leaves once its window has forgotten its starts', async () => {
    const periodMs = 60_000;
    const s = keySystem({ concurrency: null, rate: { limit: 1, periodMs, burst: 0 }, onLimit: 'queue', weight: 1 });
    const returned = await runOne(s, 't1');
    await returned();
    await s.clock.advance(periodMs - 1);
    expect(s.live()).toBe(1);
    await s.clock.advance(QUIET_PASSIVATION_MS + 1);
    expect(s.live()).toBe(0);
  });
});
