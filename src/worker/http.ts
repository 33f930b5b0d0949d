import { Pool } from 'undici';
import { retryAfterMs } from './backoff.js';

/**
 * The worker's HTTP connection to one node: an undici `Pool` of keep-alive connections, so
 * a long-poll waiting on one connection never holds up heartbeats and completions on the
 * others. JSON in, JSON out; it never retries by itself (callers decide, see `backoff.ts`).
 */

/** A node's answer: status, parsed body (null when empty or not JSON) and its `Retry-After`. */
export interface NodeAnswer {
  status: number;
  body: unknown;
  /** From `Retry-After`, ms; null when the node sent none. */
  retryAfterMs: number | null;
}

/** A non-2xx answer, as an error to report or throw. */
export class NodeAnswerError extends Error {
  constructor(
    readonly path: string,
    readonly status: number,
    readonly code: string | null,
    detail: string,
    readonly retryAfterMs: number | null,
  ) {
    super(`POST ${path} answered ${status}${code ? ` ${code}` : ''}${detail ? `: ${detail}` : ''}`);
    this.name = 'NodeAnswerError';
  }

  static from(path: string, answer: NodeAnswer): NodeAnswerError {
    const error = (answer.body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
    return new NodeAnswerError(
      path,
      answer.status,
      typeof error?.code === 'string' ? error.code : null,
      typeof error?.message === 'string' ? error.message : '',
      answer.retryAfterMs,
    );
  }

  /** Worth trying again later: admission control, store unreachable, or any other 5xx. */
  get transient(): boolean {
    return this.status === 429 || this.status >= 500;
  }
}

export class NodeClient {
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly headers: Record<string, string>;

  constructor(url: string, token: string | undefined, connections: number) {
    const parsed = new URL(url);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new TypeError(`worker url must be http(s), got ${url}`);
    }
    this.basePath = parsed.pathname.replace(/\/+$/, '');
    this.pool = new Pool(parsed.origin, {
      connections,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      // A long-poll answers within 30 s; anything much slower is a dead connection.
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    });
    this.headers = { 'content-type': 'application/json' };
    if (token !== undefined) this.headers.authorization = `Bearer ${token}`;
  }

  /** POSTs `body` as JSON. Rejects only on network errors and aborts; any status resolves. */
  async post(path: string, body: unknown, signal?: AbortSignal): Promise<NodeAnswer> {
    const response = await this.pool.request({
      path: this.basePath + path,
      method: 'POST',
      headers: this.headers,
      body: JSON.stringify(body),
      signal: signal ?? null,
    });
    const text = await response.body.text();
    let parsed: unknown = null;
    if (text.length > 0) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = null;
      }
    }
    return { status: response.statusCode, body: parsed, retryAfterMs: retryAfterMs(response.headers['retry-after']) };
  }

  /** Closes the connections once the requests in flight are answered. */
  async close(): Promise<void> {
    await this.pool.close();
  }
}
