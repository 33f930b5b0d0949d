/**
 * README.md as a new user follows it (issue 32): every shell and code block of the quick start
 * (the CLI and `wheelhouse worker` with it, up to its first `###`) and of "A cluster" runs as
 * written, in a temporary directory, and fails the test when it does not. How the blocks are read
 * (skip markers, files, expected output): test/support/readme-blocks.ts.
 *
 * Each command of a shell block runs in bash (`set -o pipefail`), one after another, the
 * variables it exports carried to the next; it must exit 0, and each output line the block
 * shows must appear in what it printed (its commands and what they started with `&`). What
 * a block started in the background is stopped (SIGTERM to its process group, then SIGKILL)
 * at the block's end. Code blocks that name a file are written to it first.
 *
 * What this test puts in for the user, and nothing else:
 * - `npx wheelhouse` is `wheelhouse`, a script on PATH that runs `node <repo>/dist/src/cli.js`
 *   (what `npx` finds in an install); `node dist/…` is `node <repo>/dist/…`; a line
 *   `npm run build` is left out (`npm test` builds dist before vitest runs).
 * - `npm start` (the quick start's first block, marked skip) is the node this test starts:
 *   `wheelhouse dev` with the repository's config/dev.json, as `npm start` runs it, its data
 *   in the temporary directory. Its banner and its request lines are checked against what the
 *   README says it prints.
 * - Port 7070 is that node's port (and WHEELHOUSE_URL points the CLI at it, as its default
 *   would), 7071–7073 are free ports; `<task_id>` is the first task id of the last earlier
 *   command of the block that printed one.
 * - `curl` without `-f` is `curl --fail-with-body`: an answer of 4xx or 5xx fails the command,
 *   as the user would see it fail.
 * - The temporary directory holds a copy of the repository's config/ (what `node dist/src/cli.js
 *   node` reads there: config/node.json).
 * - "A cluster" runs on the test Postgres and Redis (WHEELHOUSE_POSTGRES_URL and
 *   WHEELHOUSE_REDIS_URL), and the schema and key prefix it exports are this test's own,
 *   dropped at the end.
 */
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  closeSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_RUN_ENV, killGroup } from '../support/children.js';
import { TEST_POSTGRES_URL, TEST_REDIS_URL } from '../support/nodes.js';
import { CLI, dropTestStores, requireBuiltCli, startCliProcess, type CliProcess } from '../support/processes.js';
import {
  outputPattern,
  readmeBlocks,
  sectionLines,
  type ReadmeBlock,
  type ShellBlock,
} from '../support/readme-blocks.js';
import { eventually } from '../support/waits.js';

const REPO = resolve(import.meta.dirname, '../..');
const README = readFileSync(join(REPO, 'README.md'), 'utf8');
/** The dashboard's pages: the sections of its navigation (src/dashboard/app.ts). */
const DASHBOARD_PAGES = [
  ...readFileSync(join(REPO, 'src/dashboard/app.ts'), 'utf8').matchAll(/\{ path: '(\w+)', title: /g),
].map((m) => m[1]);

/** The longest one command of a block may take. */
const COMMAND_TIMEOUT_MS = 60_000;
const TASK_ID = /\b[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}\b/;

/** A port no one listens on now. */
function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolvePort(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** The environment the blocks run in: this one without any WHEELHOUSE_ setting of its own. */
function blockEnv(dir: string, extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('WHEELHOUSE_') || k === 'WHEELHOUSE_CHECK_RESPONSES') env[k] = v;
  }
  return { ...env, PATH: `${join(dir, 'bin')}:${process.env.PATH ?? ''}`, ...extra };
}

interface Substitutions {
  ports: Map<string, number>;
  replace?: [RegExp, string][];
}

/** The command as this test runs it (the substitutions of the header). */
function substitute(text: string, subs: Substitutions, lastTaskId: string | null): string {
  let out = text
    .replace(/\bnpx wheelhouse\b/g, 'wheelhouse')
    .replace(/\bnode dist\//g, `node ${REPO}/dist/`)
    .replace(/\bcurl (?!-\w*f\b)/g, 'curl --fail-with-body ');
  for (const [port, actual] of subs.ports) out = out.replace(new RegExp(`\\b${port}\\b`, 'g'), String(actual));
  for (const [pattern, value] of subs.replace ?? []) out = out.replace(pattern, value);
  if (out.includes('<task_id>')) {
    if (lastTaskId === null) throw new Error(`no earlier command printed a task id for: ${text}`);
    out = out.replaceAll('<task_id>', lastTaskId);
  }
  return out;
}

interface BlockRun {
  /** Everything the block's commands (and what they started) printed, in command order. */
  output(): string;
}

/**
 * Runs a shell block command by command in `dir`; throws naming the README line of the first
 * command that does not exit 0, or of an output line never printed.
 */
async function runShellBlock(block: ShellBlock, dir: string, env: NodeJS.ProcessEnv, subs: Substitutions) {
  const children: ChildProcess[] = [];
  const outFiles: string[] = [];
  const state = join(dir, `.block-${block.line}.env`);
  writeFileSync(state, '');
  const run: BlockRun = { output: () => outFiles.map((f) => readFileSync(f, 'utf8')).join('') };
  let lastTaskId: string | null = null;
  try {
    for (const [n, command] of block.commands.entries()) {
      if (/^\s*npm run build\s*$/.test(command.text)) continue;
      const text = substitute(command.text, subs, lastTaskId);
      const outFile = join(dir, `.block-${block.line}-${n}.out`);
      outFiles.push(outFile);
      const fd = openSync(outFile, 'w');
      const script = `set -o pipefail\nsource ${state}\n${text}\nstatus=$?\nexport -p > ${state}\nexit $status\n`;
      const child = spawnCommand(script, dir, env, fd);
      closeSync(fd);
      children.push(child);
      // The bound on one command (a node that never gets ready would keep `until curl …` going).
      const code = await new Promise<number | string | null>((done) => {
        const timer = setTimeout(() => done(`no end within ${COMMAND_TIMEOUT_MS / 1000} s`), COMMAND_TIMEOUT_MS);
        child.once('exit', (c) => {
          clearTimeout(timer);
          done(c);
        });
      });
      const printed = readFileSync(outFile, 'utf8');
      if (code !== 0) {
        // What the whole block printed: a node started in the background says why it is not up.
        throw new Error(
          `README.md line ${command.line}: \`${command.text}\` exited ${code}, as run: \`${text}\`\n${run.output().slice(-6000)}`,
        );
      }
      const id = TASK_ID.exec(printed);
      if (id) lastTaskId = id[0];
    }
    for (const { pattern, line } of block.expected) {
      const regex = outputPattern(pattern);
      const found = await eventually(
        () =>
          run
            .output()
            .split('\n')
            .some((l) => regex.test(l))
            ? true
            : undefined,
        30_000,
        `an output line matching "${pattern}"`,
        100,
      ).catch(() => false);
      if (!found) {
        throw new Error(`README.md line ${line}: no output line matches "${pattern}":\n${run.output().slice(-4000)}`);
      }
    }
  } finally {
    await stopAll(children);
  }
}

/** Process groups the blocks started, SIGKILLed should this test process exit before stopAll. */
const groups = new Set<number>();
process.on('exit', () => {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

/**
 * `bash -c script` leading a process group of its own, marked as this run's (TEST_RUN_ENV), its
 * output to `fd`. Not `spawnChild`: that kills what is left of the group as soon as bash
 * exits, and a block's `node … &` must outlive the command that started it.
 */
function spawnCommand(script: string, cwd: string, env: NodeJS.ProcessEnv, fd: number): ChildProcess {
  const mark = process.env[TEST_RUN_ENV];
  const child = spawn('bash', ['-c', script], {
    cwd,
    env: mark === undefined ? env : { ...env, [TEST_RUN_ENV]: mark },
    stdio: ['ignore', fd, fd],
    detached: true,
  });
  if (child.pid !== undefined) groups.add(child.pid);
  return child;
}

/** Whether a process of the group `child` leads is still alive. */
function groupAlive(child: ChildProcess): boolean {
  try {
    process.kill(-(child.pid as number), 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM to each process group a block started; SIGKILL to what is left of them after 10 s. */
async function stopAll(children: ChildProcess[]): Promise<void> {
  for (const child of children) killGroup(child, 'SIGTERM');
  await eventually(
    () => (children.some(groupAlive) ? undefined : true),
    10_000,
    'the block’s processes to stop',
    50,
  ).catch(() => undefined);
  for (const child of children) {
    killGroup(child, 'SIGKILL');
    if (child.pid !== undefined) groups.delete(child.pid);
  }
}

async function runBlocks(blocks: ReadmeBlock[], dir: string, env: NodeJS.ProcessEnv, subs: Substitutions) {
  for (const block of blocks) {
    if (block.kind === 'file') writeFileSync(join(dir, block.name), block.text);
    else if (block.kind === 'shell') await runShellBlock(block, dir, env, subs);
  }
}

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'wheelhouse-readme-'));
  // The option files a command run in the repository reads (config/node.json, config/dev.json).
  cpSync(join(REPO, 'config'), join(dir, 'config'), { recursive: true });
  mkdirSync(join(dir, 'bin'));
  const shim = join(dir, 'bin', 'wheelhouse');
  writeFileSync(shim, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"\n`);
  chmodSync(shim, 0o755);
  return dir;
}

describe('README.md, followed as written', () => {
  let dir: string;
  let dev: CliProcess;
  beforeAll(async () => {
    requireBuiltCli();
    dir = tempDir();
    dev = await startCliProcess([
      'dev',
      '--config',
      join(REPO, 'config/dev.json'),
      '--data-dir',
      join(dir, '.wheelhouse'),
      '--port',
      '0',
    ]);
  });
  afterAll(async () => {
    if (dev !== undefined) {
      killGroup(dev.child, 'SIGTERM');
      await dev.exited();
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('quick start: npm start prints where the API, the docs and the dashboard pages are', async () => {
    // The banner follows the `listening on` line that startCliProcess waits for.
    const banner = await eventually(() => (/^\s+dashboard:/m.test(dev.output()) ? dev.output() : undefined));
    const urls = [...banner.matchAll(/^\s+(API|docs|dashboard):\s+(\S+)(.*)$/gm)];
    expect(urls.map((m) => m[1])).toEqual(['API', 'docs', 'dashboard']);
    for (const [, name, url, rest] of urls) {
      const res = await fetch(url as string);
      expect(res.status, `${name} ${url}`).toBe(200);
      const type = res.headers.get('content-type') ?? '';
      expect(type, `${name} ${url}`).toMatch(name === 'API' ? /json/ : /html/);
      // The dashboard's pages it names are pages of the dashboard, not its JSON routes.
      for (const page of (rest as string).match(/\/admin[^\s,)]*/g) ?? []) {
        expect(page).toMatch(/^\/admin#\/\w+$/);
        expect(DASHBOARD_PAGES, page).toContain(page.slice('/admin#/'.length));
      }
    }
  });

  it('quick start, the CLI and the worker: every block runs as written', { timeout: 240_000 }, async () => {
    const { lines, firstLine } = sectionLines(README, 'Quick start', { untilSubsection: true });
    const blocks = readmeBlocks(lines, firstLine);
    expect(blocks.filter((b) => b.kind === 'shell').length).toBeGreaterThanOrEqual(5);
    expect(blocks.some((b) => b.kind === 'file' && b.name === 'tasks.mjs')).toBe(true);
    const port = Number(new URL(dev.url).port);
    const env = blockEnv(dir, { WHEELHOUSE_URL: dev.url });
    await runBlocks(blocks, dir, env, { ports: new Map([['7070', port]]) });
    // `npm start`'s log: a readable line for each request people and clients make.
    expect(dev.output()).toMatch(/POST \/api\/tasks/);
    expect(dev.output()).toMatch(/GET \/api\/tasks\/[0-9a-f-]{36}\/history/);
  });

  it('a cluster: three nodes on their own schema and key prefix', { timeout: 240_000 }, async () => {
    const { lines, firstLine } = sectionLines(README, 'A cluster');
    const blocks = readmeBlocks(lines, firstLine);
    expect(blocks.filter((b) => b.kind === 'shell').length).toBe(1);
    const id = randomBytes(4).toString('hex');
    const schema = `readme_${id}`;
    const prefix = `readme${id}`;
    const ports = new Map<string, number>();
    for (const p of ['7071', '7072', '7073']) ports.set(p, await freePort());
    const env = blockEnv(dir, { WHEELHOUSE_POSTGRES_URL: TEST_POSTGRES_URL, WHEELHOUSE_REDIS_URL: TEST_REDIS_URL });
    try {
      await runBlocks(blocks, dir, env, {
        ports,
        replace: [
          [/(WHEELHOUSE_POSTGRES_SCHEMA=)\S+/, `$1${schema}`],
          [/(WHEELHOUSE_REDIS_PREFIX=)\S+/, `$1${prefix}`],
        ],
      });
    } finally {
      await dropTestStores(schema, prefix);
    }
  });
});
