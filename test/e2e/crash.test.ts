import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { api, type BackendName } from '../support/nodes.js';
import { seedPgliteDir } from '../support/pglite-dirs.js';
import {
  dropTestStores,
  kill9,
  nodeArgs,
  requireBuiltCli,
  startProcess,
  type NodeProcess,
} from '../support/processes.js';

/**
 * A real crash: the node runs as its own process (the built CLI) and is killed with SIGKILL
 * right after it answered the submits — no shutdown, no final snapshot. A new process on the
 * same data must hand out every task exactly once.
 */
requireBuiltCli();

describe.each(['postgres', 'embedded'] as BackendName[])('a node killed with SIGKILL, on %s', (backend) => {
  const id = randomBytes(4).toString('hex');
  const schema = `crash_${id}`;
  const prefix = `crash${id}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'wheelhouse-crash-'));
  const args = nodeArgs(backend, schema, prefix, dataDir);
  const running: NodeProcess[] = [];

  // Each test starts from an initialized, unmigrated data directory (test/support/pglite-dirs.ts).
  beforeEach(async () => {
    if (backend === 'embedded') await seedPgliteDir(dataDir);
  });

  afterEach(async () => {
    for (const p of running) if (p.child.exitCode === null && p.child.signalCode === null) await kill9(p);
    running.length = 0;
    if (backend === 'postgres') await dropTestStores(schema, prefix);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('loses no pending task and hands each out once after a restart', async () => {
    const first = await startProcess(args);
    running.push(first);
    const dueSoon = new Date(Date.now() + 1500).toISOString();
    const batch = {
      tasks: [
        ...Array.from({ length: 10 }, (_, i) => ({ task_type: 'crash.t', payload: { i } })),
        ...Array.from({ length: 10 }, (_, i) => ({
          task_type: 'crash.t',
          payload: { i: 10 + i },
          schedule: { type: 'delayed', due_time: dueSoon },
        })),
      ],
    };
    const submitted = await api<{ tasks: { task_id: string }[] }>(first.url, 'POST', '/api/tasks/batch', batch);
    expect(submitted.status).toBe(201);
    const ids = submitted.body.tasks.map((t) => t.task_id).sort();
    await kill9(first);

    const second = await startProcess(args);
    running.push(second);
    const handedOut: string[] = [];
    const deadline = Date.now() + 30_000;
    while (handedOut.length < ids.length && Date.now() < deadline) {
      const polled = await api<{ tasks: { task_id: string; lease_token: string; attempt: number }[] }>(
        second.url,
        'POST',
        '/api/workers/poll',
        {
          worker_id: 'w',
          task_types: ['crash.t'],
          max_tasks: 100,
          wait_ms: 2000,
        },
      );
      for (const t of polled.body.tasks) {
        expect(t.attempt).toBe(1);
        handedOut.push(t.task_id);
      }
    }
    expect(handedOut.sort()).toEqual(ids);
    // Nothing more comes: each was handed out once.
    const extra = await api<{ tasks: unknown[] }>(second.url, 'POST', '/api/workers/poll', {
      worker_id: 'w',
      task_types: ['crash.t'],
      max_tasks: 100,
      wait_ms: 500,
    });
    expect(extra.body.tasks).toEqual([]);
  });

  it('fires each fire time of a schedule in memory and of one out of it exactly once across a SIGKILL', async () => {
    type Polled = { tasks: { task_id: string; lease_token: string }[] };
    const handedOut: string[] = [];
    /** Polls and completes instances for `ms`. */
    const work = async (url: string, ms: number): Promise<void> => {
      const until = Date.now() + ms;
      while (Date.now() < until) {
        const polled = await api<Polled>(url, 'POST', '/api/workers/poll', {
          worker_id: 'w',
          task_types: ['crash.cron'],
          max_tasks: 100,
          wait_ms: 200,
        });
        if (polled.body.tasks.length === 0) continue;
        handedOut.push(...polled.body.tasks.map((t) => t.task_id));
        const results = polled.body.tasks.map((t) => ({
          task_id: t.task_id,
          lease_token: t.lease_token,
          status: 'succeeded',
        }));
        await api(url, 'POST', '/api/workers/complete', { results });
      }
    };
    // A per-second schedule stays in memory on its own timer; one every two seconds leaves
    // memory after each fire and its wheel partition wakes it for the next.
    const nodeArgs = [...args, '--cron-awake-interval-seconds', '1'];
    const first = await startProcess(nodeArgs);
    running.push(first);
    const ids: string[] = [];
    for (const expression of ['* * * * * *', '*/2 * * * * *']) {
      const created = await api<{ task_id: string }>(first.url, 'POST', '/api/tasks', {
        task_type: 'crash.cron',
        schedule: { type: 'cron', cron_expression: expression },
      });
      expect(created.status).toBe(201);
      ids.push(created.body.task_id);
    }
    await work(first.url, 3_000);
    await kill9(first);

    const second = await startProcess(nodeArgs);
    running.push(second);
    await work(second.url, 3_000);
    for (const id of ids) expect((await api(second.url, 'DELETE', `/api/tasks/${id}`)).status).toBe(200);
    await work(second.url, 1_000);

    const listed = await api<{
      tasks: { task_id: string; status: string; fire_time?: string; schedule_id?: string }[];
    }>(second.url, 'GET', '/api/tasks?task_type=crash.cron&limit=1000');
    const instances = listed.body.tasks.filter((t) => t.fire_time !== undefined);
    ids.forEach((id, i) => {
      const fires = instances
        .filter((t) => t.schedule_id === id)
        .map((t) => Date.parse(t.fire_time!))
        .sort((a, b) => a - b);
      // One instance per fire time, no gap across the kill and the restart (the late ones caught up).
      expect(fires.length, id).toBeGreaterThan(i === 0 ? 5 : 2);
      expect(new Set(fires).size).toBe(fires.length);
      for (let k = 1; k < fires.length; k++) expect(fires[k]! - fires[k - 1]!).toBe((i + 1) * 1_000);
    });
    // Every instance that was not cancelled by the DELETEs was handed out, and only once.
    const ran = instances
      .filter((t) => t.status !== 'cancelled')
      .map((t) => t.task_id)
      .sort();
    expect(handedOut.slice().sort()).toEqual(ran);
  });
});
