import { describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { cronRule, type CronRule } from '../../src/domain/cron-rule.js';

/**
 * The cron resolver by example. Expected instants are written as ISO times with the offset in
 * force, so each reads as the wall clock a user would see. DST cases follow the rules in
 * docs/decisions/0004-cron-semantics.md: a missing local time fires once at the transition,
 * a repeated one once at its first occurrence.
 */

const ms = (iso: string): number => Date.parse(iso);
const iso = (t: number | null): string | null => (t === null ? null : new Date(t).toISOString());

/** The first `n` fire times after `from`, chained through `nextAfter`, as UTC ISO strings. */
function fires(rule: CronRule, from: string, n: number): (string | null)[] {
  const out: (string | null)[] = [];
  let t: number | null = ms(from);
  for (let i = 0; i < n && t !== null; i++) {
    t = rule.nextAfter(t);
    out.push(iso(t));
  }
  return out;
}

/** The same instants as `fires` returns, from ISO times with offsets. */
const at = (...times: string[]): string[] => times.map((t) => new Date(t).toISOString());

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error, nothing was thrown');
}

function addDays(day: string, days: number): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);
}

describe('cronRule: syntax', () => {
  it('reads 5 fields as minute hour day-of-month month day-of-week', () => {
    expect(fires(cronRule('30 9 * * *', 'UTC'), '2026-01-01T00:00:00Z', 2)).toEqual(
      at('2026-01-01T09:30:00Z', '2026-01-02T09:30:00Z'),
    );
  });

  it('reads 6 fields with seconds first', () => {
    expect(fires(cronRule('15 30 9 * * *', 'UTC'), '2026-01-01T00:00:00Z', 2)).toEqual(
      at('2026-01-01T09:30:15Z', '2026-01-02T09:30:15Z'),
    );
  });

  it('fires per second', () => {
    expect(fires(cronRule('* * * * * *', 'UTC'), '2026-01-01T00:00:00.250Z', 3)).toEqual(
      at('2026-01-01T00:00:01Z', '2026-01-01T00:00:02Z', '2026-01-01T00:00:03Z'),
    );
    expect(fires(cronRule('*/20 * * * * *', 'UTC'), '2026-01-01T00:00:45Z', 2)).toEqual(
      at('2026-01-01T00:01:00Z', '2026-01-01T00:01:20Z'),
    );
  });

  it('reads L as the last day of the month, leap years included', () => {
    expect(fires(cronRule('0 0 L * *', 'UTC'), '2026-01-01T00:00:00Z', 3)).toEqual(
      at('2026-01-31T00:00:00Z', '2026-02-28T00:00:00Z', '2026-03-31T00:00:00Z'),
    );
    expect(fires(cronRule('0 0 L 2 *', 'UTC'), '2027-03-01T00:00:00Z', 1)).toEqual(at('2028-02-29T00:00:00Z'));
  });

  it('reads 5L as the last Friday and MON#2 as the second Monday', () => {
    expect(fires(cronRule('0 18 * * 5L', 'UTC'), '2026-01-01T00:00:00Z', 2)).toEqual(
      at('2026-01-30T18:00:00Z', '2026-02-27T18:00:00Z'),
    );
    expect(fires(cronRule('0 10 * * MON#2', 'UTC'), '2026-01-01T00:00:00Z', 2)).toEqual(
      at('2026-01-12T10:00:00Z', '2026-02-09T10:00:00Z'),
    );
  });

  it('reads month and weekday names, in any case', () => {
    expect(fires(cronRule('0 0 1 JAN,jul *', 'UTC'), '2026-01-01T00:00:00Z', 2)).toEqual(
      at('2026-07-01T00:00:00Z', '2027-01-01T00:00:00Z'),
    );
    // 2026-01-02 is a Friday: the weekend is skipped.
    expect(fires(cronRule('0 9 * * MON-FRI', 'UTC'), '2026-01-02T10:00:00Z', 2)).toEqual(
      at('2026-01-05T09:00:00Z', '2026-01-06T09:00:00Z'),
    );
    expect(cronRule('0 9 * * THU', 'UTC').nextAfter(ms('2026-01-01T10:00:00Z'))).toBe(ms('2026-01-08T09:00:00Z'));
  });

  it('fires on either day when both day-of-month and day-of-week are restricted', () => {
    // The 13th, or any Friday (cron's OR rule; see the ADR).
    expect(fires(cronRule('0 0 13 * FRI', 'UTC'), '2026-01-01T00:00:00Z', 3)).toEqual(
      at('2026-01-02T00:00:00Z', '2026-01-09T00:00:00Z', '2026-01-13T00:00:00Z'),
    );
  });

  it('answers strictly after the time asked, also from a fire time itself', () => {
    const rule = cronRule('0 * * * *', 'UTC');
    expect(rule.nextAfter(ms('2026-01-01T05:00:00Z'))).toBe(ms('2026-01-01T06:00:00Z'));
    expect(rule.nextAfter(ms('2026-01-01T04:59:59.999Z'))).toBe(ms('2026-01-01T05:00:00Z'));
    // Asking for an earlier time after a later one is not answered from the remembered answer.
    expect(rule.nextAfter(ms('2026-01-01T03:30:00Z'))).toBe(ms('2026-01-01T04:00:00Z'));
  });

  it('returns null when no fire is left before the end of representable time', () => {
    expect(cronRule('0 0 1 10 *', 'UTC').nextAfter(ms('+275759-11-01T00:00:00Z'))).toBeNull();
    expect(cronRule('0 0 1 1 *', 'UTC').minIntervalMs(ms('+275759-06-01T00:00:00Z'))).toBe(Infinity);
  });

  it('rejects an expression that can never fire: cron-parser refuses it when parsing', () => {
    const error = thrown(() => cronRule('0 0 30 2 *', 'UTC'));
    expect(isWheelhouseError(error, 'invalid_cron')).toBe(true);
    expect((error as Error).message).toMatch(/"0 0 30 2 \*" is not a valid cron expression: .*day of month/);
  });

  it('rejects what is not 5 or 6 fields of cron syntax with invalid_cron', () => {
    const bad = ['* * * *', '0 0 0 * * * 2026', '@daily', '61 * * * *', '0 0 * * MOX', 'H * * * *', '0 H(0-5) * * *'];
    for (const expression of bad) {
      const error = thrown(() => cronRule(expression, 'UTC'));
      expect(isWheelhouseError(error, 'invalid_cron'), expression).toBe(true);
      expect((error as Error).message, expression).toContain(`"${expression}"`);
    }
  });

  it('rejects an unknown time zone with unknown_timezone', () => {
    expect(
      isWheelhouseError(
        thrown(() => cronRule('* * * * *', 'Mars/Olympus_Mons')),
        'unknown_timezone',
      ),
    ).toBe(true);
  });

  it('rejects times it cannot answer for', () => {
    const rule = cronRule('* * * * *', 'UTC');
    expect(() => rule.nextAfter(Number.NaN)).toThrow(RangeError);
    expect(() => rule.firesBetween(0, 1000, -1)).toThrow(RangeError);
  });
});

describe('cronRule: the cache', () => {
  it('shares one rule per zone and whitespace-normalised expression', () => {
    const rule = cronRule('0 9 * * *', 'Europe/Berlin');
    expect(cronRule('  0   9 * * *\t', 'Europe/Berlin')).toBe(rule);
    expect(rule.expression).toBe('0 9 * * *');
    expect(rule.timezone).toBe('Europe/Berlin');
    expect(cronRule('0 9 * * *', 'UTC')).not.toBe(rule);
    expect(cronRule('0 9 * * *')).toBe(cronRule('0 9 * * *', 'UTC'));
  });

  it('gives the same answers whatever was asked before: no state leaks between calls', () => {
    const rule = cronRule('*/7 3 * * *', 'Europe/Berlin');
    const questions = [
      () => rule.nextAfter(ms('2026-10-25T00:30:00Z')),
      () => rule.firesBetween(ms('2026-03-01T00:00:00Z'), ms('2026-03-30T00:00:00Z'), 4),
      () => rule.minIntervalMs(ms('2026-06-01T00:00:00Z'), 20),
      () => rule.nextAfter(ms('2027-01-01T00:00:00Z')),
      () => rule.nextAfter(ms('2026-01-01T00:00:00Z')),
    ];
    const forwards = questions.map((q) => q());
    const backwards = [...questions]
      .reverse()
      .map((q) => q())
      .reverse();
    expect(backwards).toEqual(forwards);
  });
});

describe('firesBetween', () => {
  const hourly = cronRule('0 * * * *', 'UTC');

  it('lists the fires in (after, until], oldest first', () => {
    expect(hourly.firesBetween(ms('2026-01-01T01:00:00Z'), ms('2026-01-01T04:00:00Z'), 10)).toEqual({
      times: [ms('2026-01-01T02:00:00Z'), ms('2026-01-01T03:00:00Z'), ms('2026-01-01T04:00:00Z')],
      truncated: false,
    });
    expect(hourly.firesBetween(ms('2026-01-01T04:00:00Z'), ms('2026-01-01T04:00:00Z'), 10)).toEqual({
      times: [],
      truncated: false,
    });
  });

  it('keeps the latest max fires and says that earlier ones were left out', () => {
    expect(hourly.firesBetween(ms('2026-01-01T00:30:00Z'), ms('2026-01-01T05:30:00Z'), 2)).toEqual({
      times: [ms('2026-01-01T04:00:00Z'), ms('2026-01-01T05:00:00Z')],
      truncated: true,
    });
    expect(hourly.firesBetween(ms('2026-01-01T00:30:00Z'), ms('2026-01-01T05:30:00Z'), 0)).toEqual({
      times: [],
      truncated: true,
    });
    // Exactly max fires in range: nothing was left out.
    expect(hourly.firesBetween(ms('2026-01-01T03:00:00Z'), ms('2026-01-01T05:30:00Z'), 2).truncated).toBe(false);
  });

  it('walks a year-long outage of a per-second schedule backwards, not through 31 M fires', () => {
    const started = performance.now();
    const { times, truncated } = cronRule('* * * * * *', 'Europe/Berlin').firesBetween(
      ms('2026-01-01T00:00:00Z'),
      ms('2027-01-01T00:00:00.500Z'),
      3,
    );
    expect(times).toEqual([ms('2026-12-31T23:59:58Z'), ms('2026-12-31T23:59:59Z'), ms('2027-01-01T00:00:00Z')]);
    expect(truncated).toBe(true);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});

describe('minIntervalMs', () => {
  const from = ms('2026-01-01T00:00:00Z');

  it('is the spacing of a regular expression', () => {
    expect(cronRule('* * * * * *', 'UTC').minIntervalMs(from)).toBe(1000);
    expect(cronRule('*/15 * * * *', 'Europe/Berlin').minIntervalMs(from)).toBe(900_000);
    expect(cronRule('0 0 1 * *', 'America/New_York').minIntervalMs(from)).toBe(28 * 86_400_000);
    expect(cronRule('0 9 * * MON-FRI', 'Asia/Tokyo').minIntervalMs(from)).toBe(86_400_000);
  });

  it('is the smallest gap among the samples, however irregular', () => {
    expect(cronRule('0 0 1,2 1 *', 'UTC').minIntervalMs(from, 4)).toBe(86_400_000);
    expect(cronRule('0 0 1,2 1 *', 'UTC').minIntervalMs(from, 1)).toBe(Infinity);
  });

  it('counts the gap a spring-forward transition shortens', () => {
    // 02:00 does not exist on 2026-03-29 in Berlin: it fires at 03:00 CEST, an hour before 04:00.
    const rule = cronRule('0 2,4 * * *', 'Europe/Berlin');
    expect(rule.minIntervalMs(ms('2026-03-27T00:00:00Z'), 10)).toBe(3_600_000);
    // The remembered answer is for that start only: a week later the usual two hours.
    expect(rule.minIntervalMs(ms('2026-04-03T00:00:00Z'), 10)).toBe(7_200_000);
    expect(rule.minIntervalMs(ms('2026-03-27T00:00:00Z'), 10)).toBe(3_600_000);
  });
});

/** DST transitions of 2026 and 2027 in the two zones the issue names. */
const TRANSITIONS = [
  {
    zone: 'Europe/Berlin',
    std: '+01:00',
    dst: '+02:00',
    spring: '2026-03-29',
    fall: '2026-10-25',
    gapHour: 2,
    repeatHour: 2,
  },
  {
    zone: 'Europe/Berlin',
    std: '+01:00',
    dst: '+02:00',
    spring: '2027-03-28',
    fall: '2027-10-31',
    gapHour: 2,
    repeatHour: 2,
  },
  {
    zone: 'America/New_York',
    std: '-05:00',
    dst: '-04:00',
    spring: '2026-03-08',
    fall: '2026-11-01',
    gapHour: 2,
    repeatHour: 1,
  },
  {
    zone: 'America/New_York',
    std: '-05:00',
    dst: '-04:00',
    spring: '2027-03-14',
    fall: '2027-11-07',
    gapHour: 2,
    repeatHour: 1,
  },
];
const hh = (hour: number): string => String(hour).padStart(2, '0');

describe.each(TRANSITIONS)('DST in $zone, spring $spring, fall $fall', (dates) => {
  const { zone, std, dst, spring, fall, gapHour, repeatHour } = dates;
  const gap = hh(gapHour);
  const transition = `${spring}T${hh(gapHour + 1)}:00:00${dst}`;
  const rep = hh(repeatHour);
  const before = hh(repeatHour - 1);
  const after = hh(repeatHour + 1);

  it('fires a missing local time once, at the transition', () => {
    expect(fires(cronRule(`30 ${gap} * * *`, zone), `${addDays(spring, -1)}T12:00:00${std}`, 2)).toEqual(
      at(transition, `${addDays(spring, 1)}T${gap}:30:00${dst}`),
    );
  });

  it('collapses every missing local time of the gap into one fire', () => {
    const rule = cronRule(`*/15 ${gap} * * *`, zone);
    expect(fires(rule, `${addDays(spring, -1)}T12:00:00${std}`, 2)).toEqual(
      at(transition, `${addDays(spring, 1)}T${gap}:00:00${dst}`),
    );
    const day = rule.firesBetween(ms(`${spring}T00:00:00${std}`), ms(`${spring}T23:59:00${dst}`), 100);
    expect(day).toEqual({ times: [ms(transition)], truncated: false });
    // A fire at the end of the gap is the same instant: still one fire.
    const withEnd = cronRule(`*/30 ${gap},${hh(gapHour + 1)} * * *`, zone);
    expect(fires(withEnd, `${spring}T00:00:00${std}`, 2)).toEqual(
      at(transition, `${spring}T${hh(gapHour + 1)}:30:00${dst}`),
    );
  });

  it('fires a repeated local time once, at its first occurrence', () => {
    expect(fires(cronRule(`30 ${rep} * * *`, zone), `${addDays(fall, -1)}T12:00:00${dst}`, 2)).toEqual(
      at(`${fall}T${rep}:30:00${dst}`, `${addDays(fall, 1)}T${rep}:30:00${std}`),
    );
  });

  it('does not fire frequent expressions again in the repeated hour', () => {
    expect(fires(cronRule('*/20 * * * *', zone), `${fall}T${before}:30:00${dst}`, 5)).toEqual(
      at(
        `${fall}T${before}:40:00${dst}`,
        `${fall}T${rep}:00:00${dst}`,
        `${fall}T${rep}:20:00${dst}`,
        `${fall}T${rep}:40:00${dst}`,
        `${fall}T${after}:00:00${std}`,
      ),
    );
  });

  it('answers from inside the second pass of the repeated hour', () => {
    const rule = cronRule('*/20 * * * *', zone);
    expect(rule.nextAfter(ms(`${fall}T${rep}:10:00${std}`))).toBe(ms(`${fall}T${after}:00:00${std}`));
    // Until a second-pass time: the rest of the hour fired in the first pass, and counts.
    expect(rule.firesBetween(ms(`${fall}T${rep}:30:00${dst}`), ms(`${fall}T${rep}:10:00${std}`), 10)).toEqual({
      times: [ms(`${fall}T${rep}:40:00${dst}`)],
      truncated: false,
    });
  });

  it('gives strictly increasing fires through both transition days, the same both ways', () => {
    // 28 hours apart: 29 hours of wall clock less the missing one, or 27 with the repeated
    // one fired once; 6 fires an hour either way (the missing hour's collapse into 03:00).
    for (const [day, count] of [
      [spring, 28 * 6],
      [fall, 27 * 6],
    ] as const) {
      const rule = cronRule('*/10 * * * *', zone);
      const from = ms(`${addDays(day, -1)}T22:00:00Z`);
      const until = ms(`${addDays(day, 1)}T02:00:00Z`);
      const forwards: number[] = [];
      for (let t = rule.nextAfter(from); t !== null && t <= until; t = rule.nextAfter(t)) forwards.push(t);
      const { times, truncated } = rule.firesBetween(from, until, 1000);
      expect(truncated).toBe(false);
      expect(times).toEqual(forwards);
      for (let i = 1; i < times.length; i++) expect(times[i]).toBeGreaterThan(times[i - 1] as number);
      expect(times.length).toBe(count);
    }
  });
});

describe('DST in Australia/Lord_Howe: a 30-minute shift', () => {
  const zone = 'Australia/Lord_Howe';

  it.each([
    ['2026-10-04', '2026-10-03'],
    ['2027-10-03', '2027-10-02'],
  ])('fires the missing 02:00–02:30 once at 02:30 on %s', (day, dayBefore) => {
    expect(fires(cronRule('15 2 * * *', zone), `${dayBefore}T12:00:00+10:30`, 2)).toEqual(
      at(`${day}T02:30:00+11:00`, `${addDays(day, 1)}T02:15:00+11:00`),
    );
    const rule = cronRule('*/10 2 * * *', zone);
    const { times } = rule.firesBetween(ms(`${day}T00:00:00+10:30`), ms(`${day}T12:00:00+11:00`), 10);
    expect(times).toEqual([`${day}T02:30:00+11:00`, `${day}T02:40:00+11:00`, `${day}T02:50:00+11:00`].map(ms));
  });

  it.each([
    ['2026-04-05', '2026-04-04'],
    ['2027-04-04', '2027-04-03'],
  ])('fires the repeated 01:30–02:00 once, at +11:00, on %s', (day, dayBefore) => {
    expect(fires(cronRule('45 1 * * *', zone), `${dayBefore}T12:00:00+11:00`, 2)).toEqual(
      at(`${day}T01:45:00+11:00`, `${addDays(day, 1)}T01:45:00+10:30`),
    );
    expect(fires(cronRule('*/15 1 * * *', zone), `${day}T00:50:00+11:00`, 5)).toEqual(
      at(
        `${day}T01:00:00+11:00`,
        `${day}T01:15:00+11:00`,
        `${day}T01:30:00+11:00`,
        `${day}T01:45:00+11:00`,
        `${addDays(day, 1)}T01:00:00+10:30`,
      ),
    );
  });
});

describe('a zone without DST: Asia/Tokyo', () => {
  it('fires at the same local time through the days other zones change', () => {
    const rule = cronRule('30 2 * * *', 'Asia/Tokyo');
    for (const day of ['2026-03-08', '2026-03-29', '2026-10-25', '2026-11-01']) {
      expect(rule.nextAfter(ms(`${addDays(day, -1)}T12:00:00+09:00`))).toBe(ms(`${day}T02:30:00+09:00`));
    }
    expect(cronRule('0 * * * *', 'Asia/Tokyo').minIntervalMs(ms('2026-03-28T00:00:00Z'), 200)).toBe(3_600_000);
  });
});
