/**
 * The dashboard at /admin in a real Chromium (Debian's `chromium`, driven by playwright-core)
 * against a 3-node cluster with auth on: sign in with a dashboard key (`read`, `ops`, `submit`:
 * what docs/security.md advises), see the nodes and their
 * partitions, find a task and watch it succeed live, cancel a delayed task, pause a cron
 * schedule, draw a graph — one browser and one page throughout, and no console error anywhere.
 * With WHEELHOUSE_SCREENSHOTS=1 it also saves each page to docs/dashboard/*.png.
 */
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type ProcessCluster } from '../support/cluster.js';

const CHROMIUM = process.env.WHEELHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = process.env.WHEELHOUSE_SCREENSHOTS === '1' ? resolve(import.meta.dirname, '../../docs/dashboard') : null;
const ADMIN = randomBytes(24).toString('hex');

let cluster: ProcessCluster;
let browser: Browser;
let page: Page;
let base: string;
const consoleErrors: string[] = [];

async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const r = await cluster.api<T>('n1', method, path, body, 10_000);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function submit(task: Record<string, unknown>): Promise<string> {
  return (await api<{ task_id: string }>('POST', '/api/tasks', task)).task_id;
}

async function shot(name: string): Promise<void> {
  if (SHOTS === null) return;
  // Let the live data settle (a sparkline's second sample, a redraw) before the picture.
  await page.waitForTimeout(1600);
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

/** Waits for the task page's status badge to read `status`. */
async function taskStatusIs(status: string): Promise<void> {
  await page.locator('h1 .badge', { hasText: new RegExp(`^${status}$`) }).waitFor({ timeout: 15_000 });
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (apt-get install -y chromium; .ci/run does)`);
  if (SHOTS !== null) mkdirSync(SHOTS, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), 'wh-dash-'));
  const tokenFile = join(dir, 'admin-token');
  writeFileSync(tokenFile, ADMIN, { mode: 0o600 });
  [cluster, browser] = await Promise.all([
    startCluster({ label: 'dashboard', extraArgs: ['--admin-token-file', tokenFile], adminToken: ADMIN }),
    chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] }),
  ]);
  base = cluster.node('n1').url;
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('console', (msg) => {
    if (msg.type() === 'error') {
      consoleErrors.push(`${msg.text()} (${msg.location().url})`);
    }
  });
  page.on('pageerror', (error) => consoleErrors.push(`uncaught: ${error.message}`));
});

afterAll(async () => {
  await browser?.close();
  await cluster?.close();
});

describe('the dashboard', () => {
  it('is served without a key, and its data only with one', async () => {
    const res = await fetch(`${base}/admin`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await res.text()).toContain('/admin/assets/app.js');
    expect((await fetch(`${base}/admin/cluster`)).status).toBe(401);
  });

  it('signs in with a dashboard key (read, ops, submit) and shows the 3 live nodes and their partitions', async () => {
    // The key docs/security.md advises: every page below, and its buttons, with nothing of
    // key management. A page that met a 403 would log an error, which the last test forbids.
    const key = await api<{ token: string }>('POST', '/admin/tokens', {
      name: 'dashboard',
      scopes: ['read', 'ops', 'submit'],
    });
    await page.goto(`${base}/admin`);
    if (SHOTS !== null) await page.screenshot({ path: join(SHOTS, 'login.png') });
    await page.fill('#key', key.token);
    await page.click('form.login button[type=submit]');
    await page.locator('table tbody tr').nth(2).waitFor();
    const rows = await page.locator('table tbody tr').allInnerTexts();
    expect(rows).toHaveLength(3);
    for (const id of ['n1', 'n2', 'n3']) expect(rows.some((r) => r.includes(id) && r.includes('live'))).toBe(true);
    expect(await page.locator('.partition').count()).toBe(cluster.partitions);
    const owners = await page.locator('.partition .powner').allInnerTexts();
    expect(new Set(owners)).toEqual(new Set(['n1', 'n2', 'n3']));
    await shot('cluster');
  });

  it('finds a submitted task and shows it succeed while the page is open', async () => {
    const id = await submit({ task_type: 'dash.work', payload: { report: 7 } });
    await page.goto(`${base}/admin#/tasks?task_type=dash.work`);
    await page.locator(`a[href="#/tasks/${id}"]`).click();
    await page.locator('h1 code', { hasText: id }).waitFor();
    expect(await page.locator('h1 .badge').innerText()).toMatch(/^(pending|ready)$/);
    // Where it is, in a sentence: the explain route's.
    await page.locator('#explain', { hasText: /^(ready|scheduled) · (Ready|Due)/ }).waitFor();

    // A worker takes it and reports while the page keeps polling.
    const polled = await api<{ tasks: { task_id: string; lease_token: string }[] }>('POST', '/api/workers/poll', {
      worker_id: 'dash-worker',
      task_types: ['dash.work'],
      max_tasks: 1,
      wait_ms: 10_000,
    });
    expect(polled.tasks.map((t) => t.task_id)).toEqual([id]);
    await taskStatusIs('running');
    await api('POST', `/api/tasks/${id}/complete`, {
      lease_token: polled.tasks[0]!.lease_token,
      status: 'succeeded',
      result: { pages: 12 },
    });
    await taskStatusIs('succeeded');
    await page.locator('#explain', { hasText: /^succeeded · Succeeded at/ }).waitFor();
    await page.locator('pre.json', { hasText: '"pages": 12' }).waitFor();
    await page.locator('table tbody tr', { hasText: 'dash-worker' }).waitFor();
    await shot('task');
  });

  it('cancels a delayed task from its page, then retries it', async () => {
    const id = await submit({ task_type: 'dash.later', schedule: { type: 'delayed', delay_seconds: 3600 } });
    await page.goto(`${base}/admin#/tasks/${id}`);
    await taskStatusIs('pending');
    const cancel = page.locator('.actions button', { hasText: 'Cancel' });
    await cancel.click();
    await cancel.click(); // the second click confirms
    await taskStatusIs('cancelled');
    expect((await api<{ status: string }>('GET', `/api/tasks/${id}`)).status).toBe('cancelled');
    // Cancelled tasks can run again: retry makes it due now.
    const retry = page.locator('.actions button', { hasText: 'Retry' });
    await retry.click();
    await retry.click();
    await taskStatusIs('ready');
    expect((await api<{ status: string }>('GET', `/api/tasks/${id}`)).status).toBe('ready');
  });

  it('lists the queues', async () => {
    for (const [type, priority, n] of [
      ['email.send', 2, 14],
      ['report.render', 5, 6],
    ] as const) {
      await api('POST', '/api/tasks/batch', {
        tasks: Array.from({ length: n }, () => ({ task_type: type, priority })),
      });
    }
    await page.goto(`${base}/admin#/queues`);
    await page.locator('table tbody tr', { hasText: 'email.send' }).waitFor();
    const row = page.locator('table tbody tr', { hasText: 'email.send' });
    expect(await row.innerText()).toMatch(/\t14\t/);
    // A worker takes 5 of them: the row follows without a reload.
    await api('POST', '/api/workers/poll', { worker_id: 'dash-worker', task_types: ['email.send'], max_tasks: 5 });
    await row.locator('td:nth-child(3)', { hasText: /^9$/ }).waitFor();
    await shot('queues');
  });

  it('pauses a cron schedule', async () => {
    const id = await submit({ task_type: 'dash.nightly', schedule: { type: 'cron', cron_expression: '0 3 * * *' } });
    await submit({ task_type: 'dash.hourly', schedule: { type: 'cron', cron_expression: '15 * * * *' } });
    await page.goto(`${base}/admin#/schedules`);
    const row = page.locator('table tbody tr', { has: page.locator(`a[href="#/tasks/${id}"]`) });
    await row.locator('button[data-action=pause]').click();
    await row.locator('.badge', { hasText: /^paused$/ }).waitFor();
    expect((await api<{ status: string }>('GET', `/api/tasks/${id}`)).status).toBe('paused');
    await shot('schedules');
  });

  it('draws a graph with one element per task, coloured by status', async () => {
    const dag = await api<{ dag_id: string; tasks: { ref: string; task_id: string }[] }>('POST', '/api/dags', {
      tasks: [
        { ref: 'extract', task_type: 'dash.etl' },
        { ref: 'clean', task_type: 'dash.etl', depends_on: ['extract'] },
        { ref: 'enrich', task_type: 'dash.etl', depends_on: ['extract'] },
        { ref: 'load', task_type: 'dash.etl', depends_on: ['clean', 'enrich'] },
      ],
    });
    await page.goto(`${base}/admin#/dags/${dag.dag_id}`);
    await page.locator('svg.dag').waitFor();
    expect(await page.locator('svg.dag .dag-node').count()).toBe(4);
    const extract = page.locator('svg.dag .dag-node[data-ref=extract]');
    expect(await extract.getAttribute('data-status')).toMatch(/^(pending|ready)$/);
    expect(await page.locator('svg.dag .dag-node[data-ref=load]').getAttribute('data-status')).toBe('blocked');
    expect(await page.locator('svg.dag path.edge').count()).toBe(4);

    // The first task succeeds: its node turns green without a reload.
    const polled = await api<{ tasks: { task_id: string; lease_token: string }[] }>('POST', '/api/workers/poll', {
      worker_id: 'dash-worker',
      task_types: ['dash.etl'],
      max_tasks: 1,
      wait_ms: 10_000,
    });
    await api('POST', `/api/tasks/${polled.tasks[0]!.task_id}/complete`, {
      lease_token: polled.tasks[0]!.lease_token,
      status: 'succeeded',
    });
    await page.locator('svg.dag .dag-node[data-ref=extract][data-status=succeeded]').waitFor({ timeout: 15_000 });
    await shot('dag');
  });

  it('makes no call for a task or graph page whose id in the link is not a UUID', async () => {
    const calls: string[] = [];
    const onRequest = (request: { url(): string }): void => {
      const path = new URL(request.url()).pathname;
      if (path.startsWith('/api/') || (path.startsWith('/admin/') && !path.startsWith('/admin/assets/')))
        calls.push(path);
    };
    page.on('request', onRequest);
    try {
      // A link someone sent: with the viewer's key, the page would GET /admin/cluster.
      await page.goto(`${base}/admin#/tasks/..%2F..%2Fadmin%2Fcluster`);
      await page.locator('.problem', { hasText: 'is not a task id (a UUID)' }).waitFor();
      await page.goto(`${base}/admin#/dags/..%2F..%2Fadmin%2Ftokens`);
      await page.locator('.problem', { hasText: 'is not a graph id (a UUID)' }).waitFor();
    } finally {
      page.off('request', onRequest);
    }
    expect(calls).toEqual([]);
  });

  it('browses the actors, and no page logged an error', async () => {
    await page.goto(`${base}/admin#/actors`);
    await page.locator('table tbody tr').first().waitFor();
    await page.locator('table tbody tr a').first().click();
    await page.locator('h2', { hasText: 'State' }).waitFor();
    await page.goto(`${base}/admin#/actors`);
    await page.locator('table tbody tr').first().waitFor();
    await shot('actors');
    await page.goto(`${base}/admin#/tasks`);
    await page.locator('table tbody tr').first().waitFor();
    await shot('tasks');
    expect(consoleErrors).toEqual([]);
  });
});
