/**
 * Waiting between attempts: bounded exponential backoff with jitter, or the node's own
 * `Retry-After` (429 admission control, 503 store down) when it sends one.
 */

/** First backoff step, ms. */
const BASE_MS = 100;
/** Longest backoff step, ms. */
const MAX_MS = 5_000;
/** Longest `Retry-After` honoured, ms: a larger one is clamped so a call never sleeps for hours. */
const MAX_RETRY_AFTER_MS = 60_000;

/** Delay before retry number `retry` (0-based): a random time in [step/2, step], step = 100 ms · 2^retry ≤ 5 s. */
export function backoffMs(retry: number): number {
  const stepMs = Math.min(MAX_MS, BASE_MS * 2 ** Math.min(retry, 16));
  return stepMs / 2 + Math.random() * (stepMs / 2);
}

/**
 * `Retry-After` (seconds, or an HTTP date) as ms from now, plus up to 10 % jitter so many
 * clients told the same thing do not all come back in the same millisecond. null when absent
 * or unreadable.
 */
export function retryAfterMs(header: string | null, nowMs = Date.now()): number | null {
  if (header === null || header.trim() === '') return null;
  let ms = Number(header) * 1000;
  if (!Number.isFinite(ms)) ms = Date.parse(header) - nowMs;
  if (!Number.isFinite(ms)) return null;
  ms = Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms));
  return ms + Math.random() * ms * 0.1;
}

/** Resolves after `ms`; rejects with the signal's reason if it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as unknown);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason as unknown);
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.min(ms, 2 ** 31 - 1),
    );
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
