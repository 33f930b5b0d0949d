/**
 * The embedded data directory's lock (src/store/data-dir-lock.ts): one holder at a time, a
 * holder that is gone is taken over — a dead pid, a pid reused by another process, an earlier
 * boot — and one that may be alive is not. PGlite itself is not opened here: the CLI tests
 * (test/e2e/cli-data-dir.test.ts) run two real nodes on one directory.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  DataDirInUseError,
  LOCK_FILE,
  lockDataDir,
  processStartTicks,
  type DataDirLock,
  type LockHolder,
} from '../../src/store/data-dir-lock.js';

let dir: string;
const held: DataDirLock[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'wheelhouse-lock-'));
});
afterEach(() => {
  for (const lock of held.splice(0)) lock.release();
  rmSync(dir, { recursive: true, force: true });
});

function take(): DataDirLock {
  const lock = lockDataDir(dir);
  held.push(lock);
  return lock;
}

function bootId(): string | null {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return null;
  }
}

/** Writes a lock file as another process would have left it. */
function plant(holder: Partial<LockHolder>): LockHolder {
  const full: LockHolder = {
    pid: process.pid,
    hostname: hostname(),
    bootId: bootId(),
    startTicks: processStartTicks(process.pid),
    startedAt: '2026-01-01T00:00:00.000Z',
    token: 'planted',
    ...holder,
  };
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify(full));
  return full;
}

/** The pid of a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  return child.pid;
}

function currentToken(): string {
  return (JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')) as LockHolder).token;
}

describe('the data directory lock', () => {
  it('is held by one at a time, the second told who holds it, and free again once released', () => {
    const first = take();
    expect(currentToken()).toBe(first.holder.token);
    let refused: unknown;
    try {
      lockDataDir(dir);
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(DataDirInUseError);
    expect((refused as Error).message).toContain(`is in use by process ${process.pid}`);
    expect((refused as Error).message).toContain('stop it first');
    first.release();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    const second = take();
    expect(currentToken()).toBe(second.holder.token);
  });

  it('refuses a lock whose holder is alive in another process', async () => {
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    try {
      const pid = other.pid as number;
      const holder = plant({ pid, startTicks: processStartTicks(pid) });
      expect(() => lockDataDir(dir)).toThrow(new RegExp(`is in use by process ${pid} \\(started `));
      expect(currentToken()).toBe(holder.token);
    } finally {
      const gone = new Promise((resolve) => other.once('exit', resolve));
      other.kill('SIGKILL');
      await gone;
    }
  });

  it('takes over the lock of a process that has exited', () => {
    plant({ pid: deadPid() });
    const lock = take();
    expect(currentToken()).toBe(lock.holder.token);
  });

  it.runIf(processStartTicks(process.pid) !== null)(
    'takes over a lock whose pid is alive but another process (the pid was reused)',
    () => {
      plant({ pid: process.pid, startTicks: (processStartTicks(process.pid) as number) + 1 });
      const lock = take();
      expect(currentToken()).toBe(lock.holder.token);
    },
  );

  it.runIf(bootId() !== null)('takes over a lock of this host from an earlier boot', () => {
    plant({ bootId: '00000000-0000-0000-0000-000000000000' });
    const lock = take();
    expect(currentToken()).toBe(lock.holder.token);
  });

  it('refuses a lock of another host, naming it', () => {
    plant({ hostname: 'elsewhere.example', bootId: '00000000-0000-0000-0000-000000000000', pid: deadPid() });
    expect(() => lockDataDir(dir)).toThrow(/in use by process \d+ on host elsewhere\.example/);
  });

  it('takes over a lock file that is not one (empty, or not JSON)', () => {
    writeFileSync(join(dir, LOCK_FILE), '');
    const lock = take();
    expect(currentToken()).toBe(lock.holder.token);
  });

  it('does not remove a lock that is no longer its own on release', () => {
    const lock = take();
    // Another process judged it stale and took it (a paused process, a clock of its own).
    const other = plant({ pid: deadPid(), token: 'the-new-holder' });
    lock.release();
    expect(currentToken()).toBe(other.token);
  });

  it('leaves no staging file behind, taken or refused', () => {
    take();
    expect(() => lockDataDir(dir)).toThrow(DataDirInUseError);
    expect(readdirSync(dir)).toEqual([LOCK_FILE]);
  });
});
