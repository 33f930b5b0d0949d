import { inspect } from 'node:util';

import { LEASE } from '../../src/actors/worker-lease.js';
import type { NodeEvents } from '../../src/domain/events.js';
import type { EventMap, TypedEvents } from '../../src/lib/events.js';
import type { FakeClock } from '../../src/runtime/clock.js';
import type { WheelhouseNode } from '../../src/node/start.js';

/**
 * The tests' one set of waits. A test waits on what it expects to happen — an event of the
 * node, a condition that comes true, the node falling quiet — never on a fixed sleep:
 *
 * - `waitForEvent`: an event of `node.events`. The listener is added when the wait is
 *   created, so a test creates the wait, then acts, then awaits it; the listener is always
 *   removed.
 * - `eventually`: a condition polled until it holds, for what has no event (a row in a store,
 *   another process's answer, a worker's stats).
 * - `quiescent`: "nothing more happens": no ready backlog, no lease held, and no event for an
 *   interval. A test that asserts that something did NOT happen waits for this first.
 * - `sleep`: a fixed wait, only where real time is itself the subject (processes that are
 *   killed or paused, a lease that runs out on a real clock); each use says why.
 */

/** Waits until `check` returns a value other than undefined, polling; fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 10_000,
  what = 'condition',
  pollMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last === undefined ? '' : `: ${last instanceof Error ? last.message : inspect(last)}`}`,
      );
    await sleep(pollMs);
  }
}

/**
 * Resolves with the payload of the first `name` event (that `predicate` accepts) emitted after
 * this call; rejects after `timeoutMs`. Subscribes at once, so create it before the action
 * that causes the event:
 *
 *     const fired = waitForEvent(node.events, 'wheel:fired');
 *     await submit();
 *     await fired;
 *
 * The listener is removed when the wait ends either way. A wait that is never awaited (the
 * action threw first) does not leave an unhandled rejection behind.
 */
export function waitForEvent<E extends EventMap, K extends keyof E & string>(
  events: TypedEvents<E>,
  name: K,
  predicate: (payload: E[K]) => boolean = () => true,
  timeoutMs = 10_000,
): Promise<E[K]> {
  let off: () => void = () => undefined;
  let timer: NodeJS.Timeout | undefined;
  const waiting = new Promise<E[K]>((resolve, reject) => {
    off = events.on(name, (payload) => {
      if (!predicate(payload)) return;
      off();
      clearTimeout(timer);
      resolve(payload);
    });
    timer = setTimeout(() => {
      off();
      reject(new Error(`timed out after ${timeoutMs} ms waiting for the event ${name}`));
    }, timeoutMs);
  });
  waiting.catch(() => undefined);
  return waiting;
}

/** Every event of a node, for `quiescent`: the Record makes a new event a compile error here until it is listed. */
const NODE_EVENTS: Record<keyof NodeEvents, true> = {
  'task:submitted': true,
  'wheel:fired': true,
  'task:claimed': true,
  'lease:expired': true,
  'task:completed': true,
  'task:expired': true,
  'task:cancelled': true,
  'task:released': true,
  'cron:fired': true,
  'dag:released': true,
  'dag:replayed': true,
  'safety-net:recovered': true,
  'retention:removed': true,
  'partition:rebuilt': true,
  'ring:changed': true,
  'limit:throttled': true,
  'stats:flushed': true,
};

/** Counts every event of `events` until the returned function is called. */
function countEvents(events: TypedEvents<NodeEvents>): {
  count: () => number;
  last: () => string | null;
  stop: () => void;
} {
  let n = 0;
  let last: string | null = null;
  const offs = (Object.keys(NODE_EVENTS) as (keyof NodeEvents)[]).map((name) =>
    events.on(name, () => {
      n++;
      last = name;
    }),
  );
  return { count: () => n, last: () => last, stop: () => offs.forEach((off) => off()) };
}

export interface QuiescentOptions {
  /** Real time in which nothing may happen, ms. @default 50 */
  intervalMs?: number;
  /** @default 10_000 */
  timeoutMs?: number;
  /**
   * The node's FakeClock: its due timers are fired (`advance(0)`) before each interval, so
   * that work a timer starts is part of what must have ended. Time does not move.
   */
  clock?: FakeClock;
  /** Tasks may sit in the ready queues (nobody polls their type). @default false */
  allowReady?: boolean;
  /** Leases may be held (a task the test holds on purpose). @default false */
  allowLeases?: boolean;
}

/**
 * Resolves once the node is quiet: no ready backlog, no lease actor, and no event emitted for
 * one whole interval. What the node does is started by a timer or a request and shows as an
 * event (a push, a claim, a fire, a release), so an interval without one after the last
 * change means there is nothing left in motion. Fails after `timeoutMs`, saying what was
 * still going on.
 */
export async function quiescent(
  node: Pick<WheelhouseNode, 'events' | 'backend' | 'system'>,
  options: QuiescentOptions = {},
): Promise<void> {
  const { intervalMs = 50, timeoutMs = 10_000, clock, allowReady = false, allowLeases = false } = options;
  const deadline = Date.now() + timeoutMs;
  const seen = countEvents(node.events);
  try {
    for (;;) {
      if (clock) await clock.advance(0);
      const before = seen.count();
      await sleep(intervalMs);
      const backlog = allowReady ? 0 : await node.backend.ready.backlog();
      const leases = allowLeases ? 0 : (node.system.countByKind().get(LEASE.name) ?? 0);
      if (seen.count() === before && backlog === 0 && leases === 0) return;
      if (Date.now() > deadline) {
        const busy = [
          seen.count() !== before ? `events still coming (last: ${seen.last()})` : null,
          backlog > 0
            ? `${backlog} ready (${JSON.stringify(await node.backend.ready.depths(clock?.now() ?? Date.now()))})`
            : null,
          leases > 0 ? `${leases} lease actors` : null,
        ].filter((x) => x !== null);
        throw new Error(`the node did not fall quiet within ${timeoutMs} ms: ${busy.join('; ')}`);
      }
    }
  } finally {
    seen.stop();
  }
}

/**
 * A fixed wait in real time. Only for tests where real time is the subject (a process that is
 * killed or paused, a lease that runs out on a real clock, a backoff being measured): each
 * caller says why on the line.
 */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
