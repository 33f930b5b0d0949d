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
    const { taskId } = JSON.parse(submitted.stdout) as { taskId: string };
    expect(taskId).toMatch(/^[0-9a-f-]{36}$/);
    const waited = await cli('submit', '--type', 'wheelhouse.noop', '--wait');
    expect(waited.stdout).toMatch(/status\s+succeeded/);
    const got = await cli('get', taskId);
    expect(got.stdout).toMatch(new RegExp(`task\\s+${taskId}`));
    const listed = await cli('list', '--type', 'wheelhouse.noop', '--limit', '10');
    expect(listed.stdout.split('\n')[0]).toMatch(/^TASK ID\s+TYPE\s+STATUS/);
    const history = await cli('history', taskId, '--json');
    expect(JSON.parse(history.stdout)).toBeInstanceOf(Array);
  });

  it('retries a cancelled task', async () => {
    const s = await cli('submit', '--type', 'cli.retry', '--delay', '3600', '--json');
    const { taskId } = JSON.parse(s.stdout) as { taskId: string };
    await cli('cancel', taskId);
    expect((await cli('retry', taskId)).stdout).toMatch(/status\s+(ready|pending)/);
    const again = await cli('retry', taskId);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/invalid_transition/);
  });

  it('pauses, resumes and deletes a cron schedule', async () => {
    const s = await cli('submit', '--type', 'cli.cron', '--cron', '0 * * * *', '--json');
    const { taskId } = JSON.parse(s.stdout) as { taskId: string };
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
