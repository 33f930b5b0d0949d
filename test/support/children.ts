/**
 * Child processes a test starts (node processes, private redis-servers, workers, `npx …`) never
 * outlive the test run.
 *
 * - `spawnChild` starts a child in a process group of its own (`detached: true`), so one kill
 *   reaches everything it started in turn: `npx wheelhouse dev` is npx, then a shell, then the
 *   node, and SIGKILL to npx alone leaves the node running with parent 1.
 * - `killGroup` signals a child's whole group; `killOnExit` SIGKILLs the group when the test
 *   process exits or is told to stop, and what is left of a group once its first process has
 *   exited (the others are orphans of the tree the test started).
 * - Every child carries the run's mark in its environment (`WHEELHOUSE_TEST_RUN`, set by
 *   test/support/mark-children.ts and inherited by whatever it starts), so the run's teardown
 *   (test/support/leftover-processes.ts) finds any that escaped anyway, e.g. when a test
 *   process was SIGKILLed before its handlers ran, kills them and fails the run.
 */
import {
  spawn,
  type ChildProcess,
  type ChildProcessByStdio,
  type SpawnOptions,
  type SpawnOptionsWithStdioTuple,
  type StdioNull,
  type StdioPipe,
} from 'node:child_process';
import type { Readable, Writable } from 'node:stream';

/** The environment variable that marks the processes of one test run (its value: the run's id). */
export const TEST_RUN_ENV = 'WHEELHOUSE_TEST_RUN';

const children = new Set<ChildProcess>();
let exitHooked = false;

function running(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/**
 * Sends `signal` to the process group `child` leads, or to `child` alone when it leads none
 * (it was not started by `spawnChild`). A group outlives its first process while others are in
 * it, so this also reaches what is left of a tree whose first process has exited.
 */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (child.pid === undefined) return;
  try {
    // A negative pid is the group of that id: the child's own group, or none (ESRCH) when the
    // child did not lead one; the kernel does not reuse a pid while a group of that id lives.
    process.kill(-child.pid, signal);
    return;
  } catch {
    // no such group: the child alone, if it still runs
  }
  if (!running(child)) return;
  try {
    child.kill(signal);
  } catch {
    // already gone
  }
}

function killChildrenNow(): void {
  for (const child of children) killGroup(child, 'SIGKILL');
  children.clear();
}

function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.on('exit', killChildrenNow);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    const onSignal = (): void => {
      killChildrenNow();
      // Alone on this signal: do what Node would have done without a listener.
      if (process.listenerCount(signal) === 1) {
        process.off(signal, onSignal);
        process.kill(process.pid, signal);
      }
    };
    process.on(signal, onSignal);
  }
}

/**
 * SIGKILLs `child`'s process group (or `child` alone) when the test process exits, unless it
 * has exited by then; when `child` exits first, SIGKILLs what is left of its group at once.
 */
export function killOnExit(child: ChildProcess): ChildProcess {
  hookExit();
  children.add(child);
  child.once('exit', () => {
    children.delete(child);
    killGroup(child, 'SIGKILL');
  });
  return child;
}

/**
 * `spawn`, for tests: the child leads a process group of its own, carries the run's mark in its
 * environment (added to `options.env` when one is given), and is killed with its group when the
 * test process exits (`killOnExit`). Stop it with `killGroup`, not `child.kill`, when it may
 * have started processes of its own.
 */
export function spawnChild(
  command: string,
  args: readonly string[],
  options: SpawnOptionsWithStdioTuple<StdioNull | StdioPipe, StdioPipe, StdioPipe>,
): ChildProcessByStdio<Writable | null, Readable, Readable>;
export function spawnChild(command: string, args: readonly string[], options?: SpawnOptions): ChildProcess;
export function spawnChild(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  const mark = process.env[TEST_RUN_ENV];
  const env = options.env ?? process.env;
  const child = spawn(command, args, {
    ...options,
    detached: true,
    env: mark === undefined ? env : { ...env, [TEST_RUN_ENV]: mark },
  });
  return killOnExit(child);
}
