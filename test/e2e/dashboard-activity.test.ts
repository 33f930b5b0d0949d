/**
 * The dashboard's Activity page in a real Chromium (Debian's `chromium`, driven by
 * playwright-core) against a node with auth on, signed in with a `read` + `ops` key: tasks of a
 * type are submitted and worked over HTTP (some succeed, some fail for good), and the page,
 * filtered to that type, shows exactly those totals and its three charts (throughput, start
 * lag, failure rate) with data, read from the history the node keeps (`GET /admin/stats`), not
 * from samples of its own; no page logged an error. With WHEELHOUSE_SCREENSHOTS=1 the work runs
 * over three minutes (so the charts have a course) and the page is saved to
 * docs/dashboard/activity.png (and, in a dark system setting, activity-dark.png).
 */
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type ProcessCluster } from '../support/cluster.js';
import { sleep } from '../support/waits.js';

const CHROMIUM = process.env.WHEELHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = process.env.WHEELHOUSE_SCREENSHOTS === '1' ? resolve(import.meta.dirname, '../../docs/dashboard') : null;
const ADMIN = randomBytes(24).toString('hex');
const TYPE = `da${randomBytes(3).toString('hex')}.report`;

let cluster: ProcessCluster;
let browser: Browser;
let page: Page;
let base: string;
const consoleErrors: string[] = [];

async function ok<T>(method: string, path: string, body?: unknown): Promise<T> {
  const r = await cluster.api<T>('n1', method, path, body, 10_000);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

interface Polled {
  tasks: { task_id: string; lease_token: string }[];
}

/**
 * Submits `n` tasks of TYPE and works them as a worker over HTTP: the first `fail` of them fail
 * for good (no retries), the others succeed.
 */
async function work(n: number, fail: number): Promise<void> {
  await ok('POST', '/api/tasks/batch', {
    tasks: Array.from({ length: n }, () => ({ task_type: TYPE, max_retries: 0 })),
  });
  const leases: Polled['tasks'] = [];
  while (leases.length < n) {
    const polled = await ok<Polled>('POST', '/api/workers/poll', {
      worker_id: 'w-activity',
      task_types: [TYPE],
      max_tasks: n - leases.length,
      wait_ms: 2000,
    });
    leases.push(...polled.tasks);
  }
  await ok('POST', '/api/workers/complete', {
    results: leases.map((l, i) => ({
      task_id: l.task_id,
      lease_token: l.lease_token,
      ...(i < fail ? { status: 'failed', error: 'report source unreachable' } : { status: 'succeeded' }),
    })),
  });
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (apt-get install -y chromium; .ci/run does)`);
  const dir = mkdtempSync(join(tmpdir(), 'wh-dash-activity-'));
  const tokenFile = join(dir, 'admin-token');
  writeFileSync(tokenFile, ADMIN, { mode: 0o600 });
  [cluster, browser] = await Promise.all([
    startCluster({
      nodes: 1,
      label: 'dashactivity',
      extraArgs: ['--admin-token-file', tokenFile, '--stats-flush-seconds', '0.2'],
      adminToken: ADMIN,
    }),
    chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] }),
  ]);
  base = cluster.node('n1').url;
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('console', (msg) => {
    if (msg.type() === 'error') consoleErrors.push(`${msg.text()} (${msg.location().url})`);
  });
  page.on('pageerror', (error) => consoleErrors.push(`uncaught: ${error.message}`));
});

afterAll(async () => {
  await browser?.close();
  await cluster?.close();
});

describe('the Activity page', () => {
  let submitted = 0;
  let failed = 0;

  it('shows the totals of a task type from the kept history, and three charts with data', async () => {
    if (SHOTS === null) {
      await work(12, 3);
      submitted = 12;
      failed = 3;
    } else {
      // Three minutes of a varying load: the charts of the picture have a course to show.
      const started = Date.now();
      for (let round = 0; Date.now() - started < 180_000; round++) {
        const n = 10 + ((round * 7) % 23);
        const f = round % 4 === 3 ? Math.ceil(n / 3) : round % 3;
        await work(n, f);
        submitted += n;
        failed += f;
        // Real time is the subject here: the picture needs activity spread over minutes.
        await sleep(4000 + ((round * 1300) % 5000));
      }
    }

    const token = await ok<{ token: string }>('POST', '/admin/tokens', {
      name: 'dashboard-activity',
      scopes: ['read', 'ops'],
    });
    await page.goto(`${base}/admin`);
    await page.fill('#key', token.token);
    await page.click('form.login button[type=submit]');
    await page.locator('#nav a[data-section=activity]').click();
    await page.locator('h1', { hasText: 'Activity' }).waitFor();
    // The type is offered because it had activity; choosing it filters the page.
    await page.locator(`#activity-task-type option[value="${TYPE}"]`).waitFor({ state: 'attached' });
    await page.selectOption('#activity-task-type', TYPE);
    await page.waitForURL((url) => url.hash.includes(`task_type=${encodeURIComponent(TYPE)}`));

    const total = (key: string) => page.locator(`#activity-totals [data-total="${key}"] .value`);
    await total('submitted')
      .filter({ hasText: new RegExp(`^${submitted.toLocaleString('en')}$`) })
      .waitFor();
    expect(await total('started').innerText()).toBe(submitted.toLocaleString('en'));
    expect(await total('succeeded').innerText()).toBe((submitted - failed).toLocaleString('en'));
    expect(await total('failed').innerText()).toBe(failed.toLocaleString('en'));
    expect(await total('failure_rate').innerText()).toMatch(/%$/);
    expect(await total('start_lag_p99_ms').innerText()).not.toBe('—');

    for (const name of ['throughput', 'start-lag', 'failure-rate']) {
      const chart = page.locator(`figure[data-chart="${name}"] svg.chart`);
      await chart.waitFor();
      expect(Number(await chart.getAttribute('data-points'))).toBeGreaterThan(0);
      // Each chart draws its data: a line, or a dot for a lone minute.
      expect(await chart.locator('g.line polyline, g.line circle').count()).toBeGreaterThan(0);
    }
    const throughput = page.locator('figure[data-chart="throughput"] g.line[data-series="succeeded"]');
    expect(await throughput.locator('polyline, circle').count()).toBeGreaterThan(0);

    if (SHOTS !== null) {
      // The last 15 minutes: the three minutes of work fill a fifth of each chart.
      mkdirSync(SHOTS, { recursive: true });
      await page.selectOption('#activity-range', '15m');
      await page.waitForURL((url) => url.hash.includes('range=15m'));
      await total('submitted')
        .filter({ hasText: new RegExp(`^${submitted.toLocaleString('en')}$`) })
        .waitFor();
      await page.waitForTimeout(1600);
      await page.screenshot({ path: join(SHOTS, 'activity.png'), fullPage: false });
      await page.emulateMedia({ colorScheme: 'dark' });
      await page.waitForTimeout(300);
      await page.screenshot({ path: join(SHOTS, 'activity-dark.png'), fullPage: false });
      await page.emulateMedia({ colorScheme: 'light' });
    }
  });

  it('keeps the choice in the URL: the range selector reloads the page with it', async () => {
    await page.selectOption('#activity-range', '6h');
    await page.waitForURL((url) => url.hash.includes('range=6h'));
    await page.locator(`#activity-totals [data-total="submitted"] .value`).filter({ hasText: /\d/ }).waitFor();
    expect(await page.inputValue('#activity-task-type')).toBe(TYPE);
    expect(consoleErrors).toEqual([]);
  });
});
