import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * The flow-control metrics of `/metrics`, read by a Prometheus text parser, on each backend:
 * `wheelhouse_limit_running` and `wheelhouse_limit_waiting` summed over the live limit actors
 * by family (`customer:*`) or exact key, their label values capped as task types are, and
 * `wheelhouse_limit_throttled_total` counting the claims a key's rate refused.
 */
// metricsTaskTypesMax for this node: limit labels are capped by it too. The two tests before
// the cap test take four label values between them, in an order a scrape's timing decides (a
// scrape registers every live key's label): with room for all four, none of theirs is ever
// counted as `other` (with 3, the rate test's key sometimes was, and it waited in vain).
const CAP = 4;

interface Polled {
  tasks: { task_id: string }[];
}

describe.each(BACKENDS)('limit metrics on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode(backend, { metricsTaskTypesMax: CAP });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  /** Every sample of `name`, as `limit` label → value. */
  const scrape = async (name: string): Promise<Map<string, number>> => {
    const r = await api<string>(c.url, 'GET', '/metrics');
    expect(r.status).toBe(200);
    const found = parsePrometheusTextFormat(r.body).find((f) => f.name === name);
    const out = new Map<string, number>();
    for (const s of found?.metrics ?? []) out.set(s.labels?.limit ?? '', Number((s as { value: string }).value));
    return out;
  };
  const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
  const declare = async (name: string, body: Record<string, unknown>) =>
    expect((await api(c.url, 'PUT', `/api/limits/${name}`, body)).status).toBe(200);
  const submitAll = async (tasks: Record<string, unknown>[]) =>
    expect((await api(c.url, 'POST', '/api/tasks/batch', { tasks })).status).toBe(201);
  const poll = async (type: string, waitMs: number) =>
    (
      await api<Polled>(c.url, 'POST', '/api/workers/poll', {
        worker_id: 'w-limit-metrics',
        task_types: [type],
        max_tasks: 10,
        wait_ms: waitMs,
      })
    ).body.tasks;

  it('sums running and waiting tasks by family and by exact key', async () => {
    const type = uniqueType('lm.fam');
    const family = `${type}:*`;
    const exact = `${type}-exact`;
    await declare(family, { concurrency: 1 });
    await declare(exact, { concurrency: 1 });
    await submitAll([
      ...Array.from({ length: 3 }, () => ({ task_type: type, limits: [`${type}:a`] })),
      ...Array.from({ length: 2 }, () => ({ task_type: type, limits: [`${type}:b`] })),
      ...Array.from({ length: 2 }, () => ({ task_type: type, limits: [exact] })),
    ]);
    // One slot per key: a, b and the exact key each run one task, never completed.
    const claimed: string[] = [];
    await eventually(
      async () => {
        claimed.push(...(await poll(type, 500)).map((t) => t.task_id));
        return claimed.length >= 3 ? true : undefined;
      },
      15_000,
      'one task of each key to be claimed',
    );
    expect(claimed).toHaveLength(3);
    await eventually(
      async () => {
        const [running, waiting] = [await scrape('wheelhouse_limit_running'), await scrape('wheelhouse_limit_waiting')];
        const ok =
          running.get(family) === 2 &&
          waiting.get(family) === 3 &&
          running.get(exact) === 1 &&
          waiting.get(exact) === 1;
        return ok ? true : undefined;
      },
      10_000,
      'running 2 / waiting 3 under the family, 1 / 1 under the exact key',
    );
    const running = await scrape('wheelhouse_limit_running');
    // No series per key of the family.
    expect(running.has(`${type}:a`)).toBe(false);
    expect(running.has(`${type}:b`)).toBe(false);
  });

  // Before the cap test: its keys take the third and fourth label values, in either order.
  it('counts the claims a rate refused', async () => {
    const type = uniqueType('lm.rate');
    const loose = `${type}-a`; // the home key: it admits both tasks at once
    const strict = `${type}-b`; // one start an hour: it refuses the second claim
    await declare(loose, { rate: { limit: 1000, period_seconds: 1, burst: 10 } });
    await declare(strict, { rate: { limit: 1, period_seconds: 3600 } });
    await submitAll([
      { task_type: type, limits: [loose, strict] },
      { task_type: type, limits: [loose, strict] },
    ]);
    let claimed = 0;
    const throttled = await eventually(
      async () => {
        claimed += (await poll(type, 200)).length;
        const n = (await scrape('wheelhouse_limit_throttled_total')).get(strict) ?? 0;
        return n > 0 ? n : undefined;
      },
      15_000,
      'a claim to be refused for the rate',
    );
    expect(throttled).toBeGreaterThanOrEqual(1);
    expect(claimed).toBe(1);
  });

  it(`caps the limit label values at metricsTaskTypesMax (${CAP}), counting the rest as other`, async () => {
    const before = sum(await scrape('wheelhouse_limit_waiting'));
    const type = uniqueType('lm.cap');
    const keys = Array.from({ length: 6 }, (_, i) => `${type}-k${i}`);
    for (const key of keys) await declare(key, { concurrency: 0 }); // paused: each task waits
    await submitAll(keys.map((key) => ({ task_type: type, limits: [key] })));
    const waiting = await eventually(
      async () => {
        const m = await scrape('wheelhouse_limit_waiting');
        return sum(m) === before + keys.length ? m : undefined;
      },
      10_000,
      'the six paused keys to count their waiting task',
    );
    expect(waiting.size).toBeLessThanOrEqual(CAP + 1);
    expect(waiting.get('other')).toBeGreaterThanOrEqual(keys.length - CAP);
  });
});
