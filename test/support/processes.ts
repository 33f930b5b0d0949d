/**
 * A node as a process of its own (the built CLI), for tests that kill it with SIGKILL: no
 * shutdown, no final write. Same pattern as test/e2e/crash.test.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

export const CLI = resolve(import.meta.dirname, '../../dist/src/cli.js');

export interface NodeProcess {
  child: ChildProcess;
  url: string;
}

/** Starts `node dist/src/cli.js <args>` on a free port; resolves once it listens. */
export function startProcess(args: string[]): Promise<NodeProcess> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [CLI, ...args, '--port', '0', '--log-level', 'warn', '--builtin-executors', 'false', '--partitions', '8'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
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
    proc.child.kill('SIGKILL');
  });
}
