import { Pool, request } from 'undici';
import { authHeaders } from './auth.js';

/** Flow control for the benchmarks: declaring limits, and W6's quiet keys. */

const JSON_HEADERS = { 'content-type': 'application/json', ...authHeaders() };

/** `PUT /api/limits/{name}`; throws unless it answers 200. */
export async function declareLimit(url: string, name: string, body: Record<string, unknown>): Promise<void> {
  const res = await request(`${url}/api/limits/${encodeURIComponent(name)}`, {
    method: 'PUT',
    headers: JSON_HEADERS,
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`PUT /api/limits/${name} answered ${res.statusCode}: ${text}`);
}

export interface QuietKeysOptions {
  /** The keys, each submitting one task a second; their first submits spread over a second. */
  keys: readonly string[];
  /**
   * Submits one task of `key` whose start lag is measured from `sentMs` (Date.now() just
   * before the request); resolves once it is accepted, rejects (with the reason) otherwise.
   */
  send(key: string, sentMs: number): Promise<void>;
  /** Called once by stop(), after the last answer. */
  close?(): Promise<void>;
}

/**
 * Keys that each submit one immediate task a second until stopped; key i's submits fall at
 * start + i × 1 000 / keys ms + n × 1 000 ms, so the system sees an even stream. How a task is
 * sent is the caller's: `QuietKeys.overHttp` posts to a node, the peer bench adds BullMQ jobs.
 */
export class QuietKeys {
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private sent = 0;
  private failed = 0;
  private lastError = '';
  /** Each request's answer time − send time, ms. */
  readonly answerMs: number[] = [];

  constructor(private readonly options: QuietKeysOptions) {}

  /**
   * `POST /api/tasks`, one task a request, each carrying `due_ms` = its send time, so the
   * worker's start lag of it is handler start − submit. `named`: the key is the task's limit.
   */
  static overHttp(options: { url: string; taskType: string; keys: readonly string[]; named: boolean }): QuietKeys {
    const pool = new Pool(options.url, { connections: 64, pipelining: 1 });
    return new QuietKeys({
      keys: options.keys,
      send: async (key, sentMs) => {
        const body = JSON.stringify({
          task_type: options.taskType,
          ...(options.named ? { limits: [key] } : {}),
          payload: { due_ms: sentMs, key },
        });
        const res = await pool.request({ path: '/api/tasks', method: 'POST', headers: JSON_HEADERS, body });
        const text = await res.body.text();
        if (res.statusCode !== 201 && res.statusCode !== 200)
          throw new Error(`${res.statusCode} ${text.slice(0, 200)}`);
      },
      close: () => pool.close(),
    });
  }

  /** Starts submitting at `startMs` (now if past). */
  start(startMs: number): void {
    const { keys } = this.options;
    const spacingMs = 1000 / keys.length;
    const next = keys.map((_, i) => startMs + i * spacingMs);
    this.timer = setInterval(() => {
      const now = Date.now();
      next.forEach((at, i) => {
        if (at > now) return;
        next[i] = at + 1000;
        this.submit(keys[i] as string);
      });
    }, 2);
  }

  private submit(key: string): void {
    const sentMs = Date.now();
    this.sent++;
    const p = this.options
      .send(key, sentMs)
      .then(() => {
        this.answerMs.push(Date.now() - sentMs);
      })
      .catch((error: unknown) => {
        this.failed++;
        this.lastError = error instanceof Error ? error.message : String(error);
      })
      .finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  /** Stops, waits for the answers of the requests sent; answers how many were accepted. */
  async stop(): Promise<{ accepted: number; failed: number; lastError: string }> {
    clearInterval(this.timer);
    await Promise.all([...this.inFlight]);
    await this.options.close?.();
    return { accepted: this.sent - this.failed, failed: this.failed, lastError: this.lastError };
  }
}
