/**
 * Waiting between attempts: exponential backoff with full jitter for errors, and the
 * node's own `Retry-After` when it sends one (429 admission control, 503 store down).
 * Nothing in the worker retries without going through here, so there is no tight loop.
 */

/** First backoff step, ms. */
const BASE_MS = 100;
/** Longest backoff step, ms. */
const MAX_MS = 5_000;
/** Longest `Retry-After` honoured, ms: a larger value is clamped so a worker never sleeps for hours. */
const MAX_RETRY_AFTER_MS = 60_000;

/** Delay before retry number `attempt` (0-based): a random time in [step/2, step], step = 100 ms · 2^attempt ≤ 5 s. */
export function backoffMs(attempt: number): number {
  const stepMs = Math.min(MAX_MS, BASE_MS * 2 ** Math.min(attempt, 16));
  return stepMs / 2 + Math.random() * (stepMs / 2);
}

/**
 * Reads `Retry-After` (seconds, or an HTTP date) as ms from now, with up to 10 % jitter so
 * many workers told the same thing do not return in the same millisecond. null when absent
 * or unreadable.
 */
export function retryAfterMs(header: string | string[] | undefined, nowMs = Date.now()): number | null {
  const raw = Array.isArray(header) ? header[0] : header;
  if (raw === undefined || raw.trim() === '') return null;
  let ms = Number(raw) * 1000;
  if (!Number.isFinite(ms)) ms = Date.parse(raw) - nowMs;
  if (!Number.isFinite(ms)) return null;
  ms = Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms));
  return ms + Math.random() * ms * 0.1;
}

/** Resolves after `ms`, or at once when `signal` aborts (it never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.min(ms, 2 ** 31 - 1));
    signal?.addEventListener('abort', done, { once: true });
  });
}
