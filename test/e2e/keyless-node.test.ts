/**
 * A node that asks for no key (`wheelhouse dev` on loopback) against the two ways a web page
 * reaches loopback (docs/security.md): the worker channel refuses a WebSocket upgrade from a
 * page of another origin (cross-site WebSocket hijacking), and every route refuses a `Host`
 * that is not one of the node's own names (DNS rebinding) — each with a 403 from the
 * catalogue, and each with an option to allow more. Through real nodes, and through the built
 * CLI for the flag and the line `wheelhouse dev` prints.
 */
import { request } from 'node:http';
import { rmSync } from 'node:fs';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPgliteDir } from '../support/pglite-dirs.js';
import { startTestNode, type TestCluster } from '../support/nodes.js';
import { requireBuiltCli, spawnCli } from '../support/processes.js';
import { eventually } from '../support/waits.js';

const ADMIN = 'the-admin-key-of-the-keyless-tests';

/** GET `path` with the `Host` header given (fetch does not let a caller set it). */
function getWithHost(
  url: string,
  path: string,
  host: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; code: string | undefined }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, path, method: 'GET', headers: { ...headers, host } }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      res.on('end', () => {
        let code: string | undefined;
        try {
          code = (JSON.parse(body) as { error?: { code?: string } }).error?.code;
        } catch {
          code = undefined;
        }
        resolve({ status: res.statusCode ?? 0, code });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** Opens the worker channel with `headers`: 101 when the upgrade is taken, else the status answered. */
function upgrade(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/api/workers/connect`, { headers });
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      ws.close();
      resolve({ status: 101, body: '' });
    });
    ws.once('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    ws.once('error', reject);
  });
}

describe('a node that asks for no key', () => {
  let t: TestCluster;
  let port: string;
  beforeAll(async () => {
    t = await startTestNode('embedded', { allowedHosts: ['wheelhouse.test', '*.svc.test'] });
    port = new URL(t.url).port;
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  it('refuses a WebSocket upgrade from a page of another origin, before upgrading', async () => {
    const refused = await upgrade(t.url, { origin: 'https://evil.example' });
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'origin_not_allowed' } });
    expect((await upgrade(t.url, { origin: 'null' })).status).toBe(403);
    // Another port of the same machine is another origin.
    expect((await upgrade(t.url, { origin: `http://127.0.0.1:${Number(port) + 1}` })).status).toBe(403);
  });

  it('takes an upgrade without an Origin (a worker) or from its own pages', async () => {
    expect((await upgrade(t.url, {})).status).toBe(101);
    expect((await upgrade(t.url, { origin: `http://127.0.0.1:${port}` })).status).toBe(101);
  });

  it('refuses a Host that is not its own, on every route', async () => {
    for (const path of ['/api/tasks', '/admin/tokens', '/healthz', '/admin']) {
      const answer = await getWithHost(t.url, path, `attacker.example:${port}`);
      expect(answer, path).toEqual({ status: 403, code: 'host_not_allowed' });
    }
    expect(await getWithHost(t.url, '/api/tasks', 'wheelhouse.test.attacker.example')).toMatchObject({ status: 403 });
    expect(await getWithHost(t.url, '/api/tasks', '10.1.2.3')).toMatchObject({ status: 403 });
  });

  it('answers loopback names and addresses with any port, and what allowedHosts names', async () => {
    for (const host of [
      `localhost:${port}`,
      'localhost',
      `127.0.0.1:${port}`,
      '127.0.0.2',
      `[::1]:${port}`,
      `wheelhouse.test:${port}`,
      'a.svc.test',
    ]) {
      expect((await getWithHost(t.url, '/api/tasks', host)).status, host).toBe(200);
    }
  });
});

describe('a node that asks for keys', () => {
  let t: TestCluster;
  beforeAll(async () => {
    t = await startTestNode('embedded', { adminToken: ADMIN, allowedOrigins: ['https://ops.example'] });
  });
  afterAll(async () => {
    await t?.cleanup();
  });

  it('takes any Host: the key is the check', async () => {
    const answer = await getWithHost(t.url, '/api/tasks', 'attacker.example', { authorization: `Bearer ${ADMIN}` });
    expect(answer.status).toBe(200);
  });

  it('still refuses an upgrade from another origin, and takes one from allowedOrigins', async () => {
    const bearer = { authorization: `Bearer ${ADMIN}` };
    expect((await upgrade(t.url, { ...bearer, origin: 'https://evil.example' })).status).toBe(403);
    expect((await upgrade(t.url, { ...bearer, origin: 'https://ops.example' })).status).toBe(101);
  });
});

describe('wheelhouse dev', () => {
  requireBuiltCli();
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('says at start that it asks for no key, and takes --allowed-hosts', async () => {
    const dir = await freshPgliteDir('wheelhouse-keyless-');
    dirs.push(dir);
    const run = spawnCli(['dev', '--port', '0', '--data-dir', dir, '--allowed-hosts', 'dev.test']);
    try {
      const url = await eventually(() => /listening on (http:\/\/\S+)/.exec(run.stdout())?.[1], 30_000, 'listening');
      await eventually(() => (/keys:/.test(run.stdout()) ? true : undefined), 5_000, 'the keys line');
      expect(run.stdout()).toMatch(/keys: +none asked for: any process on this machine can use every route/);
      expect((await getWithHost(url, '/api/tasks', 'dev.test')).status).toBe(200);
      expect((await getWithHost(url, '/api/tasks', 'other.test')).status).toBe(403);
    } finally {
      run.child.kill('SIGTERM');
      await run.exited();
    }
  });
});
