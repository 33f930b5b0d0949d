/**
 * `wheelhouse limits …` run as a user runs it (`node dist/src/cli.js`), against a real node on
 * the embedded backend started in this process: set, get, list, delete, pause-type and
 * resume-type, as JSON and as text, and the usage errors.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { CLI, requireBuiltCli } from '../support/processes.js';

const run = promisify(execFile);

let node: WheelhouseNode;

beforeAll(async () => {
  requireBuiltCli();
  node = await startNode({ backend: 'embedded', dataDir: 'memory://', port: 0, logLevel: 'silent' });
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

describe('wheelhouse limits', () => {
  it('sets a limit from its flags and reads it back, as JSON and as text', async () => {
    const set = await cli(
      'limits',
      'set',
      'stripe-api',
      '--concurrency',
      '5',
      '--rate',
      '100/60s',
      '--burst',
      '10',
      '--on-limit',
      'cancel_new',
      '--weight',
      '2',
      '--json',
    );
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toEqual({
      name: 'stripe-api',
      declared_as: 'stripe-api',
      concurrency: 5,
      rate: { limit: 100, period_seconds: 60, burst: 10 },
      on_limit: 'cancel_new',
      weight: 2,
      running: 0,
      waiting: 0,
      // The key's actor counts the starts of its rate (none yet).
      starts_last_period: 0,
    });
    const got = await cli('limits', 'get', 'stripe-api');
    expect(got.stdout).toMatch(/concurrency\s+5\n/);
    expect(got.stdout).toMatch(/rate\s+100\/60s \+10\n/);
    expect((await cli('limits', 'set', 'per-second', '--rate', '5/s', '--json')).stdout).toContain(
      '"period_seconds": 1',
    );
  });

  it('lists under a prefix, as a table and as JSON', async () => {
    await cli('limits', 'set', 'cli:a', '--concurrency', '1');
    await cli('limits', 'set', 'cli:*', '--concurrency', '0');
    const text = await cli('limits', 'list', '--prefix', 'cli:');
    expect(text.stdout.split('\n')[0]).toMatch(/^NAME\s+CONCURRENCY\s+RATE\s+ON LIMIT\s+WEIGHT/);
    expect(text.stdout).toMatch(/cli:\*\s+0 \(paused\)/);
    const json = JSON.parse((await cli('limits', 'list', '--prefix', 'cli:', '--json')).stdout) as {
      limits: { name: string }[];
      next_token: null;
    };
    expect(json.limits.map((l) => l.name)).toEqual(['cli:*', 'cli:a']);
  });

  it('deletes, and says 404 not_found for a name not declared', async () => {
    await cli('limits', 'set', 'gone', '--concurrency', '1');
    const deleted = await cli('limits', 'delete', 'gone', '--json');
    expect(JSON.parse(deleted.stdout)).toEqual({ ok: true });
    const again = await cli('limits', 'delete', 'gone');
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/404 not_found/);
  });

  it('pauses and resumes a task type', async () => {
    const paused = await cli('limits', 'pause-type', 'email.send', '--json');
    expect(JSON.parse(paused.stdout)).toMatchObject({ task_type: 'email.send', paused: true });
    expect((await cli('limits', 'resume-type', 'email.send')).stdout).toBe('email.send  not paused\n');
  });

  it('answers bad flags with exit 2 and the limits usage', async () => {
    const bad = await cli('limits', 'set', 'k', '--rate', 'fast');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--rate must be/);
    expect(bad.stderr).toMatch(/wheelhouse limits set <name>/);
    expect((await cli('limits', 'frobnicate')).code).toBe(2);
    const refused = await cli('limits', 'set', 'k', '--concurrency', '2000000');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/400 validation_failed: concurrency/);
  });
});
