import { request } from 'undici';
import type { Assignment, WorkersApi } from '../services/types.js';
import { startBuiltinExecutor, type BuiltinExecutor, type ExecutorOutcome } from './builtin.js';

/**
 * The built-in `wheelhouse.http` executor: calls a URL with the task's payload and succeeds
 * on 2xx — what Cloud Tasks and Cloud Scheduler users expect.
 *
 * Payload: `{ "url": "https://…", "method"?: "POST", "headers"?: {…}, "body"?: any,
 * "timeout_ms"?: number }`. A JSON `body` is sent as JSON; a string as is. Outcomes: 2xx →
 * succeeded; 408, 429, 5xx or a network error → failed and retried (with backoff, while
 * retries last); any other status, or a payload that is not a valid request → failed for
 * good at once.
 */
export const HTTP_TASK_TYPE = 'wheelhouse.http';

/** Requests in flight at once. */
const CONCURRENCY = 64;
/** The response body kept in an error message. */
const ERROR_BODY_BYTES = 512;
const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD']);

export function startHttpExecutor(api: WorkersApi, nodeId: string, onError: (error: unknown) => void): BuiltinExecutor {
  return startBuiltinExecutor(api, nodeId, {
    taskType: HTTP_TASK_TYPE,
    concurrency: CONCURRENCY,
    run: callOnce,
    onError,
  });
}

async function callOnce(task: Assignment): Promise<ExecutorOutcome> {
  const spec = readSpec(task.payload);
  if (typeof spec === 'string') return { outcome: 'failed', error: `payload: ${spec}`, retryable: false };
  // Finish well inside the lease, so no heartbeat is needed.
  const leaseMs = task.timeoutSeconds * 1000;
  const timeoutMs = Math.max(100, Math.min(spec.timeoutMs ?? leaseMs, leaseMs - 1_000));
  try {
    const response = await request(spec.url, {
      method: spec.method as 'POST',
      headers: spec.headers,
      body: spec.body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.body.text();
    const status = response.statusCode;
    if (status >= 200 && status < 300) return { outcome: 'succeeded', error: null, retryable: true };
    const retryable = status === 408 || status === 429 || status >= 500;
    return { outcome: 'failed', error: `HTTP ${status}: ${text.slice(0, ERROR_BODY_BYTES)}`, retryable };
  } catch (error) {
    return { outcome: 'failed', error: `request failed: ${(error as Error).message}`, retryable: true };
  }
}

interface HttpSpec {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
  timeoutMs: number | undefined;
}

/** The request a payload describes, or why it describes none. */
function readSpec(payload: unknown): HttpSpec | string {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return 'must be an object with a url';
  const p = payload as Record<string, unknown>;
  if (typeof p.url !== 'string') return 'url must be a string';
  let url: URL;
  try {
    url = new URL(p.url);
  } catch {
    return `url "${p.url}" is not a URL`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'url must be http or https';
  const method = p.method === undefined ? 'POST' : typeof p.method === 'string' ? p.method.toUpperCase() : '';
  if (!METHODS.has(method)) return `method must be one of ${[...METHODS].join(', ')}`;
  const headers: Record<string, string> = {};
  if (p.headers !== undefined) {
    if (typeof p.headers !== 'object' || p.headers === null || Array.isArray(p.headers))
      return 'headers must be an object';
    for (const [k, v] of Object.entries(p.headers)) headers[k.toLowerCase()] = String(v);
  }
  let body: string | undefined;
  if (p.body !== undefined && method !== 'GET' && method !== 'HEAD') {
    if (typeof p.body === 'string') {
      body = p.body;
    } else {
      body = JSON.stringify(p.body);
      headers['content-type'] ??= 'application/json';
    }
  }
  if (p.timeout_ms !== undefined && (typeof p.timeout_ms !== 'number' || !(p.timeout_ms > 0)))
    return 'timeout_ms must be a positive number';
  return { url: url.toString(), method, headers, body, timeoutMs: p.timeout_ms };
}
