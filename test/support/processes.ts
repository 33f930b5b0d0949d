/**
 * A node as a process of its own (the built CLI), for tests that kill it with SIGKILL: no
 * shutdown, no final write (test/e2e/crash.test.ts, the DAG crash test).
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { TEST_POSTGRES_URL, TEST_REDIS_URL, type BackendName } from './nodes.js';
import { killGroup, spawnChild } from './children.js';

export { dropTestStores } from './nodes.js';

export const CLI = resolve(import.meta.dirname, '../../dist/src/cli.js');

/** Throws a clear error when the built CLI is missing (`npm test` builds it first). */
export function requireBuiltCli(cli: string = CLI): void {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: npm test builds it; alone, run npm run build first`);
}

export interface NodeProcess {
  child: ChildProcess;
  url: string;
}

/** Starts `node dist/src/cli.js <args>` on a free port; resolves once it listens. */
export function startProcess(args: string[]): Promise<NodeProcess> {
  return new Promise((resolvePromise, reject) => {
    const child = spawnChild(
      process.execPath,
      [CLI, ...args, '--port', '0', '--log-level', 'warn', '--builtin-executors', 'false', '--partitions', '8'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    const onData = (chunk: Buffer): void => {
      out += chunk.toString('utf8');
      const m = /listening on (http:\/\/[0-9.]+:\d+)/.exec(out);
      if (m) resolvePromise({ child, url: m[1] as string });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`node exited with ${code} before listening:\n${out}`)));
  });
}

/** SIGKILL; resolves once the process is gone. */
export function kill9(proc: NodeProcess): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return Promise.resolve();
  return new Promise((resolvePromise) => {
    proc.child.once('exit', () => resolvePromise());
    killGroup(proc.child, 'SIGKILL');
  });
}

/**
 * CLI arguments for a node on `backend`: its own schema and key prefix, or its own data
 * directory. On Postgres the node id is fixed, so a process started again after a kill is the
 * same node restarting (as a restarted pod keeps its name), not a second node that would wait
 * out the failure timeout of the first.
 */
export function nodeArgs(backend: BackendName, schema: string, prefix: string, dataDir: string): string[] {
  return backend === 'postgres'
    ? [
        'node',
        '--node-id',
        `node-${prefix}`,
        '--postgres-url',
        TEST_POSTGRES_URL,
        '--postgres-schema',
        schema,
        '--redis-url',
        TEST_REDIS_URL,
        '--redis-prefix',
        prefix,
      ]
    : ['dev', '--data-dir', dataDir];
}

/**
 * A CLI process started with exactly the flags given (nothing appended, unlike
 * `startProcess`), keeping the tail of what it wrote for failure messages. Every one is
 * SIGKILLed when the test process exits, so none outlives the run.
 */
export interface CliProcess extends NodeProcess {
  /** The last `tailChars` characters it wrote to stdout and stderr, interleaved. */
  output(): string;
  /** Resolves when the process has exited (at once if it already has). */
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `node dist/src/cli.js <args>`; resolves once it prints `listening on <url>`. */
export function startCliProcess(
  args: string[],
  options: {
    tailChars?: number;
    startTimeoutMs?: number;
    /** Another build's cli.js. @default CLI */ cli?: string;
    /** A command that runs the node (`ip netns exec <ns>`: the test network's namespace). @default none */
    launcher?: string[];
  } = {},
): Promise<CliProcess> {
  const tailChars = options.tailChars ?? 256 * 1024;
  const [command, ...prefix] = [...(options.launcher ?? []), process.execPath];
  const child = spawnChild(command, [...prefix, options.cli ?? CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) => {
    child.once('exit', (code, signal) => {
      resolveExit({ code, signal });
    });
  });
  return new Promise((resolvePromise, reject) => {
    let listening = false;
    // not a wait: the bound on how long a node process may take to start listening
    const timer = setTimeout(() => {
      if (listening) return;
      killGroup(child, 'SIGKILL');
      reject(new Error(`node did not listen within ${options.startTimeoutMs ?? 60_000} ms:\n${out}`));
    }, options.startTimeoutMs ?? 60_000);
    const onData = (chunk: Buffer): void => {
      out += chunk.toString('utf8');
      if (out.length > tailChars * 2) out = out.slice(-tailChars);
      if (listening) return;
      const m = /listening on (http:\/\/[0-9.]+:\d+)/.exec(out);
      if (!m) return;
      listening = true;
      clearTimeout(timer);
      resolvePromise({
        child,
        url: m[1] as string,
        output: () => out.slice(-tailChars),
        exited: () => exit,
      });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exit.then(({ code, signal }) => {
      if (listening) return;
      clearTimeout(timer);
      reject(new Error(`node exited with ${code ?? signal} before listening:\n${out}`));
    });
  });
}

/** How a CLI run ended and what it wrote. */
export interface CliRun {
  /** The exit code; null when a signal ended it. */
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node dist/src/cli.js <args>` to its end, with `stdin` piped in (nothing by default);
 * resolves with its exit code and output, whatever the code.
 */
export function runCli(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; stdin?: string } = {},
): Promise<CliRun> {
  const child = spawnCli(args, options);
  child.child.stdin?.end(options.stdin ?? '');
  return child.exited().then(({ code }) => ({ code, stdout: child.stdout(), stderr: child.stderr() }));
}

/** A CLI process that runs until it is stopped (`wheelhouse worker`), with what it has written so far. */
export interface RunningCli {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves when the process has exited (at once if it already has). */
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `node dist/src/cli.js <args>` with stdin a pipe; SIGKILLed when the test process exits. */
export function spawnCli(args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): RunningCli {
  const child = spawnChild(process.execPath, [CLI, ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: options.env ?? process.env,
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) => {
    // 'close', not 'exit': by then stdout and stderr have been read to their end.
    child.once('close', (code, signal) => resolveExit({ code, signal }));
  });
  return { child, stdout: () => stdout, stderr: () => stderr, exited: () => exit };
}
