import type { Cancel, Clock } from './clock.js';

/**
 * Supervision of duties: the work a node or an actor must keep doing for anything to make
 * progress (a wheel's tick and cascade, a lease's expiry, a cron schedule's next fire, the
 * outbox replay, the safety nets). A duty never stops silently: after a failure it runs
 * again after a backoff, and every failure is reported with how many in a row there have
 * been and when the next try comes; the end of a run of failures is reported too (it
 * succeeded, or it was given up), so that whoever logs them can say "failing" once and
 * "recovered after n failures" once instead of a line per retry.
 *
 * Two shapes live here: {@link every}, a periodic duty, and {@link retryUntilDone}, a
 * one-shot duty that must eventually succeed. The third, an actor's timer messages, is
 * supervised by the actor's cell (`ActorCell.onError`) with {@link retryDelayMs}.
 */

/** How a failed duty is retried: the first retry after about `baseMs`, doubling up to `maxMs`. */
export interface RetryPolicy {
  baseMs: number;
  maxMs: number;
}

/**
 * The default for actor duties and one-shot node duties: a blip of the stores (a Postgres
 * restart takes about a second, a dropped Redis connection less) is retried within a few
 * hundred ms of its end, and a long outage costs one attempt every 2 s per duty.
 */
export const DEFAULT_DUTY_RETRY: RetryPolicy = Object.freeze({ baseMs: 100, maxMs: 2_000 });

/** What a failure report carries besides the error. */
export interface DutyFailure {
  /** The duty's name, e.g. `safety_net` or `wheel.cascade`. */
  duty: string;
  /** Failures in a row, this one included. */
  attempt: number;
  /** When the duty runs again, ms from now. */
  retryInMs: number;
  /**
   * Which one of the duties of that name, when there are several at once (the actor
   * `kind/key` of an actor's duty, a placement's batch). Absent for a node's single loop.
   */
  subject?: string;
}

/** A run of failures of one duty is over. */
export interface DutyFailuresEnded {
  duty: string;
  /** As in {@link DutyFailure}. */
  subject?: string;
  /** Failures in a row before it ended. */
  failures: number;
  /** `recovered`: it ran and succeeded; `abandoned`: it was stopped first (its actor left, the node stops). */
  outcome: 'recovered' | 'abandoned';
}

/**
 * The wait before retry number `attempt` (1 for the first): `min(base · 2^(attempt−1), max)`,
 * scaled by a random factor in [0.5, 1] so that duties that failed together do not retry in
 * lockstep. Never below 1 ms.
 */
export function retryDelayMs(attempt: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const exponent = Math.min(Math.max(attempt, 1) - 1, 30);
  const capped = Math.min(policy.baseMs * 2 ** exponent, policy.maxMs);
  return Math.max(1, Math.round(capped * (0.5 + random() * 0.5)));
}

/**
 * Runs `fn` every `intervalMs` on `clock`, never two runs at once (the next is armed when one
 * ends). After a failure the next run comes sooner — after a backoff of at most the interval —
 * and `onFailure` hears of it; the first success goes back to the interval, and `onEnded`
 * hears that the failures are over (so does a stop while failing). Returns a stop function.
 */
export function every(
  clock: Clock,
  duty: string,
  intervalMs: number,
  fn: () => Promise<void>,
  onFailure: (error: unknown, failure: DutyFailure) => void,
  policy: RetryPolicy = DEFAULT_DUTY_RETRY,
  onEnded: (ended: DutyFailuresEnded) => void = () => undefined,
): Cancel {
  let stopped = false;
  let failures = 0;
  let cancel: Cancel = () => undefined;
  const arm = (delayMs: number): void => {
    if (!stopped) cancel = clock.setTimer(delayMs, run);
  };
  const run = (): void => {
    if (stopped) return;
    let next = intervalMs;
    invoke(fn)
      .then(
        () => {
          if (failures > 0 && !stopped) onEnded({ duty, failures, outcome: 'recovered' });
          failures = 0;
        },
        (error: unknown) => {
          failures++;
          next = Math.min(intervalMs, retryDelayMs(failures, policy));
          onFailure(error, { duty, attempt: failures, retryInMs: next });
        },
      )
      .finally(() => arm(next));
  };
  arm(intervalMs);
  return () => {
    if (!stopped && failures > 0) onEnded({ duty, failures, outcome: 'abandoned' });
    stopped = true;
    cancel();
  };
}

/**
 * Runs `fn` after `firstDelayMs` (0: now) and, while it fails, again after a growing backoff,
 * until it succeeds or the returned function cancels it. `onFailure` hears of every
 * failure; a success after failures is told to `onEnded`. `done` resolves when it succeeded
 * (never when cancelled).
 */
export function retryUntilDone(
  clock: Clock,
  duty: string,
  fn: () => Promise<void>,
  onFailure: (error: unknown, failure: DutyFailure) => void,
  policy: RetryPolicy = DEFAULT_DUTY_RETRY,
  firstDelayMs = 0,
  onEnded: (ended: DutyFailuresEnded) => void = () => undefined,
): { cancel: Cancel; done: Promise<void> } {
  let stopped = false;
  let failures = 0;
  let cancelTimer: Cancel = () => undefined;
  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  const run = (): void => {
    if (stopped) return;
    invoke(fn).then(
      () => {
        if (failures > 0 && !stopped) onEnded({ duty, failures, outcome: 'recovered' });
        failures = 0;
        resolveDone();
      },
      (error: unknown) => {
        failures++;
        const retryInMs = retryDelayMs(failures, policy);
        onFailure(error, { duty, attempt: failures, retryInMs });
        if (!stopped) cancelTimer = clock.setTimer(retryInMs, run);
      },
    );
  };
  if (firstDelayMs > 0) cancelTimer = clock.setTimer(firstDelayMs, run);
  else run();
  return {
    cancel: () => {
      if (!stopped && failures > 0) onEnded({ duty, failures, outcome: 'abandoned' });
      stopped = true;
      cancelTimer();
    },
    done,
  };
}

/** Calls `fn`, turning a synchronous throw into a rejection. */
function invoke(fn: () => Promise<void>): Promise<void> {
  try {
    return fn();
  } catch (error) {
    return Promise.reject(error);
  }
}
