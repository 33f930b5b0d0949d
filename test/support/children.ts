/**
 * Child processes a test starts (node processes, private redis-servers) never outlive the test
 * run: each is SIGKILLed when the test process exits or is told to stop.
 */
import type { ChildProcess } from 'node:child_process';

const children = new Set<ChildProcess>();
let exitHooked = false;

function killChildrenNow(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  }
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

/** SIGKILLs `child` when the test process exits, unless it has exited by then. */
export function killOnExit(child: ChildProcess): ChildProcess {
  hookExit();
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}
