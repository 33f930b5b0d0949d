import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fsyncSync,
  linkSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

/**
 * The embedded backend's guard on its data directory: one process at a time, as a Postgres
 * server refuses a second server on its data directory (`postmaster.pid`). Two PGlite
 * instances writing one directory each cache what the other rewrites, and damage it
 * (docs/decisions/0037-embedded-default-data-dir-lock-and-start.md).
 *
 * The lock is a file in the directory, `wheelhouse.lock`, naming its holder. It appears whole
 * and at once: written and synced under a private name, then hard-linked to its name, which
 * fails if the name exists (no window in which another process reads half a lock). A lock
 * whose holder is gone is taken over; a live holder's is not (see {@link holderAlive}).
 */

/** The lock file's name inside the data directory. */
export const LOCK_FILE = 'wheelhouse.lock';

/** What a lock file holds: who holds the directory. */
export interface LockHolder {
  pid: number;
  hostname: string;
  /** The kernel's boot id (Linux), or null: a holder of another boot is gone. */
  bootId: string | null;
  /** The process's start time in clock ticks since boot (Linux), or null: tells a reused pid apart. */
  startTicks: number | null;
  /** When it took the lock, ISO 8601: for the message. */
  startedAt: string;
  /** Unique to one acquisition: release removes the lock only while it is still this one. */
  token: string;
}

/** The data directory is held by a live process. */
export class DataDirInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holder: LockHolder,
    readonly lockPath: string,
  ) {
    const where = holder.hostname === hostname() ? '' : ` on host ${holder.hostname}`;
    super(
      `the data directory ${dataDir} is in use by process ${holder.pid}${where} (started ${holder.startedAt}); ` +
        `stop it first (if that process is gone for good, delete ${lockPath})`,
    );
    this.name = 'DataDirInUseError';
  }
}

/** A held lock. */
export interface DataDirLock {
  readonly path: string;
  readonly holder: LockHolder;
  /** Removes the lock file if it is still this lock's. Idempotent, synchronous. */
  release(): void;
}

/** Lock files held by this process, by real path of their directory: the same process opening one twice is refused too. */
const heldHere = new Map<string, DataDirLock>();

/** Times a stale lock is cleared and the take retried before giving up (each race lost to another starter). */
const ATTEMPTS = 5;

/**
 * Takes the lock on `dataDir` (which must exist) or throws {@link DataDirInUseError}. The lock
 * is released by `release()`, and at the latest when the process exits (a SIGKILL leaves it:
 * the next start finds its holder gone and takes it over).
 */
export function lockDataDir(dataDir: string): DataDirLock {
  const real = realpathSync(dataDir);
  const path = join(real, LOCK_FILE);
  const mine = heldHere.get(real);
  if (mine) throw new DataDirInUseError(dataDir, mine.holder, path);
  const holder = currentHolder();
  const body = `${JSON.stringify(holder, null, 2)}\n`;
  const staging = join(real, `${LOCK_FILE}.${holder.token}`);
  writeSynced(staging, body);
  try {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      try {
        publish(staging, path, body);
        return held(real, path, holder);
      } catch (error) {
        if (!isCode(error, 'EEXIST')) throw error;
      }
      const found = readHolder(path);
      if (found === 'missing') continue;
      if (found !== 'unreadable' && holderAlive(found)) throw new DataDirInUseError(dataDir, found, path);
      clearStale(path, found === 'unreadable' ? null : found.token, holder.token);
    }
    throw new Error(`could not take ${path}: other processes kept taking it (${ATTEMPTS} attempts)`);
  } finally {
    unlinkQuietly(staging);
  }
}

function held(real: string, path: string, holder: LockHolder): DataDirLock {
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    heldHere.delete(real);
    const found = readHolder(path);
    if (typeof found === 'object' && found.token === holder.token) unlinkQuietly(path);
  };
  const lock = { path, holder, release };
  heldHere.set(real, lock);
  // A process that exits without closing the database (a second SIGINT, the grace timeout)
  // ends its writes as it exits: nothing writes the directory after this.
  if (!exitHooked) {
    exitHooked = true;
    process.on('exit', () => {
      for (const each of [...heldHere.values()]) {
        try {
          each.release();
        } catch (error) {
          process.stderr.write(`wheelhouse: could not remove ${each.path} at exit: ${String(error)}\n`);
        }
      }
    });
  }
  return lock;
}

let exitHooked = false;

/** Error codes of a filesystem that makes no hard links (some network and FUSE mounts). */
const NO_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS']);

/**
 * Puts the lock at `path`, or throws EEXIST. A hard link of the synced staging file: the lock
 * appears whole. Where the filesystem makes no links, an exclusive create and a write: another
 * starter reading it in that instant finds no holder and may take it too (the window is the
 * write of a few hundred bytes).
 */
function publish(staging: string, path: string, body: string): void {
  try {
    linkSync(staging, path);
  } catch (error) {
    if (NO_LINKS.has((error as { code?: string }).code ?? '')) writeSynced(path, body);
    else throw error;
  }
}

/**
 * Moves a stale lock out of the way. Two starters may judge the same lock stale: each renames
 * it to a name of its own, and only the one that got the stale lock (its token) deletes it; the
 * other got the winner's fresh lock, and puts it back.
 */
function clearStale(path: string, staleToken: string | null, ownToken: string): void {
  const aside = `${path}.stale-${ownToken}`;
  try {
    renameSync(path, aside);
  } catch (error) {
    if (isCode(error, 'ENOENT')) return;
    throw error;
  }
  const moved = readHolder(aside);
  const wasStale =
    moved === 'unreadable' ? staleToken === null : typeof moved === 'object' && moved.token === staleToken;
  if (wasStale || moved === 'missing') {
    unlinkQuietly(aside);
    return;
  }
  try {
    linkSync(aside, path);
  } catch (error) {
    if (!NO_LINKS.has((error as { code?: string }).code ?? '')) throw error;
    renameSync(aside, path);
  } finally {
    unlinkQuietly(aside);
  }
}

/**
 * Whether the process a lock names still runs. On this host and boot: its pid is alive and,
 * where the kernel tells (Linux), started at the recorded time, so a pid reused since (a
 * container restarted, the pid counter wrapped) is not mistaken for the holder. A holder of an
 * earlier boot of this host is gone. On another host nothing can be checked: alive.
 */
export function holderAlive(holder: LockHolder): boolean {
  const bootId = currentBootId();
  const sameBoot = holder.bootId !== null && bootId !== null && holder.bootId === bootId;
  if (holder.hostname !== hostname() && !sameBoot) return true;
  if (holder.bootId !== null && bootId !== null && holder.bootId !== bootId) return false;
  if (!pidAlive(holder.pid)) return false;
  // This process's own pid in a lock it does not hold here: a previous life's (a container's pid 1).
  if (holder.startTicks === null) return holder.pid !== process.pid;
  // Unreadable (/proc hidden from other users): the pid is alive, so is the holder as far as we know.
  const ticks = processStartTicks(holder.pid);
  return ticks === null || ticks === holder.startTicks;
}

function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return isCode(error, 'EPERM');
  }
}

function currentHolder(): LockHolder {
  return {
    pid: process.pid,
    hostname: hostname(),
    bootId: currentBootId(),
    startTicks: processStartTicks(process.pid),
    startedAt: new Date().toISOString(),
    token: randomBytes(12).toString('hex'),
  };
}

function currentBootId(): string | null {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
  } catch {
    return null;
  }
}

/** Field 22 of /proc/<pid>/stat (after the command name, which may hold spaces and parentheses). */
export function processStartTicks(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    return Number.isFinite(ticks) ? ticks : null;
  } catch {
    return null;
  }
}

function readHolder(path: string): LockHolder | 'missing' | 'unreadable' {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if (isCode(error, 'ENOENT')) return 'missing';
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as Partial<LockHolder>;
    if (typeof parsed.pid !== 'number' || typeof parsed.token !== 'string' || typeof parsed.hostname !== 'string')
      return 'unreadable';
    return {
      pid: parsed.pid,
      hostname: parsed.hostname,
      bootId: typeof parsed.bootId === 'string' ? parsed.bootId : null,
      startTicks: typeof parsed.startTicks === 'number' ? parsed.startTicks : null,
      startedAt: typeof parsed.startedAt === 'string' ? parsed.startedAt : 'at an unknown time',
      token: parsed.token,
    };
  } catch {
    return 'unreadable';
  }
}

function writeSynced(path: string, body: string): void {
  const fd = openSync(path, 'wx', 0o644);
  try {
    writeSync(fd, body);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if (!isCode(error, 'ENOENT')) throw error;
  }
}

function isCode(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}
