import type { ChildProcess } from 'node:child_process';

/**
 * Every process the harness started, so the hard timeout (or Ctrl-C) can kill exactly
 * those, by pid, and nothing else.
 */
const live = new Set<ChildProcess>();
let exitHooked = false;

export function trackChild(child: ChildProcess): ChildProcess {
  // However the harness ends — a crash included — no node or worker it started outlives it.
  if (!exitHooked) {
    exitHooked = true;
    process.on('exit', killAllChildren);
  }
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/** SIGKILLs every child still alive. */
export function killAllChildren(): void {
  for (const child of live) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

/** Resolves when `child` exits; after `graceMs` it is sent SIGKILL. */
export function waitForExit(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
