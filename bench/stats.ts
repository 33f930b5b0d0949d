/** Order statistics for the benchmark figures. */

/** The p-th percentile (0–100) by nearest rank; NaN for no values. Sorts a copy. */
export function percentile(values: ArrayLike<number>, p: number): number {
  return percentiles(values, [p])[0] ?? Number.NaN;
}

/** Several percentiles with one sort. */
export function percentiles(values: ArrayLike<number>, ps: readonly number[]): number[] {
  if (values.length === 0) return ps.map(() => Number.NaN);
  const sorted = Float64Array.from(values).sort();
  return ps.map(
    (p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number,
  );
}

/** The median of run figures (the mean of the middle two for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (finite.length === 0) return Number.NaN;
  const mid = finite.length >> 1;
  return finite.length % 2 === 1
    ? (finite[mid] as number)
    : ((finite[mid - 1] as number) + (finite[mid] as number)) / 2;
}

/** 100000 → "100 000", as the report writes counts. */
export function spaced(n: number): string {
  return n.toLocaleString('en-US').replace(/,/g, ' ');
}

/** Durations (ms) with when each began, as two parallel arrays: start lags, request times. */
export interface Timed {
  startMs: number[];
  lagMs: number[];
}

/**
 * Splits `series` at the window [fromMs, toMs): answers what began inside it (`taken`) and what
 * began at or after `toMs` (`kept`); what began before `fromMs` is dropped.
 */
export function takeWindow(series: Timed, fromMs: number, toMs: number): { taken: Timed; kept: Timed } {
  const taken: Timed = { startMs: [], lagMs: [] };
  const kept: Timed = { startMs: [], lagMs: [] };
  series.startMs.forEach((startMs, i) => {
    const into = startMs >= toMs ? kept : startMs >= fromMs ? taken : undefined;
    into?.startMs.push(startMs);
    into?.lagMs.push(series.lagMs[i] as number);
  });
  return { taken, kept };
}

/** Most values of `sorted` (ascending) in any half-open window of `windowMs`. */
export function maxInWindow(sorted: readonly number[], windowMs: number): number {
  let max = 0;
  let from = 0;
  for (let to = 0; to < sorted.length; to++) {
    while ((sorted[to] as number) - (sorted[from] as number) >= windowMs) from++;
    max = Math.max(max, to - from + 1);
  }
  return max;
}
