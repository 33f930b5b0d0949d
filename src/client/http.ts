import { backoffMs, retryAfterMs, sleep } from './backoff.js';
import { WheelhouseApiError, WheelhouseNetworkError, apiErrorFrom } from './errors.js';
import type { ClientOptions, RetryInfo } from './types.js';

/**
 * One request to a node, with the client's retry rules:
 *
 * - 429 and 503 are retried whatever the method (the node wrote nothing), after the node's
 *   `Retry-After`, or the backoff when it sent none;
 * - a network error (or a 5xx other than 503, a proxy's 502) is retried only when the call
 *   says it is safe to send twice: GETs, and submissions that carry an idempotency key;
 * - any other 4xx is never retried;
 *
 * at most `retries` times, with bounded exponential backoff between attempts.
 */

export interface Call {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: Record<string, string | number | null | undefined>;
  body?: unknown;
  /** Sending it twice does no harm: network errors may be retried. */
  idempotent: boolean;
}

/** A 2xx answer. */
export interface Answer {
  status: number;
  body: unknown;
}

const DEFAULT_RETRIES = 3;
const DEFAULT_TIMEOUT_MS = 30_000;

export class Transport {
  private readonly base: string;
  private readonly headers: Record<string, string>;
  private readonly retries: number;
  private readonly timeoutMs: number;
  private readonly fetch: typeof globalThis.fetch;
  private readonly onRetry: ((info: RetryInfo) => void) | undefined;

  constructor(options: ClientOptions) {
    const parsed = new URL(options.url);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new TypeError(`client url must be http(s), got ${options.url}`);
    }
    this.base = parsed.origin + parsed.pathname.replace(/\/+$/, '');
    this.headers = { accept: 'application/json' };
    if (options.token !== undefined) this.headers.authorization = `Bearer ${options.token}`;
    this.retries = Math.max(0, Math.floor(options.retries ?? DEFAULT_RETRIES));
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.onRetry = options.onRetry;
  }

  /** Resolves with a 2xx answer; rejects with `WheelhouseApiError` or `WheelhouseNetworkError`. */
  async send(call: Call): Promise<Answer> {
    for (let attempt = 1; ; attempt++) {
      let error: WheelhouseApiError | WheelhouseNetworkError;
      let delayMs: number | null = null;
      let retryable: boolean;
      try {
        const answer = await this.once(call);
        if (answer.status >= 200 && answer.status < 300) return { status: answer.status, body: answer.body };
        error = apiErrorFrom(answer.status, answer.body, answer.retryAfterMs, call);
        delayMs = answer.retryAfterMs;
        retryable = answer.status === 429 || answer.status === 503 || (answer.status >= 500 && call.idempotent);
      } catch (caught) {
        if (!(caught instanceof WheelhouseNetworkError)) throw caught;
        error = caught;
        retryable = call.idempotent && !caught.protocol;
      }
      if (!retryable || attempt > this.retries) throw error;
      delayMs ??= backoffMs(attempt - 1);
      const status = error instanceof WheelhouseApiError ? error.status : null;
      this.onRetry?.({ method: call.method, path: call.path, attempt, delayMs, status, error });
      await sleep(delayMs);
    }
  }

  /** One attempt: any status resolves; no answer (or an unreadable 2xx body) rejects. */
  private async once(call: Call): Promise<{ status: number; body: unknown; retryAfterMs: number | null }> {
    const url = new URL(this.base + call.path);
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
    }
    const headers = { ...this.headers };
    let body: string | undefined;
    if (call.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(call.body);
    }
    const signal = AbortSignal.timeout(this.timeoutMs);
    let status: number;
    let text: string;
    let retryAfter: string | null;
    try {
      const response = await this.fetch(url, { method: call.method, headers, body, signal });
      status = response.status;
      retryAfter = response.headers.get('retry-after');
      text = await response.text();
    } catch (cause) {
      const timedOut = signal.aborted;
      const reason = timedOut ? `no answer within ${this.timeoutMs} ms` : describe(cause);
      throw new WheelhouseNetworkError(call, reason, { cause, timedOut });
    }
    let parsed: unknown = null;
    if (text.length > 0) {
      try {
        parsed = JSON.parse(text);
      } catch (cause) {
        if (status >= 200 && status < 300) {
          throw new WheelhouseNetworkError(call, `answered ${status} with a body that is not JSON`, {
            cause,
            protocol: true,
          });
        }
      }
    }
    return { status, body: parsed, retryAfterMs: retryAfterMs(retryAfter) };
  }
}

/** A fetch failure's message with its cause's (undici says only "fetch failed" and puts the reason in `cause`). */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}
