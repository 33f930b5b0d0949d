/**
 * The dashboard's operations console in a real Chromium (Debian's `chromium`, driven by
 * playwright-core) against a 2-node cluster with auth on, signed in with the dashboard key
 * docs/security.md advises (`read`, `ops`, `submit`: no `admin`):
 * - the tasks list's selection bar cancels every task its filter matches through an operation,
 *   whose progress shows it done (and the API agrees); delete is shown, disabled, for want of admin;
 * - without a status filter, a page lists a running task first and a task due in days last;
 * - the failed view groups the failed tasks by type and error with their counts, and a group's
 *   "Retry all" retries exactly that group;
 * - the workers view, asked of n1, lists an SDK worker connected to n2 with its node and task types;
 * - a graph's edge that skips a column runs around the box between, not through it;
 * - a task that is not there is a problem on the page, not a node that stopped answering;
 * - the pages follow the system's dark scheme.
 * With WHEELHOUSE_SCREENSHOTS=1 it saves docs/dashboard/selection.png, failed.png, workers.png.
 */
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/worker/index.js';
import { startCluster, type ProcessCluster } from '../support/cluster.js';
import { eventually } from '../support/waits.js';

const CHROMIUM = process.env.WHEELHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = process.env.WHEELHOUSE_SCREENSHOTS === '1' ? resolve(import.meta.dirname, '../../docs/dashboard') : null;
const ADMIN = randomBytes(24).toString('hex');
const T = `dc${randomBytes(3).toString('hex')}`; // every task type of this test starts with it

let cluster: ProcessCluster;
let browser: Browser;
let page: Page;
let base: string;
const workers: Worker[] = [];
const consoleErrors: string[] = [];

async function api<R>(method: string, path: string, body?: unknown): Promise<R> {
  const r = await cluster.api<R>('n1', method, path, body, 10_000);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}
const statusOf = async (id: string): Promise<string> =>
  (await api<{ status: string }>('GET', `/api/tasks/${id}`)).status;

async function shot(name: string): Promise<void> {
  if (SHOTS === null) return;
  await page.waitForTimeout(1600); // the live data settles (a second poll) before the picture
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

function worker(node: string, options: { workerId: string; taskTypes: string[]; fail?: boolean }): Worker {
  const w = createWorker({
    url: cluster.node(node).url,
    token: ADMIN,
    workerId: options.workerId,
    taskTypes: options.taskTypes,
    onError: () => undefined,
    handler: async (task) => {
      if (options.fail) throw new Error((task.payload as { err: string }).err);
      return new Promise<never>(() => undefined); // holds its task: its lease shows
    },
  });
  workers.push(w);
  w.start();
  return w;
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (apt-get install -y chromium; .ci/run does)`);
  if (SHOTS !== null) mkdirSync(SHOTS, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), 'wh-dash-console-'));
  const tokenFile = join(dir, 'admin-token');
  writeFileSync(tokenFile, ADMIN, { mode: 0o600 });
  [cluster, browser] = await Promise.all([
    startCluster({ nodes: 2, label: 'dashconsole', extraArgs: ['--admin-token-file', tokenFile], adminToken: ADMIN }),
    chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] }),
  ]);
  base = cluster.node('n1').url;
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('console', (msg) => {
    // A 404 the page asked for on purpose (the missing task) is logged by Chromium as a failed load.
    if (msg.type() === 'error' && !msg.text().includes('404'))
      consoleErrors.push(`${msg.text()} (${msg.location().url})`);
  });
  page.on('pageerror', (error) => consoleErrors.push(`uncaught: ${error.message}`));
  const key = await api<{ token: string }>('POST', '/admin/tokens', {
    name: 'dashboard',
    scopes: ['read', 'ops', 'submit'],
  });
  await page.goto(`${base}/admin`);
  await page.fill('#key', key.token);
  await page.click('form.login button[type=submit]');
  await page.locator('h1', { hasText: 'Cluster' }).waitFor();
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0 })));
  await browser?.close();
  await cluster?.close();
});

describe('the operations console', () => {
  it("cancels every task the list's filter matches from the selection bar, and shows the operation done", async () => {
    const type = `${T}.later`;
    const made = await api<{ tasks: { task_id: string }[] }>('POST', '/api/tasks/batch', {
      tasks: Array.from({ length: 60 }, (_, i) => ({
        task_type: type,
        payload: { i },
        schedule: { type: 'delayed', delay_seconds: 86_400 },
      })),
    });
    const ids = made.tasks.map((t) => t.task_id);
    await page.goto(`${base}/admin#/tasks?status=pending&task_type=${type}`);
    const bar = page.locator('#selection-bar');
    await bar.locator('button[data-action=cancel]').waitFor();
    // Pending tasks can only be cancelled: no retry, no delete.
    expect(await bar.locator('button').count()).toBe(1);
    await bar.locator('button[data-action=cancel]').click();
    const filter = await page.locator('#op-panel .op-filter').innerText();
    expect(filter).toContain(`task type = "${type}"`);
    expect(filter).toContain('status = "pending"');
    await page.click('#op-confirm');
    await page.locator('#op-progress[data-state=done]').waitFor({ timeout: 20_000 });
    const figure = (name: string) => page.locator(`#op-panel [data-figure=${name}] strong`).innerText();
    expect(await figure('matched')).toBe('60');
    expect(await figure('done')).toBe('60');
    expect(await figure('failed')).toBe('0');
    for (const id of ids.slice(0, 5)) expect(await statusOf(id)).toBe('cancelled');
    const left = await api<{ tasks: unknown[] }>('GET', `/api/tasks?status=pending&task_type=${type}`);
    expect(left.tasks).toEqual([]);
    await shot('selection');

    // Cancelled tasks may be retried or deleted; deleting needs admin, which this key has not.
    await page.goto(`${base}/admin#/tasks?status=cancelled&task_type=${type}`);
    await bar.locator('button[data-action=retry]').waitFor();
    expect(await bar.locator('button[data-action=delete]').isDisabled()).toBe(true);
    expect(await bar.locator('button[data-action=delete]').getAttribute('title')).toContain('admin');
  });

  it('lists what an operator looks for first at the top of a page, tasks due in days at its bottom', async () => {
    const type = `${T}.order`;
    const one = async (body: Record<string, unknown>): Promise<string> =>
      (await api<{ task_id: string }>('POST', '/api/tasks', { task_type: type, ...body })).task_id;
    // Made oldest first: newest first, the list would show them the other way round.
    worker('n1', { workerId: `${T}-holder`, taskTypes: [type] });
    const running = await one({});
    await eventually(async () => ((await statusOf(running)) === 'running' ? true : undefined), 15_000, 'held');
    const cancelled = await one({ schedule: { type: 'delayed', delay_seconds: 86_400 } });
    await api('DELETE', `/api/tasks/${cancelled}`);
    const later = await one({ schedule: { type: 'delayed', delay_seconds: 3 * 86_400 } });
    await page.goto(`${base}/admin#/tasks?task_type=${type}`);
    const ids = page.locator('table tbody tr a[href^="#/tasks/"] code');
    await eventually(async () => ((await ids.count()) === 3 ? true : undefined), 10_000, 'three rows');
    const shown = await Promise.all([0, 1, 2].map((i) => ids.nth(i).getAttribute('title')));
    expect(shown).toEqual([running, cancelled, later]);
  });

  it('groups the failed tasks by type and error, and retries exactly one group', async () => {
    const a = `${T}.mail`;
    const b = `${T}.sms`;
    const failing = worker('n1', { workerId: `${T}-failing`, taskTypes: [a, b], fail: true });
    const submit = async (type: string, errors: string[]): Promise<string[]> =>
      (
        await api<{ tasks: { task_id: string }[] }>('POST', '/api/tasks/batch', {
          tasks: errors.map((err) => ({ task_type: type, payload: { err }, max_retries: 0 })),
        })
      ).tasks.map((t) => t.task_id);
    const smtp = await submit(a, ['smtp 421 try later', 'smtp 421 try later', 'smtp 421 try later']);
    const bounce = await submit(a, ['mailbox unknown', 'mailbox unknown']);
    const sms = await submit(b, ['smtp 421 try later']);
    await eventually(
      async () =>
        (await Promise.all([...smtp, ...bounce, ...sms].map(statusOf))).every((s) => s === 'failed') ? true : undefined,
      20_000,
      'every task failed',
    );
    await failing.stop({ timeoutMs: 5_000 });

    await page.locator('#nav a[data-section=failed]').click();
    const row = (type: string, error: string) =>
      page.locator(`table tbody tr[data-task-type="${type}"][data-error="${error}"]`);
    await row(a, 'smtp 421 try later').waitFor();
    const count = (type: string, error: string) => row(type, error).locator('.count').innerText();
    expect(await count(a, 'smtp 421 try later')).toBe('3');
    expect(await count(a, 'mailbox unknown')).toBe('2');
    expect(await count(b, 'smtp 421 try later')).toBe('1');
    expect(await page.locator('table tbody tr').count()).toBe(3);
    // The sample is one of the group's tasks.
    const sample = await row(a, 'mailbox unknown').locator('a[href^="#/tasks/"] code').getAttribute('title');
    expect(bounce).toContain(sample);
    await shot('failed');

    await row(a, 'smtp 421 try later').locator('button[data-action=retry]').click();
    expect(await page.locator('#op-panel .op-filter').innerText()).toContain('error equals = "smtp 421 try later"');
    await page.click('#op-confirm');
    await page.locator('#op-progress[data-state=done]').waitFor({ timeout: 20_000 });
    expect(await page.locator('#op-panel [data-figure=done] strong').innerText()).toBe('3');
    for (const id of smtp) expect(await statusOf(id)).not.toBe('failed');
    for (const id of [...bounce, ...sms]) expect(await statusOf(id)).toBe('failed');
    // The list follows: the group is gone, the others stay.
    await row(a, 'smtp 421 try later').waitFor({ state: 'detached', timeout: 10_000 });
    expect(await count(b, 'smtp 421 try later')).toBe('1');
  });

  it('lists a worker connected to another node with its node and task types', async () => {
    const types = [`${T}.resize`, `${T}.encode`];
    worker('n2', { workerId: `${T}-on-n2`, taskTypes: types });
    await api('POST', '/api/tasks', { task_type: types[0] });
    await page.locator('#nav a[data-section=workers]').click();
    const row = page.locator('table tbody tr', { has: page.locator('code.worker-id', { hasText: `${T}-on-n2` }) });
    await row.waitFor({ timeout: 15_000 });
    expect(await row.locator('.node-id').innerText()).toBe('n2');
    expect(await row.locator('.task-types').innerText()).toBe([...types].sort().join(', '));
    expect(await row.locator('.badge').innerText()).toBe('channel');
    // Its lease shows once the task reaches it.
    await row.locator('td').nth(5).filter({ hasText: /^1$/ }).waitFor({ timeout: 15_000 });
    await shot('workers');
  });

  it('draws an edge that skips a column around the boxes between, not through them', async () => {
    const type = `${T}.etl`;
    const dag = await api<{ dag_id: string }>('POST', '/api/dags', {
      tasks: [
        { ref: 'extract', task_type: type, schedule: { type: 'delayed', delay_seconds: 3600 } },
        { ref: 'clean', task_type: type, depends_on: ['extract'] },
        { ref: 'load', task_type: type, depends_on: ['clean', 'extract'] },
      ],
    });
    await page.goto(`${base}/admin#/dags/${dag.dag_id}`);
    await page.locator('svg.dag .dag-node[data-ref=load]').waitFor();
    // Every point of every edge is outside every box but the two it joins (an edge ends at
    // its boxes' sides); extract → load crosses the column of clean, in clean's row.
    // (Run in the page, as text: the tests are compiled without the DOM's types.)
    const crossings = await page.evaluate<string[]>(`(() => {
      const boxes = [...document.querySelectorAll('svg.dag .dag-node')].map((a) => {
        const r = a.querySelector('rect');
        return { ref: a.getAttribute('data-ref'), x: r.x.baseVal.value, y: r.y.baseVal.value,
                 w: r.width.baseVal.value, h: r.height.baseVal.value };
      });
      const out = [];
      for (const path of document.querySelectorAll('svg.dag path.edge')) {
        const length = path.getTotalLength();
        for (let at = 8; at < length - 8; at += 2) {
          const p = path.getPointAtLength(at);
          for (const b of boxes) {
            if (p.x > b.x + 2 && p.x < b.x + b.w - 2 && p.y > b.y + 2 && p.y < b.y + b.h - 2)
              out.push(b.ref + ' at ' + Math.round(p.x) + ',' + Math.round(p.y));
          }
        }
      }
      return out;
    })()`);
    expect(await page.locator('svg.dag path.edge').count()).toBe(3);
    expect(crossings).toEqual([]);
  });

  it('shows a task that is not there as a problem, the node still live', async () => {
    await page.goto(`${base}/admin#/tasks/${randomUUID()}`);
    await page.locator('.problem', { hasText: 'not_found' }).waitFor();
    await page.waitForTimeout(1600); // a second poll meets the same answer
    expect(await page.locator('#live').getAttribute('class')).toBe('live ok');
  });

  it("follows the system's dark scheme", async () => {
    const background = () => page.evaluate<string>(`getComputedStyle(document.documentElement).backgroundColor`);
    await page.emulateMedia({ colorScheme: 'light' });
    expect(await background()).toBe('rgb(247, 248, 250)');
    await page.emulateMedia({ colorScheme: 'dark' });
    expect(await background()).toBe('rgb(17, 20, 24)');
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('logged no console error on any page', () => {
    expect(consoleErrors).toEqual([]);
  });
});
