/**
 * The dashboard's Limits page in a real Chromium (Debian's `chromium`, driven by playwright-core)
 * against a node with auth on, signed in with a key that may change limits (`admin` beside the
 * dashboard's `read`, `ops`, `submit`): a declared limit is listed with its live figures, the
 * form overrides it, the row's button pauses and resumes it (a task type's through its own
 * route), each checked through the API, and no page logged an error.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type ProcessCluster } from '../support/cluster.js';

const CHROMIUM = process.env.WHEELHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const ADMIN = randomBytes(24).toString('hex');
const T = `dl${randomBytes(3).toString('hex')}`; // every name of this test starts with it

let cluster: ProcessCluster;
let browser: Browser;
let page: Page;
let base: string;
const consoleErrors: string[] = [];

interface LimitJson {
  name: string;
  concurrency: number | null;
  rate: { limit: number; period_seconds: number; burst: number } | null;
  waiting: number | null;
}

async function api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  return cluster.api<T>('n1', method, path, body, 10_000);
}
async function ok<T>(method: string, path: string, body?: unknown): Promise<T> {
  const r = await api<T>(method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** The table row of limit `name`. */
const row = (name: string) => page.locator('table tbody tr', { has: page.locator(`code[data-limit="${name}"]`) });

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (apt-get install -y chromium; .ci/run does)`);
  const dir = mkdtempSync(join(tmpdir(), 'wh-dash-limits-'));
  const tokenFile = join(dir, 'admin-token');
  writeFileSync(tokenFile, ADMIN, { mode: 0o600 });
  [cluster, browser] = await Promise.all([
    startCluster({
      nodes: 1,
      label: 'dashlimits',
      extraArgs: ['--admin-token-file', tokenFile],
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

describe('the Limits page', () => {
  const key = `${T}-stripe`;
  const family = `${T}:*`;
  const taskType = `${T}.mail`;

  it('lists the declared limits with their live figures, from the nav link', async () => {
    await ok('PUT', `/api/limits/${key}`, { concurrency: 2 });
    await ok('PUT', `/api/limits/${family}`, { concurrency: 3 });
    await ok('PUT', `/api/limits/type:${taskType}`, { concurrency: 4 });
    // One task waits for a worker under the key: the page shows it waiting.
    await ok('POST', '/api/tasks', { task_type: `${T}.work`, limits: [key] });

    const token = await ok<{ token: string }>('POST', '/admin/tokens', {
      name: 'dashboard-limits',
      scopes: ['read', 'ops', 'submit', 'admin'],
    });
    await page.goto(`${base}/admin`);
    await page.fill('#key', token.token);
    await page.click('form.login button[type=submit]');
    await page.locator('#nav a[data-section=limits]').click();
    await page.locator('h1', { hasText: 'Limits' }).waitFor();
    await page.fill('#filter-limits input[name=prefix]', T);
    await page.click('#filter-limits button[type=submit]');

    await row(key).waitFor();
    const cells = row(key).locator('td');
    expect(await cells.nth(1).innerText()).toBe('2');
    await cells.nth(6).filter({ hasText: /^1$/ }).waitFor(); // waiting, live from the key's actor
    expect(await row(family).locator('td').nth(5).innerText()).toBe('per key');
  });

  it('overrides a limit from the form', async () => {
    await row(key).locator('button[data-action=edit]').click();
    expect(await page.inputValue('#limit-name')).toBe(key);
    await page.fill('#limit-concurrency', '7');
    await page.fill('#limit-rate', '10');
    await page.fill('#limit-period', '60');
    await page.selectOption('#limit-on_limit', 'cancel_new');
    await page.click('#limit-form button[type=submit]');
    await page.locator('.notice', { hasText: `Saved ${key}` }).waitFor();
    const stored = await ok<LimitJson & { on_limit: string }>('GET', `/api/limits/${key}`);
    expect(stored).toMatchObject({
      concurrency: 7,
      rate: { limit: 10, period_seconds: 60, burst: 0 },
      on_limit: 'cancel_new',
    });
    await row(key).locator('td', { hasText: '10 / 60 s' }).waitFor();
    expect(await row(key).locator('td').nth(1).innerText()).toBe('7');
  });

  it('pauses a key from its button and resumes it to what it was', async () => {
    await row(key).locator('button[data-action=pause]').click();
    await page.locator('.notice', { hasText: `Paused ${key}` }).waitFor();
    expect((await ok<LimitJson>('GET', `/api/limits/${key}`)).concurrency).toBe(0);
    // The rate and the strategy stay as the form set them.
    expect((await ok<LimitJson>('GET', `/api/limits/${key}`)).rate).toEqual({
      limit: 10,
      period_seconds: 60,
      burst: 0,
    });
    await row(key).locator('button[data-action=resume]').click();
    await page.locator('.notice', { hasText: `Resumed ${key}` }).waitFor();
    expect((await ok<LimitJson>('GET', `/api/limits/${key}`)).concurrency).toBe(7);
  });

  it('pauses a task type through its own route', async () => {
    const name = `type:${taskType}`;
    await page.fill('#filter-limits input[name=prefix]', `type:${T}`);
    await page.click('#filter-limits button[type=submit]');
    await row(name).locator('td').nth(1).filter({ hasText: /^4$/ }).waitFor();
    await row(name).locator('button[data-action=pause]').click();
    await page.locator('.notice', { hasText: `Paused ${name}` }).waitFor();
    expect((await ok<LimitJson>('GET', `/api/limits/${name}`)).concurrency).toBe(0);
    await row(name).locator('button[data-action=resume]').click();
    await page.locator('.notice', { hasText: `Resumed ${name}` }).waitFor();
    // Resuming a type removes its concurrency; a declaration left with nothing else is removed.
    expect((await api('GET', `/api/limits/${name}`)).status).toBe(404);
  });

  it('refuses a name that is not one without calling the node, and logged no error', async () => {
    await page.fill('#limit-name', '../../admin/tokens');
    await page.click('#limit-form button[type=submit]');
    await page.locator('.notice.bad', { hasText: 'is not a limit name' }).waitFor();
    expect(consoleErrors).toEqual([]);
  });
});
