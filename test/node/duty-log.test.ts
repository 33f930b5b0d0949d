/**
 * UNIT tests of the duty log: a duty failing on many actors and retrying many times is two
 * lines — a warning at its first failure, an info line with the count when the last failing
 * subject recovers — and a failure a logged store outage explains is debug only.
 */
import { describe, expect, it } from 'vitest';
import { pino, type Logger } from 'pino';
import { DutyLog } from '../../src/node/duty-log.js';
import { WheelhouseError } from '../../src/lib/errors.js';

interface Line {
  level: number;
  msg: string;
  failures?: number;
  duty?: string;
}

function logged(level = 'info'): { log: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const log = pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line) as Line) });
  return { log, lines };
}

describe('DutyLog', () => {
  it('logs the first failure of a duty and its recovery with the count, not each retry', () => {
    const { log, lines } = logged();
    let now = 0;
    const duties = new DutyLog(
      log,
      () => false,
      () => now,
    );
    const error = new Error('boom');
    for (let attempt = 1; attempt <= 20; attempt++) {
      for (const key of ['0', '1', '2'])
        duties.failed(error, { duty: 'wheel.cascade', subject: `wheel/${key}`, attempt, retryInMs: 100 });
      now += 100;
    }
    duties.ended({ duty: 'wheel.cascade', subject: 'wheel/0', failures: 20, outcome: 'recovered' });
    duties.ended({ duty: 'wheel.cascade', subject: 'wheel/1', failures: 20, outcome: 'abandoned' });
    expect(lines.map((l) => l.msg)).toEqual([expect.stringMatching(/^duty wheel.cascade failed; retrying in 100 ms/)]);
    duties.ended({ duty: 'wheel.cascade', subject: 'wheel/2', failures: 20, outcome: 'recovered' });
    expect(lines).toHaveLength(2);
    expect(lines[0]!.level).toBe(40);
    expect(lines[1]).toEqual(
      expect.objectContaining({
        level: 30,
        msg: 'duty wheel.cascade recovered after 60 failures in 2.0 s',
        failures: 60,
      }),
    );
    // A new run of failures is logged again.
    duties.failed(error, { duty: 'wheel.cascade', subject: 'wheel/0', attempt: 1, retryInMs: 100 });
    expect(lines).toHaveLength(3);
  });

  it('says a run of failures that goes on again at warn, every 30 s, with the failures since', () => {
    const { log, lines } = logged();
    let now = 0;
    const duties = new DutyLog(
      log,
      () => false,
      () => now,
    );
    const error = new Error('boom');
    // One subject failed once and never came back; another fails every second from then on.
    duties.failed(error, { duty: 'cron.fire', subject: 'cron/gone', attempt: 1, retryInMs: 100 });
    for (let attempt = 1; attempt <= 65; attempt++) {
      now += 1_000;
      duties.failed(error, { duty: 'cron.fire', subject: 'cron/a', attempt, retryInMs: 1_000 });
    }
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, expect.stringMatching(/^duty cron.fire failed; retrying in 100 ms/)],
      [40, 'duty cron.fire is still failing: 30 failures in the last 30.0 s, 2 subjects not recovered'],
      [40, 'duty cron.fire is still failing: 30 failures in the last 30.0 s, 2 subjects not recovered'],
    ]);
    expect(lines[2]!.failures).toBe(61);
  });

  it('keeps the failures a store outage explains, and their recovery, at debug', () => {
    const { log, lines } = logged('debug');
    const duties = new DutyLog(log, (e) => e instanceof WheelhouseError);
    const down = new WheelhouseError('store_unavailable', 'Redis is unavailable');
    duties.failed(down, { duty: 'backlog', attempt: 1, retryInMs: 50 });
    duties.failed(down, { duty: 'backlog', attempt: 2, retryInMs: 100 });
    duties.ended({ duty: 'backlog', failures: 2, outcome: 'recovered' });
    expect(lines.map((l) => l.level)).toEqual([20, 20, 20]);
    expect(lines.at(-1)!.msg).toMatch(/^duty backlog recovered after 2 failures/);
  });

  it('ignores the end of a run it never saw', () => {
    const { log, lines } = logged();
    new DutyLog(log).ended({ duty: 'backlog', failures: 3, outcome: 'recovered' });
    expect(lines).toEqual([]);
  });
});
