/**
 * The dashboard of a node that asks for no key (`wheelhouse dev`) in a real Chromium (Debian's
 * `chromium`, driven by playwright-core): it opens on the Cluster page with its navigation and
 * no sign-in form, and no sign-out button (there is nothing to sign out of); a node with keys
 * still asks for one (issue 32: a keyless dev node showed a sign-in form).
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killGroup } from '../support/children.js';
import { requireBuiltCli, startCliProcess, type CliProcess } from '../support/processes.js';

const CHROMIUM = process.env.WHEELHOUSE_CHROMIUM ?? '/usr/bin/chromium';
const ADMIN = 'the-admin-key-of-the-keyless-dashboard-test';

// Node processes of the built CLI: they serve the built dashboard (dist/src/dashboard/).
let keyless: CliProcess;
let keyed: CliProcess;
let browser: Browser;
let dir: string;
const consoleErrors: string[] = [];

async function open(url: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('pageerror', (error) => consoleErrors.push(`uncaught: ${error.message}`));
  await page.goto(`${url}/admin#/cluster`);
  return page;
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (apt-get install -y chromium; .ci/run does)`);
  requireBuiltCli();
  dir = mkdtempSync(join(tmpdir(), 'wh-dash-keyless-'));
  const tokenFile = join(dir, 'admin-token');
  writeFileSync(tokenFile, ADMIN, { mode: 0o600 });
  const dev = (name: string, ...flags: string[]): Promise<CliProcess> =>
    startCliProcess(['dev', '--data-dir', join(dir, name), '--port', '0', '--log-level', 'warn', ...flags]);
  [keyless, keyed, browser] = await Promise.all([
    dev('keyless'),
    dev('keyed', '--admin-token-file', tokenFile),
    chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] }),
  ]);
});

afterAll(async () => {
  await browser?.close();
  for (const node of [keyless, keyed]) {
    if (node === undefined) continue;
    killGroup(node.child, 'SIGTERM');
    await node.exited();
  }
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('the dashboard of a node without keys', () => {
  it('shows its pages without asking for a key', async () => {
    const page = await open(keyless.url);
    await page.locator('main h1', { hasText: 'Cluster' }).waitFor();
    expect(await page.locator('#nav').isVisible()).toBe(true);
    expect(await page.locator('form.login').count()).toBe(0);
    expect(await page.locator('#sign-out').isVisible()).toBe(false);
    // Its data came: the node's own row in the cluster's table.
    const nodeId = /node (\S+) listening on/.exec(keyless.output())?.[1] as string;
    await page.locator('main', { hasText: nodeId }).waitFor();
    await page.close();
    expect(consoleErrors).toEqual([]);
  });

  it('is told so by its page, which makes no request to find out', async () => {
    expect(await (await fetch(`${keyless.url}/admin`)).text()).toContain('<html lang="en" data-keys="off">');
    expect(await (await fetch(`${keyed.url}/admin`)).text()).not.toContain('data-keys');
  });

  it('still asks for one on a node with keys', async () => {
    const page = await open(keyed.url);
    await page.locator('form.login').waitFor();
    expect(await page.locator('#nav').isVisible()).toBe(false);
    await page.close();
  });
});
