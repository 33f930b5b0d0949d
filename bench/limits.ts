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
  url: string;
  taskType: string;
  /** The keys, each submitting one task a second; their first submits spread over a second. */
  keys: readonly string[];
  /** Name each key as the task's limit (false: the same tasks, no limits). */
  named: boolean;
}

/**
 * Keys that each submit one immediate task a second (`POST /api/tasks`, one task a request)
 * until stopped; key i's submits fall at start + i × 1 000 / keys ms + n × 1 000 ms, so the
 * node sees an even stream. Each task carries `due_ms` = Date.now() just before its request is
 * sent, so the worker's start lag of it is handler start − submit.
 */
export class QuietKeys {
  private readonly pool: Pool;
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private sent = 0;
  private failed = 0;
  private lastError = '';
  /** Each request's answer time − send time, ms. */
  readonly answerMs: number[] = [];

  constructor(private readonly options: QuietKeysOptions) {
    this.pool = new Pool(options.url, { connections: 64, pipelining: 1 });
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
    const { taskType, named } = this.options;
    const sentMs = Date.now();
    const body = JSON.stringify({
      task_type: taskType,
      ...(named ? { limits: [key] } : {}),
      payload: { due_ms: sentMs, key },
    });
    this.sent++;
    const p = this.pool
      .request({ path: '/api/tasks', method: 'POST', headers: JSON_HEADERS, body })
      .then(async (res) => {
        const text = await res.body.text();
        this.answerMs.push(Date.now() - sentMs);
        if (res.statusCode !== 201 && res.statusCode !== 200) {
          this.failed++;
          this.lastError = `${res.statusCode} ${text.slice(0, 200)}`;
        }
      })
      .catch((error: unknown) => {
        this.failed++;
        this.lastError = String(error);
      })
      .finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  /** Stops, waits for the answers of the requests sent; answers how many were accepted. */
  async stop(): Promise<{ accepted: number; failed: number; lastError: string }> {
    clearInterval(this.timer);
    await Promise.all([...this.inFlight]);
    await this.pool.close();
    return { accepted: this.sent - this.failed, failed: this.failed, lastError: this.lastError };
  }
}
