/**
 * `wheelhouse worker --handler <module>`, run as a user runs it (`node dist/src/cli.js`),
 * against a real node on the embedded backend started in this process: the module's
 * handlers run the tasks, SIGTERM lets a running one finish, and a module that is missing or
 * exports no handlers is refused with exit code 2.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadHandlers } from '../../src/cli/handler-module.js';
import { UsageError } from '../../src/cli/usage.js';
import { createClient, type WheelhouseClient } from '../../src/client/index.js';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { requireBuiltCli, runCli, spawnCli, type RunningCli } from '../support/processes.js';
import { eventually } from '../support/waits.js';

let node: WheelhouseNode;
let client: WheelhouseClient;
let dir: string;

const HANDLERS = `
export default {
  'cli.echo': async (payload, task) => ({ echoed: payload, attempt: task.attempt }),
  'cli.slow': async (payload, task) => {
    process.stderr.write('began ' + task.taskId + '\\n');
    await new Promise((resolve) => setTimeout(resolve, 300));
    return 'slow done';
  },
  'cli.boom': async () => {
    throw Object.assign(new Error('boom'), { retryable: false });
  },
};
`;

beforeAll(async () => {
  requireBuiltCli();
  node = await startNode({ backend: 'embedded', dataDir: 'memory://', port: 0, logLevel: 'silent' });
  client = createClient({ url: node.url });
  dir = await mkdtemp(join(tmpdir(), 'wheelhouse-cli-worker-'));
  await writeFile(join(dir, 'tasks.mjs'), HANDLERS);
});

afterAll(async () => {
  await node?.close();
  await rm(dir, { recursive: true, force: true });
});

const env = (): NodeJS.ProcessEnv => ({ ...process.env, WHEELHOUSE_URL: node.url });

/** The worker's JSON log lines so far. */
function events(worker: RunningCli): Record<string, unknown>[] {
  return worker
    .stderr()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

async function started(worker: RunningCli): Promise<void> {
  await eventually(
    () => (events(worker).some((e) => e.event === 'started') ? true : undefined),
    20_000,
    `the worker to start:\n${worker.stderr()}`,
  );
}

describe('wheelhouse worker', () => {
  it('runs tasks with the handlers of a module, logs each outcome and stops gracefully on SIGTERM', async () => {
    const worker = spawnCli(['worker', '--handler', './tasks.mjs', '--worker-id', 'cli-worker-1', '--json'], {
      env: env(),
      cwd: dir,
    });
    await started(worker);
    expect(events(worker)[0]).toMatchObject({
      task_types: ['cli.echo', 'cli.slow', 'cli.boom'],
      worker_id: 'cli-worker-1',
    });

    const { taskId } = await client.submit({ taskType: 'cli.echo', payload: { n: 7 } });
    await client.waitFor(taskId, 'succeeded', { timeoutMs: 20_000 });
    const got = await runCli(['get', taskId, '--json'], { env: env() });
    expect(JSON.parse(got.stdout)).toMatchObject({
      task_id: taskId,
      status: 'succeeded',
      attempts: 1,
      result: { echoed: { n: 7 }, attempt: 1 },
    });
    const history = await client.historyPage(taskId);
    expect(history.executions[0]?.workerId).toBe('cli-worker-1');
    await eventually(() => events(worker).find((e) => e.task_id === taskId), 5_000, 'the log line of the task');
    expect(events(worker).find((e) => e.task_id === taskId)).toMatchObject({
      event: 'task',
      outcome: 'succeeded',
      task_type: 'cli.echo',
      attempt: 1,
      result: { echoed: { n: 7 }, attempt: 1 },
    });

    const failed = await client.submit({ taskType: 'cli.boom' });
    const boom = await client.waitFor(failed.taskId, 'failed', { timeoutMs: 20_000 });
    expect(boom.lastError).toBe('boom');

    // A task running when SIGTERM comes finishes, and its result is reported, before the exit.
    const slow = await client.submit({ taskType: 'cli.slow' });
    await eventually(() => (worker.stderr().includes(`began ${slow.taskId}`) ? true : undefined), 20_000);
    worker.child.kill('SIGTERM');
    expect((await worker.exited()).code).toBe(0);
    expect((await client.get(slow.taskId)).status).toBe('succeeded');
    const tail = events(worker).slice(-3);
    expect(tail.map((e) => e.event)).toEqual(['stopping', 'task', 'stopped']);
    expect(tail[0]).toMatchObject({ signal: 'SIGTERM', running: 1 });
    // Over the worker channel, the default: not one poll.
    expect(tail[2]).toMatchObject({ succeeded: 2, failed: 1, reported: 3, polls: 0 });
  });

  it('writes one readable line per task without --json, and runs only the types of --types', async () => {
    const worker = spawnCli(
      ['worker', '--handler', join(dir, 'tasks.mjs'), '--types', 'cli.echo', '--concurrency', '2'],
      {
        env: env(),
      },
    );
    await eventually(() => (worker.stderr().includes('taking') ? true : undefined), 20_000, 'the worker to start');
    expect(worker.stderr()).toMatch(
      /taking cli\.echo from http:\/\/\S+ over the worker channel \(handlers from .*tasks\.mjs, concurrency 2\)/,
    );
    const { taskId } = await client.submit({ taskType: 'cli.echo', payload: 'hi' });
    await client.waitFor(taskId, 'succeeded', { timeoutMs: 20_000 });
    await eventually(() => (worker.stderr().includes(taskId) ? true : undefined), 5_000, 'the log line');
    expect(worker.stderr()).toMatch(
      new RegExp(`Z ok +cli\\.echo ${taskId} attempt 1 in \\d+ ms → \\{"echoed":"hi","attempt":1\\}\\n`),
    );
    worker.child.kill('SIGINT');
    expect((await worker.exited()).code).toBe(0);
    expect(worker.stderr()).toMatch(/stopped; 1 succeeded, 0 failed, 1 reported/);
  });

  it('exits 2 with a message for a module that is missing, exports no handlers or lacks a --types type', async () => {
    const missing = await runCli(['worker', '--handler', './nope.mjs'], { env: env(), cwd: dir });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--handler \.\/nope\.mjs: no such file \(.*nope\.mjs\)/);

    await writeFile(join(dir, 'empty.mjs'), 'export const version = 1;\n');
    const empty = await runCli(['worker', '--handler', 'empty.mjs'], { env: env(), cwd: dir });
    expect(empty.code).toBe(2);
    expect(empty.stderr).toMatch(/--handler empty\.mjs exports no handlers/);

    const narrowed = await runCli(['worker', '--handler', 'tasks.mjs', '--types', 'cli.echo,cli.nope'], {
      env: env(),
      cwd: dir,
    });
    expect(narrowed.code).toBe(2);
    expect(narrowed.stderr).toMatch(/no handler for "cli\.nope"/);

    const none = await runCli(['worker'], { env: env() });
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/needs --handler/);
  });
});

describe('the handler module', () => {
  it('may be CommonJS, or name its handlers in a "handlers" export', async () => {
    await writeFile(join(dir, 'tasks.cjs'), "module.exports = { 'cjs.a': async () => 1, 'cjs.b': async () => 2 };\n");
    expect([...(await loadHandlers('tasks.cjs', dir)).keys()]).toEqual(['cjs.a', 'cjs.b']);
    await writeFile(join(dir, 'named.mjs'), "export const handlers = { 'named.a': async () => {} };\n");
    expect([...(await loadHandlers('named.mjs', dir)).keys()]).toEqual(['named.a']);
    await writeFile(join(dir, 'exports.cjs'), "exports.handlers = { 'cjs.named': async () => {} };\n");
    expect([...(await loadHandlers('exports.cjs', dir)).keys()]).toEqual(['cjs.named']);
  });

  it('refuses a handler that is not a function, a key that is not a task type and a module that throws', async () => {
    await writeFile(join(dir, 'not-fn.mjs'), "export default { 'a.b': 42 };\n");
    await expect(loadHandlers('not-fn.mjs', dir)).rejects.toThrow(/the handler for "a\.b" is not a function/);
    await writeFile(join(dir, 'bad-key.mjs'), "export default { 'a b': async () => {} };\n");
    await expect(loadHandlers('bad-key.mjs', dir)).rejects.toThrow(/"a b" is not a task type/);
    await writeFile(join(dir, 'throws.mjs'), "throw new Error('no config');\n");
    const error = await loadHandlers('throws.mjs', dir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toMatch(/--handler throws\.mjs failed to load: Error: no config/);
  });
});
