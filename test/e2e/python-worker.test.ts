import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killGroup, spawnChild } from '../support/children.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { eventually } from '../support/waits.js';

/**
 * The Python example worker (examples/python-worker/worker.py, standard library only) against
 * a real node, on the HTTP worker routes: it long-polls, runs its handlers, heartbeats a task
 * that outlives its lease, and completes each task with its own request.
 */
const WORKER = resolve(import.meta.dirname, '../../examples/python-worker/worker.py');
const PYTHON = process.env.PYTHON ?? 'python3';
const hasPython = spawnSync(PYTHON, ['--version']).status === 0;
if (!hasPython) console.warn(`python-worker test skipped: "${PYTHON}" was not found (set PYTHON to run it)`);

interface TaskJson {
  status: string;
  attempts: number;
  last_error: string | null;
}

/** Runs the worker until it has reported `tasks` results; resolves with its output. */
function runWorker(url: string, tasks: number): Promise<string> {
  return new Promise((resolveRun, reject) => {
    const child = spawnChild(PYTHON, [WORKER, '--url', url, '--max-tasks', String(tasks), '--concurrency', '4'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => {
      killGroup(child, 'SIGKILL');
      reject(new Error(`the Python worker did not finish:\n${output}`));
    }, 60_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolveRun(output);
      else reject(new Error(`the Python worker exited ${code}:\n${output}`));
    });
  });
}

describe.skipIf(!hasPython).each(BACKENDS)('the Python example worker on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode(backend);
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const submit = async (task: Record<string, unknown>): Promise<string> => {
    const res = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', task);
    expect(res.status).toBe(201);
    return res.body.task_id;
  };

  it('runs tasks end to end: echoes succeed, a long task extends its deadline and is kept alive by heartbeats, a failure is reported', async () => {
    const echoes = await Promise.all(
      Array.from({ length: 5 }, (_, i) => submit({ task_type: 'example.echo', payload: { n: i } })),
    );
    // Longer than its 1 s deadline and lease: it succeeds on its first attempt only if the
    // worker asks for more time (extend_seconds) and heartbeats keep its lease alive.
    const long = await submit({
      task_type: 'example.sleep',
      payload: { seconds: 2.5 },
      timeout_seconds: 1,
      max_timeout_seconds: 10,
    });
    const failing = await submit({ task_type: 'example.fail', payload: { retryable: false } });

    const output = await runWorker(c.url, 7);

    const status = async (id: string): Promise<TaskJson> =>
      (await api<TaskJson>(c.url, 'GET', `/api/tasks/${id}`)).body;
    for (const id of [...echoes, long]) {
      expect(await status(id), output).toMatchObject({ status: 'succeeded', attempts: 1 });
    }
    expect(await status(failing)).toMatchObject({
      status: 'failed',
      attempts: 1,
      last_error: 'asked to fail for good',
    });
    expect(output).toContain(`${long} succeeded`);
    expect(output).not.toContain('lease lost');
    // Nothing is left running or waiting.
    await eventually(async () => {
      const res = await api<{ tasks: unknown[] }>(c.url, 'GET', '/api/tasks?status=running');
      return res.body.tasks.length === 0 ? true : undefined;
    });
  });
});
