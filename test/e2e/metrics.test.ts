import { readFileSync } from 'node:fs';
import parsePrometheusTextFormat, { type MetricFamily, type Sample } from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually, sleep } from '../support/waits.js';

/**
 * `GET /metrics` read by a real Prometheus text parser, on each backend: the exposition is
 * valid and named by the conventions, the task histograms count what the node did, the HTTP
 * durations are labelled by route pattern, and 10 000 task types make at most
 * `metricsTaskTypesMax + 1` label values.
 */
interface Polled {
  tasks: { task_id: string; lease_token: string }[];
}

const CAP = 100; // the default of metricsTaskTypesMax

/** An exposition as the parser reads it: its families, and every sample line by its name. */
interface Exposition {
  families: MetricFamily[];
  samples: Map<string, Sample[]>;
}

/**
 * Parses the text (the parser throws on a line that is not valid exposition). The parser
 * folds the series of a labelled histogram into one, so the samples are also read with the
 * histograms' TYPE lines left out: each `_bucket`, `_sum` and `_count` line is then a sample
 * of its own name, with its labels.
 */
function exposition(text: string): Exposition {
  const families = parsePrometheusTextFormat(text);
  const histograms = new Set(families.filter((f) => f.type === 'HISTOGRAM').map((f) => `# TYPE ${f.name} histogram`));
  const flat = text
    .split('\n')
    .filter((line) => !histograms.has(line))
    .join('\n');
  const samples = new Map<string, Sample[]>();
  for (const f of parsePrometheusTextFormat(flat)) samples.set(f.name, [...(samples.get(f.name) ?? []), ...f.metrics]);
  return { families, samples };
}

function family(m: Exposition, name: string): MetricFamily {
  const found = m.families.find((f) => f.name === name);
  if (found === undefined) throw new Error(`no metric ${name}`);
  return found;
}

/** The series of sample `name` (a histogram's: `<name>_count`, …) whose labels include `labels`. */
function series(m: Exposition, name: string, labels: Record<string, string> = {}): Sample[] {
  const all = m.samples.get(name);
  if (all === undefined) throw new Error(`no sample ${name}`);
  return all.filter((s) => Object.entries(labels).every(([k, v]) => s.labels?.[k] === v));
}

/** The sum of those series' values. */
function total(m: Exposition, name: string, labels: Record<string, string> = {}): number {
  return series(m, name, labels).reduce((sum, s) => sum + Number(s.value), 0);
}

describe.each(BACKENDS)('metrics on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode(backend);
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const scrape = async (): Promise<Exposition> => {
    const r = await api<string>(c.url, 'GET', '/metrics');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return exposition(r.body);
  };

  /** Claims `n` tasks of `type` over HTTP, however many polls it takes. */
  const claim = async (type: string, n: number): Promise<Polled['tasks']> => {
    const got: Polled['tasks'] = [];
    while (got.length < n) {
      const r = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
        worker_id: 'w-metrics',
        task_types: [type],
        max_tasks: n - got.length,
        wait_ms: 5000,
      });
      expect(r.status).toBe(200);
      expect(r.body.tasks.length).toBeGreaterThan(0);
      got.push(...r.body.tasks);
    }
    return got;
  };

  it('counts every start in the lag histogram, and every end in the run-time histogram by outcome', async () => {
    const type = uniqueType('metrics.lag');
    const n = 12;
    const submitted = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: n }, (_, i) => ({ task_type: type, payload: { i } })),
    });
    expect(submitted.status).toBe(201);
    // Due at submission, claimed no sooner than this later: each start lags by at least as much.
    const waitMs = 300;
    await sleep(waitMs);
    const tasks = await claim(type, n);
    const results = tasks.map((t, i) => ({
      task_id: t.task_id,
      lease_token: t.lease_token,
      status: i === 0 ? 'failed' : 'succeeded',
      ...(i === 0 ? { error: 'boom', retryable: false } : {}),
    }));
    const done = await api<{ results: { ok: boolean }[] }>(c.url, 'POST', '/api/workers/complete', { results });
    expect(done.body.results.every((r) => r.ok)).toBe(true);

    const m = await scrape();
    expect(family(m, 'wheelhouse_task_start_lag_seconds').type).toBe('HISTOGRAM');
    const mine = { task_type: type };
    expect(total(m, 'wheelhouse_task_start_lag_seconds_count', mine)).toBe(n);
    expect(total(m, 'wheelhouse_task_start_lag_seconds_sum', mine)).toBeGreaterThanOrEqual((n * (waitMs - 10)) / 1000);
    expect(total(m, 'wheelhouse_tasks_started_total', mine)).toBe(n);
    expect(total(m, 'wheelhouse_tasks_submitted_total', mine)).toBe(n);
    const ran = (outcome: string) => total(m, 'wheelhouse_task_run_seconds_count', { task_type: type, outcome });
    expect(ran('succeeded')).toBe(n - 1);
    expect(ran('failed')).toBe(1);
    expect(total(m, 'wheelhouse_tasks_finished_total', { task_type: type, outcome: 'succeeded' })).toBe(n - 1);
    expect(total(m, 'wheelhouse_tasks_finished_total', { task_type: type, outcome: 'failed' })).toBe(1);
    // The node started nothing else: all its starts are these.
    expect(total(m, 'wheelhouse_task_start_lag_seconds_count')).toBe(n);
    expect(total(m, 'wheelhouse_tasks_started_total')).toBe(n);
  });

  it('reports the ready queues by task type and priority', async () => {
    const type = uniqueType('metrics.ready');
    await api(c.url, 'POST', '/api/tasks/batch', {
      tasks: [
        { task_type: type, priority: 2 },
        { task_type: type, priority: 2 },
        { task_type: type, priority: 7 },
      ],
    });
    const m = await eventually(
      async () => {
        const scraped = await scrape();
        return total(scraped, 'wheelhouse_ready_depth', { task_type: type }) === 3 ? scraped : undefined;
      },
      10_000,
      'the three tasks in the ready depth',
      50,
    );
    expect(total(m, 'wheelhouse_ready_depth', { task_type: type, priority: '2' })).toBe(2);
    expect(total(m, 'wheelhouse_ready_depth', { task_type: type, priority: '7' })).toBe(1);
    const age = series(m, 'wheelhouse_ready_oldest_age_seconds', { task_type: type, priority: '2' });
    expect(age).toHaveLength(1);
    expect(Number(age[0]!.value)).toBeGreaterThanOrEqual(0);
  });

  it('labels HTTP durations with the route pattern, never the URL', async () => {
    const created = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
      task_type: uniqueType('metrics.http'),
    });
    await api(c.url, 'GET', `/api/tasks/${created.body.task_id}`);
    await api(c.url, 'GET', '/no/such/route/123');
    const m = await scrape();
    expect(family(m, 'wheelhouse_http_request_duration_seconds').type).toBe('HISTOGRAM');
    const http = series(m, 'wheelhouse_http_request_duration_seconds_count');
    const routes = new Set(http.map((s) => s.labels?.route));
    expect(routes).toContain('/api/tasks/:task_id');
    expect(routes).toContain('/api/tasks');
    expect(routes).toContain('unmatched');
    const one = { method: 'GET', route: '/api/tasks/:task_id', status_code: '200' };
    expect(total(m, 'wheelhouse_http_request_duration_seconds_count', one)).toBeGreaterThanOrEqual(1);
    for (const s of http) expect(JSON.stringify(s.labels)).not.toContain(created.body.task_id);
  });

  it('serves a valid exposition named by the conventions, with the process metrics', async () => {
    const m = await scrape();
    const names = m.families.map((f) => f.name);
    expect(new Set(names).size).toBe(names.length);
    for (const f of m.families) {
      expect(f.name, f.name).toMatch(/^wheelhouse_[a-z0-9_]+$/);
      expect(f.help.length, `${f.name} has help`).toBeGreaterThan(0);
      if (f.type === 'COUNTER') expect(f.name).toMatch(/_total$/);
      // prom-client's own gauges of active handles, requests and resources are named `…_total`.
      else if (!/^wheelhouse_nodejs_active_[a-z]+_total$/.test(f.name)) expect(f.name).not.toMatch(/_total$/);
      if (f.type === 'HISTOGRAM') {
        expect(f.name).toMatch(/_(seconds|bytes)$/);
        // Each series: cumulative buckets, the last (+Inf) equal to its count.
        for (const count of series(m, `${f.name}_count`)) {
          const { le: _, ...labels } = count.labels ?? {};
          const buckets = series(m, `${f.name}_bucket`, labels).filter(
            (b) => Object.keys(b.labels ?? {}).length === Object.keys(labels).length + 1,
          );
          const values = buckets.map((b) => Number(b.value));
          expect(values).toEqual([...values].sort((a, b) => a - b));
          expect(buckets.at(-1)?.labels?.le).toBe('+Inf');
          expect(buckets.at(-1)?.value).toBe(count.value);
        }
      }
    }
    for (const name of [
      'wheelhouse_tasks_submitted_total',
      'wheelhouse_tasks_started_total',
      'wheelhouse_tasks_finished_total',
      'wheelhouse_actors_live',
      'wheelhouse_ready_backlog',
      'wheelhouse_transport_requests_total',
      'wheelhouse_process_resident_memory_bytes',
      'wheelhouse_nodejs_heap_size_used_bytes',
      'wheelhouse_nodejs_eventloop_lag_seconds',
    ])
      expect(names).toContain(name);
    expect(family(m, 'wheelhouse_transport_requests_total').type).toBe('COUNTER');
    expect(total(m, 'wheelhouse_actors_live', { kind: 'wheel' })).toBe(8);
  });

  it('serves every metric the Grafana dashboard (docs/grafana/wheelhouse.json) reads', async () => {
    const dashboard = readFileSync(new URL('../../docs/grafana/wheelhouse.json', import.meta.url), 'utf8');
    const read = new Set(dashboard.match(/wheelhouse_[a-z0-9_]+/g));
    expect(read.size).toBeGreaterThan(5);
    const m = await scrape();
    const families = new Set(m.families.map((f) => f.name));
    for (const name of read) expect(families.has(name.replace(/_bucket$/, '')), name).toBe(true);
  });

  it('keeps the task_type label to metricsTaskTypesMax values and counts the rest as other', async () => {
    const before = total(await scrape(), 'wheelhouse_tasks_submitted_total');
    const types = 10_000;
    const prefix = uniqueType('metrics.many');
    for (let from = 0; from < types; from += 1000) {
      const r = await api(c.url, 'POST', '/api/tasks/batch', {
        tasks: Array.from({ length: 1000 }, (_, i) => ({ task_type: `${prefix}.${from + i}` })),
      });
      expect(r.status).toBe(201);
    }
    const m = await scrape();
    const values = new Set<string>();
    for (const samples of m.samples.values())
      for (const s of samples) if (s.labels?.task_type !== undefined) values.add(s.labels.task_type);
    expect(values.size).toBeLessThanOrEqual(CAP + 1);
    expect(values).toContain('other');
    // Nothing is lost past the cap: it is counted as other.
    expect(total(m, 'wheelhouse_tasks_submitted_total') - before).toBe(types);
  });
});
