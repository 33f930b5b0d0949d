import { CronExpressionParser, type CronExpression } from 'cron-parser';
import { WheelhouseError } from '../lib/errors.js';
import type { CronBudget } from './cron-budget.js';

/**
 * The cron resolver: when a cron schedule fires. Expressions have 5 fields (minute hour
 * day-of-month month day-of-week) or 6 with seconds first, in cron-parser's syntax (lists,
 * ranges, steps, `JAN`/`MON` names, `L`, `#`); they are read in an IANA time zone. Times
 * are Unix milliseconds. docs/decisions/0004-cron-semantics.md says why it behaves so.
 *
 * How: cron-parser walks the expression in wall-clock time (the local date and time written
 * as if it were UTC, where no DST exists), and `ZoneClock` turns each wall-clock fire into
 * an instant. cron-parser's own `tz` handling is not used. In 5.10.6 it moves a missing
 * 02:30 to 03:30, fires all four missing slots of `0,15,30,45 2 * * *` at 03:00–03:45,
 * fires minute-level schedules in both passes of a repeated hour, skips Lord Howe's 02:15
 * outright on the day of its 30-minute gap, and its `prev()` disagrees with its `next()` on
 * both kinds of transition.
 *
 * DST, as the cron-schedule issue asks:
 * - A local time that does not exist (spring forward) fires once, at the transition instant
 *   (in Berlin, 02:30 on the last Sunday of March fires at 03:00 CEST). All the missing
 *   times of one gap collapse into that one fire, and so does a fire at the gap's end
 *   (`0,15,30,45 2,3 * * *` fires once at 03:00, then at 03:15).
 * - A local time that occurs twice (fall back) fires once, at its first occurrence. This
 *   holds for every local time, per-second and per-minute expressions too: during the
 *   second pass of the repeated hour nothing fires, so `* * * * *` in Berlin is silent from
 *   02:00 to 03:00 CET on the last Sunday of October. The rule "a local time that occurs
 *   twice fires once" is applied literally because it is the one a user can predict from the
 *   expression alone. The alternative is Vixie cron's hybrid, which runs wildcard-hour jobs in
 *   elapsed time (both passes, so an hourly job never pauses) and fixed-time jobs once; it
 *   needs a rule for which expressions count as "frequent", and we chose not to have one.
 *
 * Rules are cached and shared: `cronRule` returns one object for every schedule with the
 * same zone and expression. A rule keeps no state that changes an answer: the cron-parser
 * iterator is reset before every use, and the remembered last `nextAfter` answer is exact.
 */

/** A parsed cron expression in a time zone. Every time is Unix milliseconds. */
export interface CronRule {
  /** The expression, whitespace normalised to single spaces. */
  readonly expression: string;
  /** The IANA zone the expression is read in (`Europe/Berlin`, `UTC`). */
  readonly timezone: string;
  /**
   * The first fire time strictly after `afterMs`, or null if there is none before the year
   * 275760. With a `budget`, throws `CronBudgetExceeded` once it is spent.
   */
  nextAfter(afterMs: number, budget?: CronBudget): number | null;
  /**
   * The fire times in `(afterMs, untilMs]`, oldest first, but at most `max` of them: the
   * latest `max`. `truncated` says that earlier fires in the range were left out; they are not
   * counted, because counting them could mean walking millions (a year-long outage of a
   * per-second schedule). The walk goes backwards from `untilMs`, so its cost is `max`, not
   * the length of the range.
   */
  firesBetween(afterMs: number, untilMs: number, max: number): { times: number[]; truncated: boolean };
  /**
   * The smallest gap between consecutive fire times among the next `samples` fires after
   * `fromMs`, ms; Infinity when fewer than two fires exist. A DST transition can make one gap
   * shorter than the expression's usual spacing, and that gap counts. `samples` defaults to 100.
   * With a `budget`, throws `CronBudgetExceeded` once it is spent.
   */
  minIntervalMs(fromMs: number, samples?: number, budget?: CronBudget): number;
}

const DAY_MS = 86_400_000;
/** Times the resolver accepts and hands out: from 1970 to two days short of the largest Date. */
const FIRST_MS = 0;
const LAST_MS = 8_640_000_000_000_000 - 2 * DAY_MS;
/** The error cron-parser 5.10.6 throws when no fire exists within its search budget. */
const NO_FIRE_MESSAGE = 'Invalid expression, loop limit exceeded';
/** Parsed rules and zone clocks kept; a cache that reaches its size is cleared. */
const RULE_CACHE_SIZE = 10_000;
const CLOCK_CACHE_SIZE = 1_000;
/** Constant-offset stretches each zone remembers. */
const SPANS_PER_ZONE = 8;

const rules = new Map<string, CronRule>();
const clocks = new Map<string, ZoneClock>();

/**
 * The rule for `expression` read in `timezone`, parsed once and shared by every caller.
 * Throws `invalid_cron` (the expression is not 5 or 6 fields of cron-parser syntax, uses the
 * non-deterministic `H`, or can never fire, such as `0 0 30 2 *`) or `unknown_timezone`.
 */
export function cronRule(expression: string, timezone = 'UTC'): CronRule {
  const known = rules.get(`${timezone} ${expression}`);
  if (known !== undefined) return known;
  const fields = expression.trim().split(/\s+/);
  const normalised = fields.join(' ');
  const key = `${timezone} ${normalised}`;
  const cached = rules.get(key);
  if (cached !== undefined) return cached;

  if (fields.length !== 5 && fields.length !== 6) {
    throw new WheelhouseError(
      'invalid_cron',
      `"${normalised}" has ${fields.length} field${fields.length === 1 ? '' : 's'}; a cron expression has 5 ` +
        '(minute hour day-of-month month day-of-week) or 6 with seconds first',
    );
  }
  // cron-parser reads `H` as "a value hashed from a seed", and with no seed the seed is random:
  // two nodes would disagree on when the schedule fires. A name such as THU is not `H`.
  if (fields.some((field) => field.replace(/[a-z]{3}/gi, '').includes('H'))) {
    throw new WheelhouseError('invalid_cron', `"${normalised}" uses H, which is not supported`);
  }
  const clock = zoneClock(timezone);
  let wall: CronExpression;
  try {
    wall = CronExpressionParser.parse(normalised, { tz: 'UTC' });
  } catch (error) {
    throw new WheelhouseError(
      'invalid_cron',
      `"${normalised}" is not a valid cron expression: ${(error as Error).message}`,
      { cause: error },
    );
  }
  const rule = new ZonedCronRule(normalised, timezone, wall, clock);
  if (rules.size >= RULE_CACHE_SIZE) rules.clear();
  rules.set(key, rule);
  return rule;
}

function zoneClock(timezone: string): ZoneClock {
  let clock = clocks.get(timezone);
  if (clock !== undefined) return clock;
  try {
    clock = new ZoneClock(timezone);
  } catch (error) {
    throw new WheelhouseError('unknown_timezone', `"${timezone}" is not a known IANA time zone`, { cause: error });
  }
  if (clocks.size >= CLOCK_CACHE_SIZE) clocks.clear();
  clocks.set(timezone, clock);
  return clock;
}

function checkTime(ms: number, name: string): void {
  if (!(ms >= FIRST_MS && ms <= LAST_MS)) {
    throw new RangeError(`${name} must be Unix milliseconds from 1970 to the year 275759, got ${ms}`);
  }
}

class ZonedCronRule implements CronRule {
  readonly expression: string;
  readonly timezone: string;
  /** Walks the expression in wall-clock time; reset before every use. */
  readonly #wall: CronExpression;
  readonly #clock: ZoneClock;
  /**
   * The last `nextAfter` answer. It is the answer for every `afterMs` in `[fromMs, nextMs)`,
   * which is what the 100 000 schedules that share a rule and fire together all ask.
   */
  #last: { fromMs: number; nextMs: number | null } = { fromMs: NaN, nextMs: null };
  /**
   * The last `minIntervalMs` answer, by the first fire it starts from: a batch of schedules
   * validated at one time asks the same, and a rare rule (`0 0 * 2 1#5`) takes ~1 s to answer.
   */
  #lastInterval = { firstMs: NaN, samples: 0, intervalMs: Infinity };

  constructor(expression: string, timezone: string, wall: CronExpression, clock: ZoneClock) {
    this.expression = expression;
    this.timezone = timezone;
    this.#wall = wall;
    this.#clock = clock;
  }

  nextAfter(afterMs: number, budget?: CronBudget): number | null {
    checkTime(afterMs, 'afterMs');
    const last = this.#last;
    if (afterMs >= last.fromMs && (last.nextMs === null || afterMs < last.nextMs)) return last.nextMs;
    const nextMs = this.#next(afterMs, budget);
    this.#last = { fromMs: afterMs, nextMs };
    return nextMs;
  }

  firesBetween(afterMs: number, untilMs: number, max: number): { times: number[]; truncated: boolean } {
    checkTime(afterMs, 'afterMs');
    checkTime(untilMs, 'untilMs');
    if (!Number.isSafeInteger(max) || max < 0) throw new RangeError(`max must be a whole number ≥ 0, got ${max}`);
    const times: number[] = [];
    let truncated = false;
    // Fires at wall-clock times below `cursor` are at or before `untilMs`. When `untilMs` is in
    // the second pass of a repeated hour, the rest of that hour already fired in the first pass.
    let cursor = this.#clock.repeatEndWall(untilMs) ?? this.#clock.wallOf(untilMs) + 1;
    for (;;) {
      const wall = this.#step(cursor, 'prev');
      if (wall === null) break;
      const at = this.#clock.instantOf(wall);
      if (at <= afterMs) break;
      if (at !== times[times.length - 1]) {
        if (times.length === max) {
          truncated = true;
          break;
        }
        times.push(at);
      }
      // A fire in a spring-forward gap stands for the whole gap: go on from the gap's start.
      cursor = this.#clock.wallOf(at) === wall ? wall : Math.min(wall, at + this.#clock.offsetAt(at - 1));
    }
    return { times: times.reverse(), truncated };
  }

  minIntervalMs(fromMs: number, samples = 100, budget?: CronBudget): number {
    const first = this.nextAfter(fromMs, budget);
    const last = this.#lastInterval;
    if (first === last.firstMs && samples === last.samples) return last.intervalMs;
    // Fire times are whole seconds, so no gap is under a second: stop when one is found.
    let intervalMs = Infinity;
    let previous = first;
    for (let i = 1; i < samples && previous !== null && intervalMs > 1000; i++) {
      const next = this.#next(previous, budget);
      if (next !== null) intervalMs = Math.min(intervalMs, next - previous);
      previous = next;
    }
    this.#lastInterval = { firstMs: first ?? NaN, samples, intervalMs };
    return intervalMs;
  }

  #next(afterMs: number, budget?: CronBudget): number | null {
    // Wall-clock times after `afterMs`'s own, except that in the second pass of a repeated hour
    // the rest of the hour fired in the first pass: go on from where the repetition ends.
    const repeatEnd = this.#clock.repeatEndWall(afterMs);
    let cursor = repeatEnd === null ? this.#clock.wallOf(afterMs) : repeatEnd - 1;
    for (;;) {
      // One step is at most cron-parser's own loop limit (10 000 increments): the budget is
      // checked between steps.
      budget?.check();
      const wall = this.#step(cursor, 'next');
      if (wall === null) return null;
      const at = this.#clock.instantOf(wall);
      if (at > LAST_MS) return null;
      if (at > afterMs) return at;
      cursor = wall;
    }
  }

  /** The wall-clock fire strictly after (`next`) or before (`prev`) `fromWallMs`, or null. */
  #step(fromWallMs: number, direction: 'next' | 'prev'): number | null {
    this.#wall.reset(new Date(fromWallMs));
    try {
      return (direction === 'next' ? this.#wall.next() : this.#wall.prev()).getTime();
    } catch (error) {
      if (error instanceof Error && error.message === NO_FIRE_MESSAGE) return null;
      throw error;
    }
  }
}

/**
 * One IANA zone's offsets, read from `Intl` and remembered over stretches where they do not
 * change. It assumes that an offset that changes does not change again within two days, which
 * no zone's current rules do.
 */
class ZoneClock {
  readonly #format: Intl.DateTimeFormat;
  /** UTC (under any of its names) has no offset to read: the default zone costs nothing. */
  readonly #isUtc: boolean;
  /** Stretches `[fromMs, toMs]` known to have one offset, replaced round-robin. */
  readonly #spans: { fromMs: number; toMs: number; offsetMs: number }[] = [];
  #nextSpan = 0;

  constructor(timezone: string) {
    this.#format = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    this.#isUtc = this.#format.resolvedOptions().timeZone === 'UTC';
  }

  /** The zone's offset from UTC at `atMs`, ms, east positive (Berlin in summer: 7 200 000). */
  offsetAt(atMs: number): number {
    if (this.#isUtc) return 0;
    for (const span of this.#spans) {
      if (span.fromMs <= atMs && atMs <= span.toMs) return span.offsetMs;
    }
    const offsetMs = this.#readOffset(atMs);
    const before = this.#readOffset(atMs - DAY_MS);
    const after = this.#readOffset(atMs + DAY_MS);
    if (before !== offsetMs && after !== offsetMs) return offsetMs;
    // Remember the stretch around `atMs` that has its offset, up to a transition a day away.
    let fromMs = atMs - DAY_MS;
    let toMs = atMs + DAY_MS;
    if (before !== offsetMs) fromMs = this.transitionIn(fromMs, atMs);
    if (after !== offsetMs) toMs = this.transitionIn(atMs, toMs) - 1;
    this.#spans[this.#nextSpan] = { fromMs, toMs, offsetMs };
    this.#nextSpan = (this.#nextSpan + 1) % SPANS_PER_ZONE;
    return offsetMs;
  }

  /** The local wall-clock time at `atMs`, written as if it were UTC. */
  wallOf(atMs: number): number {
    return atMs + this.offsetAt(atMs);
  }

  /**
   * The instant at which the local time `wallMs` is reached: its first occurrence when the
   * time occurs twice, and the transition instant when it does not exist at all.
   */
  instantOf(wallMs: number): number {
    // The instant is within 14 hours of `wallMs`, so these two offsets are the ones either
    // side of any transition near it.
    const before = this.offsetAt(wallMs - DAY_MS);
    const after = this.offsetAt(wallMs + DAY_MS);
    if (before === after) return wallMs - before;
    const early = wallMs - Math.max(before, after);
    const late = wallMs - Math.min(before, after);
    if (this.wallOf(early) === wallMs) return early;
    if (this.wallOf(late) === wallMs) return late;
    return this.transitionIn(early, late);
  }

  /**
   * When `atMs` is in the second pass of a repeated local time (after a fall-back), the
   * wall-clock time at which the repetition ends; otherwise null.
   */
  repeatEndWall(atMs: number): number | null {
    const first = this.instantOf(this.wallOf(atMs));
    if (first >= atMs) return null;
    return this.transitionIn(first, atMs) + this.offsetAt(first);
  }

  /**
   * The first instant in `(fromMs, toMs]` that has `toMs`'s offset, where `fromMs` has another
   * one. Transitions fall on whole seconds, so this searches seconds.
   */
  transitionIn(fromMs: number, toMs: number): number {
    const offsetMs = this.#readOffset(toMs);
    let lo = Math.floor(fromMs / 1000);
    let hi = Math.floor(toMs / 1000);
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (this.#readOffset(mid * 1000) === offsetMs) hi = mid;
      else lo = mid;
    }
    return hi * 1000;
  }

  /** The offset at `atMs`, asked of `Intl` (about 4 µs). */
  #readOffset(atMs: number): number {
    const second = Math.floor(atMs / 1000) * 1000;
    const p = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
    for (const part of this.#format.formatToParts(second)) {
      if (part.type in p) p[part.type as keyof typeof p] = Number(part.value);
    }
    return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) - second;
  }
}
