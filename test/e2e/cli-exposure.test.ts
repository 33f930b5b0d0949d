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

  /**
   * A request whose body never finishes: the graceful stop waits for it. Resolves once the node
   * has read its headers (it answers `Expect: 100-continue` then) and the first bytes of its
   * body are sent: from then on the request is in flight, not a connection still opening.
   */
  async function stuckRequest(port: number): Promise<Socket> {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    const continued = new Promise<void>((resolve, reject) => {
      // not a wait: the bound on how long the node may take to read the headers
      const timer = setTimeout(() => reject(new Error('the node did not read the stuck request within 10 s')), 10_000);
      let answer = '';
      const onData = (chunk: Buffer): void => {
        answer += chunk.toString('latin1');
        if (!answer.includes('\r\n\r\n')) return;
        socket.off('data', onData);
        clearTimeout(timer);
        if (answer.startsWith('HTTP/1.1 100')) resolve();
        else reject(new Error(`the node answered the stuck request's headers with ${JSON.stringify(answer)}`));
      };
      socket.on('data', onData);
    });
    socket.write(
      `POST /api/tasks HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: 100\r\nexpect: 100-continue\r\n\r\n`,
    );
    await continued;
    socket.write('{"task');
    return socket;
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
