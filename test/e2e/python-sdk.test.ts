import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killGroup, spawnChild } from '../support/children.js';
import { startFaultProxy, type FaultProxy, type ProxyTarget } from '../support/fault-proxy.js';
import { startTestNode, type TestCluster } from '../support/nodes.js';

/**
 * The Python SDK (sdk/python, standard library only) against a real node. The package is
 * installed as pip installs it offline (`pip install --no-index --no-build-isolation`, into a
 * directory of this run), and its unittest modules run against the node, each in its own
 * `python3` process: the client's calls and errors, the worker on both paths (the channel and
 * HTTP long-poll) with a cancel, a deadline and a node restart mid-run, and a worker process
 * stopped with SIGTERM. Workers reach the node through a TCP proxy, so that after the restart
 * (asked for by the Python test through this file's control server) the test re-points it at
 * the new node. The node asks for API keys: the SDK sends the admin key as a bearer token.
 */
const SDK = resolve(import.meta.dirname, '../../sdk/python');
const PYTHON = process.env.PYTHON ?? 'python3';
const hasPython = spawnSync(PYTHON, ['--version']).status === 0;
if (!hasPython) console.warn(`python-sdk test skipped: "${PYTHON}" was not found (set PYTHON to run it)`);

const ADMIN = 'py-sdk-admin-key-0123456789abcdef';

describe.skipIf(!hasPython)('the Python SDK', () => {
  let c: TestCluster;
  let proxy: FaultProxy;
  let control: Server;
  let controlUrl = '';
  let site = '';
  const target: ProxyTarget = { host: '127.0.0.1', port: 0 };

  beforeAll(async () => {
    site = mkdtempSync(join(tmpdir(), 'wheelhouse-py-'));
    const install = spawnSync(
      PYTHON,
      ['-m', 'pip', 'install', '--quiet', '--no-index', '--no-build-isolation', '--target', site, SDK],
      { encoding: 'utf8', env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' } },
    );
    expect(install.status, `${install.stdout}\n${install.stderr}`).toBe(0);
    c = await startTestNode('embedded', { adminToken: ADMIN });
    target.port = Number(new URL(c.url).port);
    proxy = await startFaultProxy({ target });
    control = createServer((req, res) => {
      if (req.method !== 'POST' || req.url !== '/restart') {
        res.writeHead(404).end();
        return;
      }
      void c.restart().then(
        () => {
          target.port = Number(new URL(c.url).port);
          res.writeHead(200).end('{}');
        },
        (error: unknown) => res.writeHead(500).end(String(error)),
      );
    });
    await new Promise<void>((done) => control.listen(0, '127.0.0.1', done));
    const address = control.address();
    controlUrl = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
  });

  afterAll(async () => {
    await new Promise((done) => control?.close(done));
    await proxy?.close();
    await c?.cleanup();
    if (site) rmSync(site, { recursive: true, force: true });
  });

  /** Runs `python3 -m unittest <module>` against the node; resolves with its output once every test ran and passed. */
  function unittest(module: string, timeoutMs = 100_000): Promise<string> {
    return new Promise((done, fail) => {
      const child = spawnChild(PYTHON, ['-m', 'unittest', '-v', module], {
        cwd: SDK,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...process.env,
          PYTHONPATH: site,
          PYTHONDONTWRITEBYTECODE: '1',
          WHEELHOUSE_URL: proxy.url(c.url).replace(/\/$/, ''),
          WHEELHOUSE_API_KEY: ADMIN,
          WHEELHOUSE_TEST_CONTROL: controlUrl,
        },
      });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
      child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
      const timer = setTimeout(() => {
        killGroup(child, 'SIGKILL');
        fail(new Error(`${module} did not finish in ${timeoutMs} ms:\n${out}`));
      }, timeoutMs);
      child.once('close', (code) => {
        clearTimeout(timer);
        if (code !== 0) fail(new Error(`${module} exited ${code}:\n${out}`));
        else done(out);
      });
    });
  }

  /** The run passed, ran `count` tests, and skipped none (a skip would hide a path not tested). */
  function expectRan(out: string, count: number): void {
    expect(out).toMatch(new RegExp(`Ran ${count} tests? in`));
    expect(out).toMatch(/\nOK\s*$/);
    expect(out).not.toMatch(/skipped/);
  }

  it('is installed by pip offline and typed; its WebSocket framing, channel protocol (against a scripted node end) and error mapping hold', async () => {
    expectRan(await unittest('tests.test_ws'), 6);
    expectRan(await unittest('tests.test_channel_fake'), 6);
    expectRan(await unittest('tests.test_errors'), 3);
    const typed = spawnSync(
      PYTHON,
      [
        '-c',
        'import wheelhouse, os; print(wheelhouse.__file__); print(os.path.exists(os.path.join(os.path.dirname(wheelhouse.__file__), "py.typed")))',
      ],
      { encoding: 'utf8', env: { ...process.env, PYTHONPATH: site } },
    );
    expect(typed.stdout).toContain(site);
    expect(typed.stdout.trim().endsWith('True')).toBe(true);
  });

  it('client: submit, batch, get, list, cancel, retry, explain, limits, and errors carrying the API code', async () => {
    expectRan(await unittest('tests.test_client'), 6);
  });

  it('worker on the channel and on HTTP long-poll: results, credit, cancel, deadline, a node restart mid-run', async () => {
    expectRan(await unittest('tests.test_worker'), 8);
  });

  it('a worker process stops gracefully on SIGTERM on either path', async () => {
    expectRan(await unittest('tests.test_sigterm'), 2);
  });
});
