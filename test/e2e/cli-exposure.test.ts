/**
 * The CLI's guards around a node that others can reach, and its shutdown: a node on a
 * non-loopback address without an admin key refuses to start (unless --insecure), and a second
 * SIGTERM exits at once instead of waiting for the graceful stop.
 */
import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { freshPgliteDir } from '../support/pglite-dirs.js';
import { requireBuiltCli, spawnCli } from '../support/processes.js';
import { stuckRequest } from '../support/stuck-request.js';
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

  it('starts with --insecure; a second SIGTERM exits at once while the first waits', async () => {
    const { run, port } = await insecureNode();
    const socket = await stuckRequest(port);
    run.child.kill('SIGTERM');
    await eventually(() => (run.stdout().includes('shutting down') ? true : undefined), 10_000, 'the stop to begin');
    await sleep(300); // real time is the subject: the graceful stop waits for the stuck request, so nothing ends the process in this window
    expect(run.child.exitCode).toBeNull();
    run.child.kill('SIGTERM');
    const { code } = await run.exited();
    socket.destroy();
    expect(code).toBe(130);
    expect(run.stderr()).toContain('again, exiting now');
  });

  it('exits after shutdownGraceSeconds when the graceful stop takes longer', async () => {
    const { run, port } = await insecureNode(['--shutdown-grace-seconds', '1']);
    const socket = await stuckRequest(port);
    run.child.kill('SIGTERM');
    const { code } = await run.exited();
    socket.destroy();
    expect(code).toBe(1);
    expect(run.stderr()).toContain('shutdown took longer than 1 s');
  });
});
