import type { FastifyBaseLogger } from 'fastify';
import type { DutyFailure, DutyFailuresEnded } from '../runtime/supervision.js';

/** A duty (by name) that is failing: since when, how often, and which of its subjects. */
interface FailingDuty {
  sinceMs: number;
  failures: number;
  /** The subjects (`DutyFailure.subject`, '' for none) whose run of failures is not over. */
  subjects: Set<string>;
  /** Whether the first failure was logged at warn (not explained by a store outage). */
  warned: boolean;
  /** When the run was last said at warn, and its failures then. */
  saidMs: number;
  saidFailures: number;
}

/**
 * A run of failures still going is said again at warn this often, with the failures since: a
 * run ends only when every subject that failed has succeeded, so a subject that failed and then
 * left without a word (an actor dropped mid-retry) would keep every later failure of the duty,
 * on any subject, at debug for the node's life. A cron schedule that failed to fire for a
 * minute in the nemesis left no line at warn.
 */
export const STILL_FAILING_MS = 30_000;

/**
 * The log of failing duties: two lines per run of failures of a duty, not one per retry. A
 * duty retries every 100 ms to 2 s while it fails, and a duty name stands for many actors (the
 * 64 wheel partitions' `wheel.cascade`), so a store outage of a minute would otherwise write
 * thousands of lines. The first failure of a duty is a warning; the others are counted (each
 * at debug); when every subject that failed has succeeded, one line says it recovered, after
 * how many failures and how long. A failure a store outage explains — the node has already
 * said the store is lost, and what that stops — is logged at debug, and so is its recovery.
 */
export class DutyLog {
  private readonly failing = new Map<string, FailingDuty>();

  /**
   * @param explained true when an error is a store being unreachable while the node has
   *   logged that store as lost
   * @param now wall time, ms
   */
  constructor(
    private readonly log: FastifyBaseLogger,
    private readonly explained: (error: unknown) => boolean = () => false,
    private readonly now: () => number = Date.now,
  ) {}

  /** A duty failed; it runs again after `failure.retryInMs`. */
  failed(error: unknown, failure: DutyFailure): void {
    const { duty, retryInMs } = failure;
    const subject = failure.subject ?? '';
    const run = this.failing.get(duty);
    if (run !== undefined) {
      run.failures++;
      run.subjects.add(subject);
      const now = this.now();
      if (run.warned && now - run.saidMs >= STILL_FAILING_MS) {
        const since = run.failures - run.saidFailures;
        this.log.warn(
          { err: error, duty, ...(failure.subject === undefined ? {} : { subject }), failures: run.failures },
          `duty ${duty} is still failing: ${since} failure${since === 1 ? '' : 's'} in the last ${seconds(now - run.saidMs)}, ${run.subjects.size} subject${run.subjects.size === 1 ? '' : 's'} not recovered`,
        );
        run.saidMs = now;
        run.saidFailures = run.failures;
      } else this.log.debug({ err: error, ...failure }, `duty ${duty} failed again (${run.failures} failures)`);
      return;
    }
    const warned = !this.explained(error);
    const now = this.now();
    this.failing.set(duty, {
      sinceMs: now,
      failures: 1,
      subjects: new Set([subject]),
      warned,
      saidMs: now,
      saidFailures: 1,
    });
    const fields = { err: error, duty, ...(failure.subject === undefined ? {} : { subject }), retryInMs };
    const message = `duty ${duty} failed; retrying in ${retryInMs} ms (further failures are counted until it recovers)`;
    if (warned) this.log.warn(fields, message);
    else this.log.debug(fields, message);
  }

  /** A subject of a duty succeeded after failures, or was stopped while failing. */
  ended(ended: DutyFailuresEnded): void {
    const run = this.failing.get(ended.duty);
    if (run === undefined || !run.subjects.delete(ended.subject ?? '') || run.subjects.size > 0) return;
    this.failing.delete(ended.duty);
    const afterMs = this.now() - run.sinceMs;
    const fields = { duty: ended.duty, failures: run.failures, afterMs };
    const span = `${run.failures} failure${run.failures === 1 ? '' : 's'} in ${seconds(afterMs)}`;
    const message =
      ended.outcome === 'recovered'
        ? `duty ${ended.duty} recovered after ${span}`
        : `duty ${ended.duty} stopped while failing, after ${span}`;
    if (run.warned) this.log.info(fields, message);
    else this.log.debug(fields, message);
  }
}

/** `4.2 s` */
export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
