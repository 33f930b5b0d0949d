/**
 * The embedded default's data directory, with real processes (the built CLI): one
 * `wheelhouse dev` at a time on a directory — a second one refuses to start, naming the first,
 * which keeps serving — and a lock left by a killed process is taken over. A stop (SIGTERM,
 * even a second one that will not wait) closes the database before the process exits: Postgres's
 * control file says "shut down", and a restart finds every task that was answered 201.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { LOCK_FILE } from '../../src/store/data-dir-lock.js';
import { seedFromTemplate } from '../../src/store/pglite-template.js';
import { killGroup } from '../support/children.js';
import { api } from '../support/nodes.js';
import { freshPgliteDir } from '../support/pglite-dirs.js';
import { requireBuiltCli, spawnCli, startCliProcess, type CliProcess } from '../support/processes.js';
import { stuckRequest } from '../support/stuck-request.js';
import { eventually } from '../support/waits.js';

requireBuiltCli();
/** The template the build ships next to the built CLI's store modules. */
const TEMPLATE_PATH_BUILT = resolve(import.meta.dirname, '../../dist/src/store/pglite-template.tar.gz');

const dirs: string[] = [];
const started: { child: CliProcess['child'] }[] = [];
afterEach(() => {
  for (const p of started.splice(0)) if (p.child.exitCode === null && p.child.signalCode === null) killGroup(p.child);
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function dataDir(): Promise<string> {
  const dir = await freshPgliteDir('wheelhouse-data-dir-');
  dirs.push(dir);
  return dir;
}

function devArgs(dir: string): string[] {
  return [
    'dev',
    '--data-dir',
    dir,
    '--port',
    '0',
    '--log-level',
    'warn',
    '--log-format',
    'json',
    '--builtin-executors',
    'false',
    '--partitions',
    '8',
  ];
}

async function startDev(dir: string): Promise<CliProcess> {
  const node = await startCliProcess(devArgs(dir));
  started.push(node);
  return node;
}

/** Postgres's `DBState` in `global/pg_control` (after system_identifier, two version words). */
const DB_SHUTDOWNED = 1;
function controlState(dir: string): number {
  return readFileSync(join(dir, 'global', 'pg_control')).readUInt32LE(16);
}

/** The lines a node logged at error or above (its log is JSON lines), and any other line that says "error". */
function errorLines(output: string): string[] {
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .filter((line) => {
      try {
        return (JSON.parse(line) as { level?: number }).level! >= 50;
      } catch {
        return /error/i.test(line);
      }
    });
}

async function submit(url: string, taskType: string): Promise<string> {
  const answer = await api<{ task_id: string }>(url, 'POST', '/api/tasks', { task_type: taskType });
  expect(answer.status).toBe(201);
  return answer.body.task_id;
}

describe('wheelhouse dev on a data directory in use', () => {
  it('refuses to start a second node on it, naming the first, which keeps serving', async () => {
    const dir = await dataDir();
    const first = await startDev(dir);
    const taskId = await submit(first.url, 'lock.t');

    const second = spawnCli(devArgs(dir));
    started.push(second);
    const outcome = await eventually(
      () =>
        /listening on/.test(second.stdout()) ? 'listening' : second.child.exitCode !== null ? 'exited' : undefined,
      60_000,
      'the second node to exit or to listen',
    );
    expect(outcome, `the second node started on a directory in use:\n${second.stdout()}`).toBe('exited');
    const { code } = await second.exited();
    expect(code).not.toBe(0);
    expect(second.stderr()).toContain(
      `wheelhouse: the data directory ${dir} is in use by process ${first.child.pid} (started `,
    );
    expect(second.stderr()).toContain('stop it first');

    // The first never noticed.
    expect((await api(first.url, 'GET', '/readyz')).status).toBe(200);
    expect((await api(first.url, 'GET', `/api/tasks/${taskId}`)).status).toBe(200);
    await submit(first.url, 'lock.t');

    // Stopped, it lets the directory go.
    first.child.kill('SIGTERM');
    expect((await first.exited()).code).toBe(0);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    expect(errorLines(first.output())).toEqual([]);
  }, 120_000);

  it('takes over the lock of a node killed with SIGKILL, and of a process long gone', async () => {
    const dir = await dataDir();
    // A lock from a process that has exited.
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    writeFileSync(
      join(dir, LOCK_FILE),
      JSON.stringify({ pid: gone, hostname: hostname(), bootId: null, startTicks: null, token: 'old' }),
    );
    const first = await startDev(dir);
    const taskId = await submit(first.url, 'lock.t');
    killGroup(first.child, 'SIGKILL');
    await first.exited();
    const left = JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')) as { pid: number };
    expect(left.pid).toBe(first.child.pid);

    const second = await startDev(dir);
    const taken = JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')) as { pid: number };
    expect(taken.pid).toBe(second.child.pid);
    expect((await api(second.url, 'GET', `/api/tasks/${taskId}`)).status).toBe(200);
    second.child.kill('SIGTERM');
    expect((await second.exited()).code).toBe(0);
  }, 120_000);
});

describe('wheelhouse dev in a new directory', () => {
  it('starts from the template the build ships, not from an initdb of its own', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wheelhouse-data-dir-new-'));
    dirs.push(dir);
    const node = await startDev(join(dir, 'data'));
    await submit(node.url, 'new.t');
    node.child.kill('SIGTERM');
    expect((await node.exited()).code).toBe(0);
    // initdb draws a new system identifier each time; the template's copies all carry its own.
    const unpacked = join(dir, 'unpacked');
    mkdirSync(unpacked);
    seedFromTemplate(unpacked, TEMPLATE_PATH_BUILT);
    const systemIdentifier = (d: string): bigint => readFileSync(join(d, 'global', 'pg_control')).readBigUInt64LE(0);
    expect(systemIdentifier(join(dir, 'data'))).toBe(systemIdentifier(unpacked));
  }, 120_000);
});

describe('wheelhouse dev stopping', () => {
  it('closes the database on SIGTERM during a burst of submits: a restart finds every task answered 201', async () => {
    const dir = await dataDir();
    const first = await startDev(dir);
    const accepted: string[] = [];
    let refused = false;
    const submitters = Array.from({ length: 8 }, async () => {
      while (!refused) {
        try {
          const answer = await api<{ task_id: string }>(first.url, 'POST', '/api/tasks', { task_type: 'burst.t' });
          if (answer.status === 201) accepted.push(answer.body.task_id);
        } catch {
          refused = true; // the node stopped listening
        }
      }
    });
    await eventually(() => (accepted.length >= 200 ? true : undefined), 60_000, '200 submits answered');
    first.child.kill('SIGTERM');
    const { code } = await first.exited();
    refused = true;
    await Promise.all(submitters);
    expect(code).toBe(0);
    expect(controlState(dir)).toBe(DB_SHUTDOWNED);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);

    const second = await startDev(dir);
    const missing: string[] = [];
    for (const id of accepted) if ((await api(second.url, 'GET', `/api/tasks/${id}`)).status !== 200) missing.push(id);
    expect(missing).toEqual([]);
    await submit(second.url, 'burst.t');
    second.child.kill('SIGTERM');
    expect((await second.exited()).code).toBe(0);
    expect(errorLines(second.output())).toEqual([]);
    expect(controlState(dir)).toBe(DB_SHUTDOWNED);
  }, 180_000);

  it('closes the database even when a second SIGTERM will not wait for the graceful stop', async () => {
    const dir = await dataDir();
    const node = await startDev(dir);
    const port = Number(new URL(node.url).port);
    const socket = await stuckRequest(port);
    node.child.kill('SIGTERM');
    await eventually(() => (node.output().includes('shutting down') ? true : undefined), 10_000, 'the stop to begin');
    node.child.kill('SIGTERM');
    const { code } = await node.exited();
    socket.destroy();
    expect(code).toBe(130);
    expect(controlState(dir)).toBe(DB_SHUTDOWNED);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  }, 120_000);
});
