/**
 * The package as a user gets it: `npm pack` of the built tree, installed into an empty folder
 * from the tarball (its dependencies from the registry), then `npx wheelhouse dev` and a worker
 * written against `wheelhouse/worker`, both from that install. Needs the npm registry.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

import { afterAll, describe, expect, it } from 'vitest';

import { killGroup, spawnChild } from '../support/children.js';
import { api } from '../support/nodes.js';
import { requireBuiltCli } from '../support/processes.js';
import { eventually } from '../support/waits.js';

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');

describe('the packed package', () => {
  const children: ChildProcess[] = [];
  let dir: string | null = null;

  afterAll(async () => {
    // The whole group: `npx wheelhouse dev` is npx, a shell and then the node, which a kill of
    // npx alone would leave running with parent 1.
    for (const child of children) killGroup(child, 'SIGKILL');
    if (dir !== null) await rm(dir, { recursive: true, force: true });
  });

  it('installs from its tarball and runs a node and a worker from the install', async () => {
    requireBuiltCli();
    dir = await mkdtemp(join(tmpdir(), 'wheelhouse-pack-'));
    // The tree was built by `npm test` just before: pack it as it is.
    const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: REPO });
    const [info] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
    const paths = info!.files.map((f) => f.path);
    expect(paths).toContain('dist/src/cli.js');
    // A new embedded data directory is unpacked from it (decision 0037).
    expect(paths).toContain('dist/src/store/pglite-template.tar.gz');
    expect(paths).toContain('dist/src/worker/index.js');
    // The dashboard the node serves at /admin: its page, its style sheet and its scripts.
    expect(paths).toContain('dist/src/dashboard/index.html');
    expect(paths).toContain('dist/src/dashboard/dashboard.css');
    expect(paths).toContain('dist/src/dashboard/app.js');
    expect(paths.filter((p) => /^(test|bench|\.ci|examples)\//.test(p))).toEqual([]);

    const app = join(dir, 'app');
    await run('mkdir', ['-p', app]);
    await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel', 'error', join(dir, info!.filename)], {
      cwd: app,
      timeout: 240_000,
    });

    const node = spawnChild(
      'npx',
      ['wheelhouse', 'dev', '--port', '0', '--data-dir', 'memory://', '--log-level', 'warn'],
      {
        cwd: app,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    children.push(node);
    const url = await new Promise<string>((resolveUrl, reject) => {
      let out = '';
      const onData = (chunk: Buffer): void => {
        out += chunk.toString('utf8');
        const m = /listening on (http:\/\/[0-9.]+:\d+)/.exec(out);
        if (m) resolveUrl(m[1]!);
      };
      node.stdout.on('data', onData);
      node.stderr.on('data', onData);
      node.once('exit', (code) => reject(new Error(`wheelhouse dev exited with ${code}:\n${out}`)));
    });

    await writeFile(
      join(app, 'worker.js'),
      `import { createWorker } from 'wheelhouse/worker';
const worker = createWorker({ url: process.argv[2], taskTypes: ['pack.hello'], handler: async () => {} });
worker.start();
`,
    );
    const worker = spawnChild(process.execPath, ['worker.js', url], { cwd: app, stdio: 'ignore' });
    children.push(worker);

    const noop = await api<{ task_id: string }>(url, 'POST', '/api/tasks', { task_type: 'wheelhouse.noop' });
    const hello = await api<{ task_id: string }>(url, 'POST', '/api/tasks', { task_type: 'pack.hello' });
    expect([noop.status, hello.status]).toEqual([201, 201]);
    for (const id of [noop.body.task_id, hello.body.task_id]) {
      await eventually(
        async () =>
          (await api<{ status: string }>(url, 'GET', `/api/tasks/${id}`)).body.status === 'succeeded'
            ? true
            : undefined,
        30_000,
        `task ${id} to succeed`,
      );
    }
  }, 300_000);
});
