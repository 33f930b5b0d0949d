import {
  MAX_CONCURRENCY,
  MAX_RATE_BURST,
  MAX_RATE_LIMIT,
  MAX_RATE_PERIOD_SECONDS,
  MAX_WEIGHT,
  MIN_WEIGHT,
  ON_LIMIT,
  isLimitName,
  type LimitSpec,
  type OnLimit,
} from '../domain/limits.js';
import { WheelhouseError } from '../lib/errors.js';

/**
 * What an operator sends to declare a limit (API.md "Flow control", `PUT /api/limits/{name}`),
 * in the services' words, and the one function that turns it into a `LimitSpec`: the bounds
 * checked, the defaults filled. The HTTP schema checks the same bounds (from the same
 * constants) before a request gets here; this check is for every other caller.
 */

/** A declaration as sent: every member may be left out (or null, where "none" is a value). */
export interface LimitInput {
  /** Tasks of the key running at once; 0 pauses it. null or left out: unlimited. */
  concurrency?: number | null;
  /** Starts per period; null or left out: unlimited. */
  rate?: { limit: number; periodSeconds: number; burst?: number | null } | null;
  /** @default 'queue' */
  onLimit?: OnLimit | null;
  /** @default 1 */
  weight?: number | null;
}

/** The shortest rate period, seconds: the store keeps whole milliseconds. */
export const MIN_RATE_PERIOD_SECONDS = 0.001;

/** The spec a declaration with nothing in it is: unlimited, queueing, weight 1. */
export const DEFAULT_LIMIT_SPEC: Readonly<LimitSpec> = Object.freeze({
  concurrency: null,
  rate: null,
  onLimit: 'queue',
  weight: 1,
});

/** A name that is a limit's, or 400 `validation_failed` naming `name`. */
export function checkLimitName(name: string): string {
  if (!isLimitName(name)) {
    throw new WheelhouseError(
      'validation_failed',
      `name: ${JSON.stringify(name.slice(0, 210))} is not a limit name (1–200 of letters, digits and _ . : - ; ` +
        'a family ends in ":*")',
      { details: { field: 'name' } },
    );
  }
  return name;
}

/** `input` as a spec, or 400 `validation_failed` naming the first field out of bounds. */
export function limitSpecOf(input: LimitInput): LimitSpec {
  const concurrency = input.concurrency ?? null;
  if (concurrency !== null) wholeNumber(concurrency, 'concurrency', 0, MAX_CONCURRENCY);
  let rate: LimitSpec['rate'] = null;
  if (input.rate !== undefined && input.rate !== null) {
    const { limit, periodSeconds } = input.rate;
    const burst = input.rate.burst ?? 0;
    wholeNumber(limit, 'rate.limit', 1, MAX_RATE_LIMIT);
    wholeNumber(burst, 'rate.burst', 0, MAX_RATE_BURST);
    const periodMs = Math.round(periodSeconds * 1000);
    if (
      !Number.isFinite(periodSeconds) ||
      periodSeconds < MIN_RATE_PERIOD_SECONDS ||
      periodSeconds > MAX_RATE_PERIOD_SECONDS ||
      Math.abs(periodSeconds * 1000 - periodMs) > 1e-6
    ) {
      fail(
        'rate.period_seconds',
        `must be from ${MIN_RATE_PERIOD_SECONDS} to ${MAX_RATE_PERIOD_SECONDS}, in whole milliseconds`,
        periodSeconds,
      );
    }
    rate = { limit, periodMs, burst };
  }
  const onLimit = input.onLimit ?? DEFAULT_LIMIT_SPEC.onLimit;
  if (!ON_LIMIT.includes(onLimit)) fail('on_limit', `must be one of ${ON_LIMIT.join(', ')}`, onLimit);
  const weight = input.weight ?? DEFAULT_LIMIT_SPEC.weight;
  if (!Number.isFinite(weight) || weight < MIN_WEIGHT || weight > MAX_WEIGHT) {
    fail('weight', `must be from ${MIN_WEIGHT} to ${MAX_WEIGHT}`, weight);
  }
  return { concurrency, rate, onLimit, weight };
}

/** Whether `spec` says nothing a declaration with nothing in it would not (a pause undone). */
export function isDefaultSpec(spec: LimitSpec): boolean {
  return (
    spec.concurrency === null &&
    spec.rate === null &&
    spec.onLimit === DEFAULT_LIMIT_SPEC.onLimit &&
    spec.weight === DEFAULT_LIMIT_SPEC.weight
  );
}

function wholeNumber(value: number, field: string, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max)
    fail(field, `must be a whole number from ${min} to ${max}`, value);
}

function fail(field: string, rule: string, value: unknown): never {
  throw new WheelhouseError('validation_failed', `${field}: ${rule}, got ${JSON.stringify(value)}`, {
    details: { field },
  });
}
