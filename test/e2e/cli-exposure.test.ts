/**
 * The CLI's guards around a node that others can reach, and its shutdown: a node on a
 * non-loopback address without an admin key refuses to start (unless --insecure), and a second
 * SIGTERM exits at once instead of waiting for the graceful stop.
 */
import { rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { freshPgliteDir } from '../support/pglite-dirs.js';
import { requireBuiltCli, spawnCli } from '../support/processes.js';
import { eventually, sleep } from '../support/waits.js';

requireBuiltCli();
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function dataDir(): Promise<string> {
  const dir = await freshPgliteDir('wheelhouse-exposure-');
  dirs.push(dir);
  return dir;
}

describe('wheelhouse dev on an address beyond loopback', () => {
  it('refuses to start without an admin key, saying how', async () => {
    const run = spawnCli(['dev', '--host', '0.0.0.0', '--port', '0', '--data-dir', await dataDir()]);
    const { code } = await run.exited();
    expect(code).not.toBe(0);
    expect(run.stderr()).toMatch(/not a loopback address.*WHEELHOUSE_ADMIN_TOKEN.*--insecure/s);
  });

  /** A node listening on every address, and the port it took. */
  async function insecureNode(extra: string[] = []): Promise<{ run: ReturnType<typeof spawnCli>; port: number }> {
    const run = spawnCli([
      'dev',
      '--host',
      '0.0.0.0',
      '--port',
      '0',
      '--insecure',
      '--data-dir',
      await dataDir(),
      ...extra,
    ]);
    const port = await eventually(
      () => /listening on http:\/\/[^:]+:(\d+)/.exec(run.stdout())?.[1],
      30_000,
      'listening',
    );
    return { run, port: Number(port) };
  }

  /** A request whose body never finishes: the graceful stop waits for it. */
  function stuckRequest(port: number): Socket {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write(
      'POST /api/tasks HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"task',
    );
    return socket;
  }

  it('starts with --insecure; a second SIGTERM exits at once while the first waits', async () => {
    const { run, port } = await insecureNode();
    const socket = stuckRequest(port);
    await sleep(200);
    run.child.kill('SIGTERM');
    await eventually(() => (run.stdout().includes('shutting down') ? true : undefined), 10_000, 'the stop to begin');
    await sleep(300);
    expect(run.child.exitCode).toBeNull(); // still waiting for the stuck request
    run.child.kill('SIGTERM');
    const { code } = await run.exited();
    socket.destroy();
    expect(code).toBe(130);
    expect(run.stderr()).toContain('again, exiting now');
  });

  it('exits after shutdownGraceSeconds when the graceful stop takes longer', async () => {
    const { run, port } = await insecureNode(['--shutdown-grace-seconds', '1']);
    const socket = stuckRequest(port);
    await sleep(200);
    run.child.kill('SIGTERM');
    const { code } = await run.exited();
    socket.destroy();
    expect(code).toBe(1);
    expect(run.stderr()).toContain('shutdown took longer than 1 s');
  });
});
