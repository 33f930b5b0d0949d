/**
 * `wheelhouse cancel|retry|delete --filter …`, run as a user runs them (`node dist/src/cli.js`),
 * against a node on the embedded backend started in this process: the operation runs to its
 * end and the CLI says what it did; a filter the node cannot run is its 400, a bad flag a
 * usage error.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { api } from '../support/nodes.js';
import { failedTasks } from '../support/operations.js';
import { CLI, requireBuiltCli } from '../support/processes.js';

const run = promisify(execFile);

let node: WheelhouseNode;

beforeAll(async () => {
  requireBuiltCli();
  node = await startNode({
    backend: 'embedded',
    dataDir: 'memory://',
    port: 0,
    logLevel: 'silent',
    builtinExecutors: false,
    operationPageTasks: 5,
  });
});

afterAll(async () => {
  await node?.close();
});

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], {
      env: { ...process.env, WHEELHOUSE_URL: node.url },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

describe('wheelhouse cancel|retry|delete --filter', () => {
  it('retries the failed tasks of a type and prints what the operation did', async () => {
    const ids = await failedTasks(node.url, 'cli.ops.retry', 12, 'connection reset, then timeout');
    await failedTasks(node.url, 'cli.ops.other', 3, 'timeout');
    const done = await cli('retry', '--filter', 'status=failed,task_type=cli.ops.retry,error_contains=reset, then');
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toMatch(/retry: done/);
    expect(done.stdout).toMatch(/matched 12 · done 12 · failed 0/);
    for (const id of ids) {
      const task = await api<{ status: string }>(node.url, 'GET', `/api/tasks/${id}`);
      expect(['pending', 'ready']).toContain(task.body.status);
    }
  });

  it('deletes finished tasks, printing the operation as JSON with --json', async () => {
    const ids = await failedTasks(node.url, 'cli.ops.delete', 4, 'x');
    const done = await cli('delete', '--filter', 'type=cli.ops.delete', '--json');
    expect(done.code, done.stderr).toBe(0);
    expect(JSON.parse(done.stdout)).toMatchObject({ action: 'delete', state: 'done', matched: 4, done: 4 });
    for (const id of ids) expect((await api(node.url, 'GET', `/api/tasks/${id}`)).status).toBe(404);
  });

  it('refuses what it cannot run: the node answers a bad parent_id with a 400, a bad flag is a usage error', async () => {
    const parent = await cli('cancel', '--filter', 'parent_id=not-a-task-id');
    expect(parent.code).not.toBe(0);
    expect(parent.stderr).toMatch(/filter\.parent_id/);
    const unknown = await cli('retry', '--filter', 'colour=red');
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/--filter takes name=value/);
    const bare = await cli('delete');
    expect(bare.code).not.toBe(0);
    expect(bare.stderr).toMatch(/delete needs --filter/);
  });
});
