/**
 * `wheelhouse submit --file`, run as a user runs it (`node dist/src/cli.js`), against a real
 * node on the embedded backend started in this process: thousands of lines become as many
 * tasks through the batch route, and a line that cannot be a task is named by its number.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createClient, type WheelhouseClient } from '../../src/client/index.js';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { requireBuiltCli, runCli, type CliRun } from '../support/processes.js';

let node: WheelhouseNode;
let client: WheelhouseClient;
let dir: string;

beforeAll(async () => {
  requireBuiltCli();
  node = await startNode({ backend: 'embedded', dataDir: 'memory://', port: 0, logLevel: 'silent' });
  client = createClient({ url: node.url });
  dir = await mkdtemp(join(tmpdir(), 'wheelhouse-cli-file-'));
});

afterAll(async () => {
  await node?.close();
  await rm(dir, { recursive: true, force: true });
});

function cli(args: string[], stdin?: string): Promise<CliRun> {
  return runCli(args, { env: { ...process.env, WHEELHOUSE_URL: node.url }, ...(stdin !== undefined ? { stdin } : {}) });
}

/** `n` task bodies of `taskType`, one per line, due in an hour so no executor takes them meanwhile. */
function lines(taskType: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) =>
    JSON.stringify({ task_type: taskType, payload: { i }, schedule: { type: 'delayed', delay_seconds: 3600 } }),
  );
}

async function countOf(taskType: string): Promise<number> {
  let n = 0;
  for await (const _ of client.list({ taskType, limit: 1000 })) n++;
  return n;
}

describe('wheelhouse submit --file', () => {
  it('submits 2 500 lines as 2 500 tasks in batches and sums up, blank lines skipped', async () => {
    const file = join(dir, 'tasks.ndjson');
    const body = lines('file.bulk', 2500);
    body.splice(1200, 0, '', '   ');
    await writeFile(file, `${body.join('\n')}\n\n`);
    const run = await cli(['submit', '--file', file, '--json']);
    expect(run.code, run.stderr).toBe(0);
    const summary = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(summary).toMatchObject({ submitted: 2500, failed: 0, lines: 2500, not_sent_from_line: null, failures: [] });
    expect(summary.elapsed_ms).toEqual(expect.any(Number));
    expect(summary.per_second).toEqual(expect.any(Number));
    expect(await countOf('file.bulk')).toBe(2500);

    const human = await cli(['submit', '--file', file]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^submitted 2,500 of 2,500 tasks in [\d.]+ s \([\d,]+ tasks\/s\)\n$/);
    expect(await countOf('file.bulk')).toBe(5000);
  });

  it('reads stdin for -, and --ids gives each task created with its line, as JSON lines', async () => {
    const run = await cli(['submit', '--file', '-', '--ids'], `${lines('file.stdin', 3).join('\n\n')}\n`);
    expect(run.code, run.stderr).toBe(0);
    const ids = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { line: number; task_id: string; status: string });
    expect(ids.map((t) => t.line)).toEqual([1, 3, 5]);
    for (const t of ids) expect((await client.get(t.task_id)).taskType).toBe('file.stdin');
    expect(run.stderr).toMatch(/submitted 3 of 3 tasks/);
  });

  it('names a line that is not JSON, sends nothing of its batch and exits 1', async () => {
    const file = join(dir, 'bad-json.ndjson');
    const body = lines('file.badjson', 2500);
    body[1202] = '{"task_type": "file.badjson", oops}';
    await writeFile(file, body.join('\n'));
    const run = await cli(['submit', '--file', file]);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^submitted 1,000 of 1,203 tasks/);
    expect(run.stdout).toMatch(/\n {2}line 1203: not JSON: /);
    expect(run.stdout).toMatch(/nothing from line 1001 on was sent/);
    expect(await countOf('file.badjson')).toBe(1000);
  });

  it("maps the node's refusal of tasks[i] back to the file's line", async () => {
    const file = join(dir, 'bad-field.ndjson');
    const body = lines('file.refused', 2500);
    body[1499] = JSON.stringify({ task_type: 'file.refused', priority: 42 });
    await writeFile(file, body.join('\n'));
    const run = await cli(['submit', '--file', file, '--concurrency', '1', '--json']);
    expect(run.code).toBe(1);
    const summary = JSON.parse(run.stdout) as { submitted: number; not_sent_from_line: number; failures: unknown[] };
    expect(summary.submitted).toBe(1000);
    expect(summary.not_sent_from_line).toBe(2001);
    expect(summary.failures).toEqual([
      {
        from_line: 1001,
        to_line: 2000,
        line: 1500,
        message: expect.stringMatching(/^priority: .*\(validation_failed\)$/) as string,
      },
    ]);
    expect(await countOf('file.refused')).toBe(1000);
  });

  it('refuses a field the API does not know before sending, and a missing file with exit 2', async () => {
    const unknown = await cli(['submit', '--file', '-'], '{"task_type":"file.typo","priorty":1}\n');
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toMatch(/line 1: unknown field "priorty"/);
    expect(await countOf('file.typo')).toBe(0);
    const missing = await cli(['submit', '--file', join(dir, 'nope.ndjson')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--file .*nope\.ndjson: no such file/);
  });
});
