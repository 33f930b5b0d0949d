import type { Dispatcher, request as undiciRequest } from 'undici';
import type { CompiledOptions } from '../lib/config.js';
import type { Assignment, WorkersApi } from '../services/types.js';
import { startBuiltinExecutor, type BuiltinExecutor, type ExecutorOutcome } from './builtin.js';
import { DestinationPolicy, DestinationRefusedError } from './destination-policy.js';

/**
 * The built-in `wheelhouse.http` executor: calls a URL with the task's payload and succeeds
 * on 2xx — what Cloud Tasks and Cloud Scheduler users expect.
 *
 * Payload: `{ "url": "https://…", "method"?: "POST", "headers"?: {…}, "body"?: any,
 * "timeout_ms"?: number }`. A JSON `body` is sent as JSON; a string as is. Outcomes, decided
 * by the status (whatever becomes of the body after it): 2xx → succeeded; 408, 429, 5xx, no
 * answer by the deadline or a network error → failed and retried (with backoff,
 * while retries last); any other status (a redirect included: none is followed), a
 * destination the policy refuses, or a payload that is not a valid request → failed for good
 * at once.
 *
 * What a task may make the node do is bounded: it connects to public addresses only unless
 * `httpExecutorAllow` says otherwise (destination-policy.ts, checked on each connection as it
 * is made: guarded-dispatcher.ts); it reads at most `httpExecutorMaxResponseBytes` of an
 * answer and closes the connection past them; the call as a whole takes at most
 * `httpExecutorTimeoutMs`; it holds at most `httpExecutorConnectionsPerDestination`
 * connections to one destination; and what it reports in `last_error` is a short summary.
 */
export const HTTP_TASK_TYPE = 'wheelhouse.http';

/** The options the executor reads. */
export type HttpExecutorOptions = Pick<
  CompiledOptions,
  | 'nodeId'
  | 'httpExecutorAllow'
  | 'httpExecutorMaxResponseBytes'
  | 'httpExecutorTimeoutMs'
  | 'httpExecutorConnectionsPerDestination'
>;

/** Requests in flight at once. */
const CONCURRENCY = 64;
/** The bytes of an answer's body, and the characters of an error, kept in `last_error`. */
const SUMMARY_BYTES = 200;
/** The shortest call, whatever the lease and the payload say, ms. */
const MIN_TIMEOUT_MS = 100;
const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD']);

/**
 * Where the executor writes what it keeps from the task (a refusal's address and rule, a
 * network error's own words): the node's log. A pino logger is one.
 */
export interface ExecutorLog {
  warn(fields: object, message: string): void;
  debug(fields: object, message: string): void;
}

const SILENT: ExecutorLog = { warn: () => undefined, debug: () => undefined };

export function startHttpExecutor(
  api: WorkersApi,
  options: HttpExecutorOptions,
  onError: (error: unknown) => void,
  log: ExecutorLog = SILENT,
): BuiltinExecutor {
  // undici comes with the first call, not with the node: most nodes run no HTTP task, and
  // loading it cost every start ~0.05 s of CPU (docs/benchmarks.md, "Embedded default").
  let client: Promise<HttpClient> | null = null;
  const connect = (): Promise<HttpClient> =>
    (client ??= Promise.all([import('undici'), import('./guarded-dispatcher.js')]).then(([undici, guarded]) => ({
      request: undici.request,
      dispatcher: guarded.guardedDispatcher(new DestinationPolicy(options.httpExecutorAllow), {
        connectionsPerDestination: options.httpExecutorConnectionsPerDestination,
        connectTimeoutMs: options.httpExecutorTimeoutMs,
      }),
    })));
  const limits = { timeoutMs: options.httpExecutorTimeoutMs, maxResponseBytes: options.httpExecutorMaxResponseBytes };
  const executor = startBuiltinExecutor(api, options.nodeId, {
    taskType: HTTP_TASK_TYPE,
    concurrency: CONCURRENCY,
    run: async (task) => callOnce(task, await connect(), limits, log),
    onError,
  });
  return {
    async stop() {
      await executor.stop();
      // Every call has finished and been reported: only idle connections are left.
      const made = await client?.catch(() => null);
      if (made) await made.dispatcher.destroy();
    },
  };
}

/** undici's `request`, and the dispatcher every call goes through. */
interface HttpClient {
  request: typeof undiciRequest;
  dispatcher: Dispatcher;
}

async function callOnce(
  task: Assignment,
  { request, dispatcher }: HttpClient,
  limits: { timeoutMs: number; maxResponseBytes: number },
  log: ExecutorLog,
): Promise<ExecutorOutcome> {
  const spec = readSpec(task.payload);
  if (typeof spec === 'string') return failedForGood(`payload: ${spec}`);
  // Finish well inside the lease, so no heartbeat is needed.
  const leaseMs = task.timeoutSeconds * 1000;
  const timeoutMs = Math.max(
    MIN_TIMEOUT_MS,
    Math.min(spec.timeoutMs ?? limits.timeoutMs, limits.timeoutMs, leaseMs - 1_000),
  );
  // One deadline for the whole call: waiting for a connection, connecting, the answer, its body.
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const response = await request(spec.url, {
      dispatcher,
      method: spec.method,
      headers: spec.headers,
      body: spec.body,
      signal,
    });
    // The status decides; the body is read (within the cap and the deadline) for its first
    // bytes and so the connection can be reused.
    const status = response.statusCode;
    const head = await readHead(response.body, { ...limits, timeoutMs }, signal);
    if (status >= 200 && status < 300) return { outcome: 'succeeded', error: null, retryable: true };
    if (status >= 300 && status < 400) {
      const location = response.headers.location;
      const to = typeof location === 'string' ? ` to ${clip(location)}` : '';
      return failedForGood(`HTTP ${status}: a redirect${to}, not followed (the executor follows none)`);
    }
    const retryable = status === 408 || status === 429 || status >= 500;
    const body = describeBody(head);
    return { outcome: 'failed', error: body === '' ? `HTTP ${status}` : `HTTP ${status}: ${body}`, retryable };
  } catch (error) {
    const refused = refusalIn(error);
    if (refused !== null) {
      log.warn({ taskId: task.id }, `wheelhouse.http ${refused.detail}`);
      return failedForGood(refused.message);
    }
    if (signal.aborted) return { outcome: 'failed', error: `timed out after ${timeoutMs} ms`, retryable: true };
    // undici refuses what cannot be sent (a header with a line break in it): a payload error.
    if (error instanceof Error && (error as { code?: unknown }).code === 'UND_ERR_INVALID_ARG')
      return failedForGood(`payload: ${clip(messageOf(error))}`);
    // The error's own words name the addresses a name resolved to ("connect ECONNREFUSED
    // 10.0.0.5:443"): the log has them, the task a sentence of what happened.
    log.debug({ taskId: task.id, host: new URL(spec.url).host, err: error }, 'wheelhouse.http request failed');
    return { outcome: 'failed', error: `request failed: ${networkFailure(error)}`, retryable: true };
  }
}

/** What a network error was, in words that name no address: by its code, or the code alone. */
function networkFailure(error: unknown): string {
  const code = codeIn(error);
  if (code === undefined) return 'the connection failed';
  if (['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_FAIL', 'EAI_NODATA'].includes(code))
    return `the host name was not found (${code})`;
  if (code === 'ECONNREFUSED') return 'the connection was refused (ECONNREFUSED)';
  if (['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET'].includes(code)) return `the connection was closed (${code})`;
  if (['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT'].includes(code)) return `connecting timed out (${code})`;
  if (['EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN'].includes(code)) return `no route to the host (${code})`;
  if (/CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return `TLS failed (${code})`;
  return code;
}

/** The first `code` of an error or its causes that looks like one (`ECONNREFUSED`, `UND_ERR_SOCKET`). */
function codeIn(error: unknown): string | undefined {
  for (let e = error, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Z0-9_]{2,64}$/.test(code)) return code;
  }
  return undefined;
}

function failedForGood(error: string): ExecutorOutcome {
  return { outcome: 'failed', error, retryable: false };
}

/** The policy's refusal, as the error itself or its cause (undici may wrap a connection's error). */
function refusalIn(error: unknown): DestinationRefusedError | null {
  for (let e = error, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    if (e instanceof DestinationRefusedError) return e;
  }
  return null;
}

interface BodyHead {
  /** The first bytes, at most SUMMARY_BYTES. */
  bytes: Buffer;
  /** Bytes read in all (past the cap: the first chunk past it). */
  readBytes: number;
  /** Why the body was not read to its end (the connection was closed there), or null. */
  cut: string | null;
}

/**
 * Reads a body up to `maxBytes`, keeping only its first bytes. Past the cap, at the call's
 * deadline, or on an error, it stops and destroys the body, which closes the connection (a
 * keep-alive connection cannot be reused with part of an answer unread). A small body is read
 * to its end, so its connection can be reused. Never throws: the status has decided the
 * outcome already.
 */
async function readHead(
  body: Dispatcher.ResponseData['body'],
  limits: { timeoutMs: number; maxResponseBytes: number },
  signal: AbortSignal,
): Promise<BodyHead> {
  const kept: Buffer[] = [];
  let keptBytes = 0;
  let readBytes = 0;
  const head = (cut: string | null): BodyHead => ({ bytes: Buffer.concat(kept), readBytes, cut });
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      readBytes += chunk.length;
      if (keptBytes < SUMMARY_BYTES) {
        const part = chunk.subarray(0, SUMMARY_BYTES - keptBytes);
        kept.push(part);
        keptBytes += part.length;
      }
      if (readBytes > limits.maxResponseBytes) {
        body.destroy();
        return head(`cut at ${limits.maxResponseBytes} bytes`);
      }
    }
    return head(null);
  } catch (error) {
    body.destroy();
    return head(signal.aborted ? `cut at the deadline, ${limits.timeoutMs} ms` : `cut: ${clip(messageOf(error))}`);
  }
}

/** The start of a body, on one line, and whether it went on. */
function describeBody(head: BodyHead): string {
  const text = oneLine(head.bytes.toString('utf8'));
  const more = head.cut !== null ? ` … (${head.cut})` : head.readBytes > head.bytes.length ? ' …' : '';
  return `${text}${more}`.trim();
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A message on one line, at most SUMMARY_BYTES characters. */
function clip(text: string): string {
  const line = oneLine(text);
  return line.length > SUMMARY_BYTES ? `${line.slice(0, SUMMARY_BYTES)} …` : line;
}

function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
}

interface HttpSpec {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
  timeoutMs: number | undefined;
}

/**
 * Headers of the connection, not of the request, and `host`: the executor sets them itself
 * (the URL's host, its own framing), so a task cannot address another virtual host at the
 * address it was allowed, smuggle a second request through its own framing, or upgrade the
 * connection. Dropped from a payload's headers, with any header its `connection` names.
 */
const HOP_BY_HOP = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
  'content-length',
  'expect',
  'http2-settings',
]);

function dropHopByHop(headers: Record<string, string>): void {
  for (const named of (headers.connection ?? '').split(',')) delete headers[named.trim().toLowerCase()];
  for (const name of HOP_BY_HOP) delete headers[name];
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
    return `url "${clip(p.url)}" is not a URL`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'url must be http or https';
  const method = p.method === undefined ? 'POST' : typeof p.method === 'string' ? p.method.toUpperCase() : '';
  if (!METHODS.has(method)) return `method must be one of ${[...METHODS].join(', ')}`;
  const headers: Record<string, string> = {};
  if (p.headers !== undefined) {
    if (typeof p.headers !== 'object' || p.headers === null || Array.isArray(p.headers))
      return 'headers must be an object';
    for (const [k, v] of Object.entries(p.headers)) headers[k.toLowerCase()] = String(v);
    dropHopByHop(headers);
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
