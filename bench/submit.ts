import { Pool } from 'undici';
import { sleep } from './time.js';

/**
 * Bulk submission as producers do it: `POST /api/tasks/batch`, 1 000 tasks a request, a few
 * requests in parallel. 429 and 503 are waited out per `Retry-After` (and counted); any other
 * failure stops the run.
 */
export interface SubmitOutcome {
  /** Date.now() when the first request was sent / the last answer arrived. */
  firstSubmitMs: number;
  lastAnsweredMs: number;
  /** Requests answered 429 or 503 and sent again. */
  retried: number;
}

export const BATCH_SIZE = 1000;

/** Submits `count` tasks built by `taskAt(i)`, `parallel` batch requests at a time. */
export async function submitTasks(
  url: string,
  count: number,
  taskAt: (i: number) => Record<string, unknown>,
  parallel = 4,
): Promise<SubmitOutcome> {
  const pool = new Pool(url, { connections: parallel, pipelining: 1 });
  let next = 0;
  let retried = 0;
  const firstSubmitMs = Date.now();
  const lane = async (): Promise<void> => {
    while (next < count) {
      const from = next;
      const to = Math.min(count, from + BATCH_SIZE);
      next = to;
      const tasks = [];
      for (let i = from; i < to; i++) tasks.push(taskAt(i));
      const body = JSON.stringify({ tasks });
      for (let attempt = 0; ; attempt++) {
        const res = await pool.request({ path: '/api/tasks/batch', method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const text = await res.body.text();
        if (res.statusCode === 201 || res.statusCode === 200) break;
        if ((res.statusCode === 429 || res.statusCode === 503) && attempt < 50) {
          retried++;
          const after = Number(res.headers['retry-after']);
          await sleep(Number.isFinite(after) ? after * 1000 : 500);
          continue;
        }
        throw new Error(`POST /api/tasks/batch answered ${res.statusCode}: ${text.slice(0, 500)}`);
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: parallel }, lane));
  } finally {
    await pool.close();
  }
  return { firstSubmitMs, lastAnsweredMs: Date.now(), retried };
}
