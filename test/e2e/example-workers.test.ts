/**
 * The examples in `examples/` run end to end as their READMEs say, against a real node (the
 * embedded backend, in this process): the TypeScript worker takes its tasks over the channel,
 * and stops gracefully on SIGTERM.
 */
import { resolve } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createClient, type WheelhouseClient } from '../../src/client/index.js';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { spawnChild } from '../support/children.js';
import { requireBuiltCli } from '../support/processes.js';
import { eventually } from '../support/waits.js';

const TS_WORKER = resolve(import.meta.dirname, '../../dist/examples/typescript-worker/worker.js');

let node: WheelhouseNode;
let client: WheelhouseClient;

beforeAll(async () => {
  requireBuiltCli(TS_WORKER);
  node = await startNode({ backend: 'embedded', dataDir: 'memory://', port: 0, logLevel: 'silent' });
  client = createClient({ url: node.url });
});

afterAll(async () => {
  await node?.close();
});

describe('examples', () => {
  it('the TypeScript worker runs example.greet tasks over the channel and stops on SIGTERM', async () => {
    const child = spawnChild(process.execPath, [TS_WORKER, '--urls', node.url, '--worker-id', 'example-ts'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    const exited = new Promise<number | null>((done) => child.once('close', (code) => done(code)));

    const ids = await Promise.all(
      ['Ada', 'Grace', 'Edsger'].map(
        async (name) => (await client.submit({ taskType: 'example.greet', payload: { name } })).taskId,
      ),
    );
    for (const id of ids) await client.waitFor(id, 'succeeded', { timeoutMs: 20_000 });
    expect((await client.get(ids[0]!)).result).toEqual({ greeting: 'Hello, Ada!' });
    const bad = await client.submit({ taskType: 'example.greet', payload: { nom: 'x' } });
    expect((await client.waitFor(bad.taskId, 'failed', { timeoutMs: 20_000 })).lastError).toBe(
      'payload.name must be a string',
    );
    expect((await client.historyPage(ids[0]!)).executions[0]?.workerId).toBe('example-ts');
    await eventually(() => (out.includes('greeted Edsger') ? true : undefined), 5_000, 'the last greeting');

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    // Over the channel: not one poll.
    expect(out).toMatch(/stopped: 3 succeeded, 1 failed, 4 reported, 0 polls, [1-4] result frames/);
  });
});
