/**
 * The run's check that no process a test started outlives it (vitest `globalSetup`).
 *
 * The setup gives the run an id: the vitest process's pid and random bytes, so two runs on one
 * machine never share one. test/support/mark-children.ts sets it as `WHEELHOUSE_TEST_RUN` in
 * each test process's environment after it started (the test processes themselves do not carry
 * it), so every process a test starts carries it, and every process that one starts, and
 * `/proc/<pid>/environ` still shows it once the process is orphaned to pid 1. The teardown lists
 * the processes with this run's mark, SIGKILLs each and fails the run naming them.
 *
 * Linux only (it reads /proc); elsewhere it finds nothing.
 */
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

import type { TestProject } from 'vitest/node';

import { TEST_RUN_ENV } from './children.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The id that marks this run's processes (`WHEELHOUSE_TEST_RUN`). */
    wheelhouseTestRun: string;
  }
}

interface MarkedProcess {
  pid: number;
  ppid: number;
  command: string;
}

/** The processes whose environment carries `WHEELHOUSE_TEST_RUN=<runId>`. */
async function markedProcesses(runId: string): Promise<MarkedProcess[]> {
  const mark = `${TEST_RUN_ENV}=${runId}`;
  let pids: string[];
  try {
    pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  const found: MarkedProcess[] = [];
  for (const pid of pids) {
    try {
      // A zombie's environ reads empty: a process that has exited is not counted.
      const environ = await readFile(`/proc/${pid}/environ`, 'latin1');
      if (!environ.split('\0').includes(mark)) continue;
      const command = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' ').trim();
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      // pid (comm) state ppid …: comm may hold spaces and parentheses, so read after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      found.push({ pid: Number(pid), ppid, command });
    } catch {
      // gone since the listing, or not ours to read
    }
  }
  return found;
}

export default function setup(project: TestProject): () => Promise<void> {
  const runId = `${process.pid}-${randomBytes(6).toString('hex')}`;
  project.provide('wheelhouseTestRun', runId);
  return async () => {
    let left = await markedProcesses(runId);
    // A process that a test process's exit handler has just SIGKILLed may take a moment to go.
    for (let tries = 0; left.length > 0 && tries < 30; tries++) {
      await sleep(100);
      left = await markedProcesses(runId);
    }
    if (left.length === 0) return;
    for (const { pid } of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    process.exitCode = 1;
    const list = left.map((p) => `  pid ${p.pid} (parent ${p.ppid}): ${p.command.slice(0, 200)}`).join('\n');
    throw new Error(
      `${left.length} process(es) started by the tests were still running at the end of the run (now killed):\n${list}`,
    );
  };
}
