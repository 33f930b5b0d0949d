/**
 * The CLI's client verbs, run as a user runs them (`node dist/src/cli.js <verb>`), against a
 * real node on the embedded backend started in this process.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { TEST_POSTGRES_URL } from '../support/nodes.js';
import { CLI, requireBuiltCli } from '../support/processes.js';

const run = promisify(execFile);

let node: WheelhouseNode;
let dir: string;

beforeAll(async () => {
  requireBuiltCli();
  node = await startNode({ backend: 'embedded', dataDir: 'memory://', port: 0, logLevel: 'silent' });
  dir = await mkdtemp(join(tmpdir(), 'wheelhouse-cli-'));
});

afterAll(async () => {
  await node?.close();
  await rm(dir, { recursive: true, force: true });
});

/** Runs the CLI; resolves with its exit code and output, whatever the code. */
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

describe('wheelhouse CLI verbs', () => {
  it('submits a task, waits for it and reads it back, as JSON and as text', async () => {
    const submitted = await cli(
      'submit',
      '--type',
      'wheelhouse.noop',
      '--delay',
      '0.2',
      '--payload',
      '{"n":1}',
      '--json',
    );
    expect(submitted.code).toBe(0);
    const { task_id: taskId } = JSON.parse(submitted.stdout) as { task_id: string };
    expect(taskId).toMatch(/^[0-9a-f-]{36}$/);
    const waited = await cli('submit', '--type', 'wheelhouse.noop', '--wait');
    expect(waited.stdout).toMatch(/status\s+succeeded/);
    const got = await cli('get', taskId);
    expect(got.stdout).toMatch(new RegExp(`task\\s+${taskId}`));
    const listed = await cli('list', '--type', 'wheelhouse.noop', '--limit', '10');
    expect(listed.stdout.split('\n')[0]).toMatch(/^TASK ID\s+TYPE\s+STATUS/);
    const history = await cli('history', taskId, '--json');
    expect(JSON.parse(history.stdout)).toMatchObject({ executions: [expect.objectContaining({ attempt: 1 })] });
  });

  it('retries a cancelled task', async () => {
    const s = await cli('submit', '--type', 'cli.retry', '--delay', '3600', '--json');
    const { task_id: taskId } = JSON.parse(s.stdout) as { task_id: string };
    await cli('cancel', taskId);
    expect((await cli('retry', taskId)).stdout).toMatch(/status\s+(ready|pending)/);
    const again = await cli('retry', taskId);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/invalid_transition/);
  });

  it('pauses, resumes and deletes a cron schedule', async () => {
    const s = await cli('submit', '--type', 'cli.cron', '--cron', '0 * * * *', '--json');
    const { task_id: taskId } = JSON.parse(s.stdout) as { task_id: string };
    expect((await cli('pause', taskId)).stdout).toMatch(/status\s+paused/);
    expect((await cli('resume', taskId)).stdout).toMatch(/status\s+active/);
    expect((await cli('cancel', taskId)).stdout).toMatch(/cancelled/);
  });

  it('submits a DAG from a file', async () => {
    const file = join(dir, 'dag.json');
    await writeFile(
      file,
      JSON.stringify({
        tasks: [
          { ref: 'a', task_type: 'cli.dag' },
          { ref: 'b', task_type: 'cli.dag', depends_on: ['a'] },
        ],
      }),
    );
    const out = await cli('dag', 'submit', file);
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/^dag [0-9a-f-]{36}/);
    expect(out.stdout).toMatch(/\nb\s+[0-9a-f-]{36}\s+blocked/);
  });

  it('reads a graph back with dag get, as text and as the API answers it', async () => {
    const file = join(dir, 'dag-get.json');
    await writeFile(
      file,
      JSON.stringify({
        tasks: [
          { ref: 'first', task_type: 'cli.dagget', schedule: { type: 'delayed', delay_seconds: 3600 } },
          { ref: 'second', task_type: 'cli.dagget', depends_on: ['first'] },
        ],
      }),
    );
    const dagId = (JSON.parse((await cli('dag', 'submit', file, '--json')).stdout) as { dag_id: string }).dag_id;
    const text = await cli('dag', 'get', dagId);
    expect(text.code).toBe(0);
    expect(text.stdout.split('\n')[0]).toBe(`dag ${dagId}  running  (pending 1, blocked 1)`);
    expect(text.stdout).toMatch(/\nsecond\s+[0-9a-f-]{36}\s+cli\.dagget\s+blocked\s+first\s+0\n/);
    const json = await cli('dag', 'get', dagId, '--json');
    expect(JSON.parse(json.stdout)).toEqual(await (await fetch(`${node.url}/api/dags/${dagId}`)).json());
    const usage = await cli('dag', 'get');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/wheelhouse dag get <dag_id>/);
  });

  it('explains a task: the sentence, then the facts; --json is the API answer', async () => {
    const submitted = await cli('submit', '--type', 'cli.explain', '--delay', '3600', '--json');
    const taskId = (JSON.parse(submitted.stdout) as { task_id: string }).task_id;
    const text = await cli('explain', taskId);
    expect(text.code).toBe(0);
    const [sentence, ...facts] = text.stdout.trimEnd().split('\n');
    expect(sentence).toMatch(/^Due in .+ \(at \S+Z\) /);
    expect(facts).toContain(`task      ${taskId}`);
    expect(facts).toContain('status    pending (scheduled)');
    expect(facts.find((l) => l.startsWith('due '))).toMatch(/^due +\S+Z \(partition \d+ on \S+/);
    const json = JSON.parse((await cli('explain', taskId, '--json')).stdout) as Record<string, unknown>;
    const api = (await (await fetch(`${node.url}/api/tasks/${taskId}/explain`)).json()) as Record<string, unknown>;
    expect(Object.keys(json).sort()).toEqual(Object.keys(api).sort());
    expect(json).toMatchObject({ task_id: taskId, state: 'scheduled' });
    expect(json.sentence).toMatch(/^Due in /);
    expect((await cli('cancel', taskId)).code).toBe(0);
    expect((await cli('explain', taskId)).stdout).toMatch(/^status +cancelled \(cancelled\)$/m);
    const usage = await cli('explain');
    expect(usage.code).toBe(2);
    const missing = await cli('explain', '00000000-0000-7000-8000-000000000000');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/404 task_not_found/);
  });

  it("prints with --json what the API answers, in the API's own field names", async () => {
    /** The API's answer to a GET, as a script reading the API sees it. */
    const apiGet = async (path: string): Promise<unknown> => (await fetch(`${node.url}${path}`)).json();
    const snakeOnly = (value: unknown): void => {
      for (const key of Object.keys(value as object)) expect(key, JSON.stringify(value)).toMatch(/^[a-z_]+$/);
    };

    const submitted = JSON.parse(
      (await cli('submit', '--type', 'cli.json', '--delay', '3600', '--payload', '{"camelCase":1}', '--json')).stdout,
    ) as Record<string, unknown>;
    expect(Object.keys(submitted).sort()).toEqual(['due_time', 'status', 'task_id']);
    const id = submitted.task_id as string;

    const got = JSON.parse((await cli('get', id, '--json')).stdout) as Record<string, unknown>;
    expect(got).toEqual(await apiGet(`/api/tasks/${id}`));
    expect(got.payload).toEqual({ camelCase: 1 }); // the task's own data, as it was sent
    snakeOnly(got);

    const listed = JSON.parse((await cli('list', '--type', 'cli.json', '--json')).stdout) as {
      tasks: Record<string, unknown>[];
      next_token: string | null;
    };
    expect(Object.keys(listed).sort()).toEqual(['next_token', 'tasks']);
    expect(listed.tasks).toEqual(((await apiGet('/api/tasks?task_type=cli.json')) as { tasks: unknown[] }).tasks);

    const history = JSON.parse((await cli('history', id, '--json')).stdout) as Record<string, unknown>;
    expect(history).toEqual(await apiGet(`/api/tasks/${id}/history`));

    const paused = JSON.parse(
      (await cli('submit', '--type', 'cli.json', '--cron', '0 * * * *', '--json')).stdout,
    ) as Record<string, unknown>;
    const pausedTask = JSON.parse((await cli('pause', paused.task_id as string, '--json')).stdout) as object;
    snakeOnly(pausedTask);
    expect(pausedTask).toMatchObject({ task_id: paused.task_id, status: 'paused', schedule_type: 'cron' });
    const cancelled = JSON.parse((await cli('cancel', id, '--json')).stdout) as object;
    snakeOnly(cancelled);

    const file = join(dir, 'json-dag.json');
    await writeFile(file, JSON.stringify({ tasks: [{ ref: 'only', task_type: 'cli.json' }] }));
    const dag = JSON.parse((await cli('dag', 'submit', file, '--json')).stdout) as {
      dag_id: string;
      tasks: Record<string, unknown>[];
    };
    expect(dag.dag_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(dag.tasks[0]).toMatchObject({ ref: 'only', status: 'pending' });
    expect(dag.tasks[0]?.task_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('says what is wrong: exit 2 for a usage error, 1 with the catalogue code for an API error', async () => {
    const usage = await cli('submit');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/needs --type/);
    const missing = await cli('get', '00000000-0000-7000-8000-000000000000');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/404 task_not_found/);
    const invalid = await cli('submit', '--type', 'x', '--cron', 'not a cron');
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/400 invalid_cron/);
  });
});

describe('wheelhouse migrate', () => {
  it('applies the migrations to a schema once, then finds it up to date', async () => {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    const args = ['migrate', '--postgres-url', TEST_POSTGRES_URL, '--postgres-schema', schema];
    try {
      const first = await cli(...args);
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(/applied 000001_init\.sql, .* to schema/);
      const second = await cli(...args);
      expect(second.stdout).toMatch(/is up to date/);
    } finally {
      const client = new pg.Client({ connectionString: TEST_POSTGRES_URL });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    }
  });
});
