import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { lockDataDir, type DataDirLock } from './data-dir-lock.js';
import { toStoreError } from './db-errors.js';
import { trace, tracing } from '../lib/trace.js';
import { seedFromTemplate } from './pglite-template.js';
import { checkSchema, INT8_OID, parseInt8, type Db, type DbResult, type DbTx } from './db.js';

/**
 * The embedded driver of the Db abstraction (src/store/db.ts): PGlite, Postgres compiled to
 * WebAssembly, in this process.
 */

/**
 * Postgres's buffer pool in PGlite. Postgres writes all of it as it starts, so it is resident
 * from the first second: initdb's 128 MB was most of an idle embedded node's memory. The
 * pages it no longer keeps stay in the OS's page cache (PGlite reads its files through Node's
 * fs), so a miss costs a read, not a disk seek (decision 0037).
 */
const SHARED_BUFFERS = '32MB';

/** Options of {@link openPglite}. */
export interface PgliteDbOptions {
  /** Directory holding the database files; null keeps the database in memory. */
  dataDir: string | null;
  schema: string;
}

/**
 * Opens PGlite, in memory or persisted under `dataDir`, and sets its `search_path`.
 * One PGlite is one connection: statements run one at a time, and a transaction holds the
 * database until it ends. Only one process may open a data directory: the first takes its lock
 * (src/store/data-dir-lock.ts) before PGlite opens it and releases it once PGlite has closed;
 * another finds it held and throws `DataDirInUseError`.
 */
export async function openPglite(options: PgliteDbOptions): Promise<Db> {
  checkSchema(options.schema);
  // `memory://` (PGlite's in-memory scheme) is no directory: made, it was an empty `memory:`
  // in the working directory.
  const onDisk = options.dataDir !== null && !options.dataDir.includes('://');
  let lock: DataDirLock | null = null;
  if (onDisk) {
    mkdirSync(options.dataDir!, { recursive: true });
    lock = lockDataDir(options.dataDir!);
  }
  let lite: PGlite | null = null;
  try {
    // A new directory starts from the build's initialized one instead of running initdb.
    if (onDisk) seedFromTemplate(options.dataDir!);
    const parsers = { [INT8_OID]: parseInt8 };
    const startParams = [...PGlite.defaultStartParams, '-c', `shared_buffers=${SHARED_BUFFERS}`];
    lite = await PGlite.create({
      ...(options.dataDir === null ? {} : { dataDir: options.dataDir }),
      parsers,
      startParams,
    });
    // The schema need not exist yet: search_path names that do not exist are skipped until
    // they do (the migration creates it).
    await lite.exec(`SET search_path TO ${options.schema}`);
  } catch (error) {
    // Closed before the directory is let go: nothing of this process writes it after that.
    await lite?.close().catch(() => undefined);
    lock?.release();
    throw toStoreError(error, true);
  }
  return new PgliteDb(lite, options.schema, lock);
}

interface PgliteQueryable {
  query<R>(text: string, params?: unknown[]): Promise<{ rows: R[]; affectedRows?: number }>;
  exec(script: string): Promise<unknown>;
}

async function liteQuery<R>(
  on: PgliteQueryable,
  text: string,
  params: readonly unknown[] | undefined,
): Promise<DbResult<R>> {
  try {
    const t0 = tracing ? performance.now() : 0;
    const result = await on.query<R>(text, params === undefined ? undefined : [...params]);
    // One connection: a statement's time is how long every other statement waited behind it.
    if (tracing) trace('lite', { sql: text.replace(/\s+/g, ' ').slice(0, 80), runMs: performance.now() - t0 });
    return { rows: result.rows, rowCount: result.affectedRows || result.rows.length };
  } catch (error) {
    throw toStoreError(error);
  }
}

async function liteExec(on: PgliteQueryable, script: string): Promise<void> {
  try {
    await on.exec(script);
  } catch (error) {
    throw toStoreError(error);
  }
}

class PgliteDb implements Db {
  readonly driver = 'pglite' as const;

  constructor(
    private readonly lite: PGlite,
    readonly schema: string,
    private readonly lock: DataDirLock | null,
  ) {}

  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<DbResult<R>> {
    return liteQuery<R>(this.lite, text, params);
  }

  exec(script: string): Promise<void> {
    return liteExec(this.lite, script);
  }

  async transaction<T>(fn: (tx: DbTx) => Promise<T>): Promise<T> {
    try {
      return await this.lite.transaction(async (liteTx) => {
        const tx: DbTx = {
          query: <R>(text: string, params?: readonly unknown[]) => liteQuery<R>(liteTx, text, params),
          exec: (script: string) => liteExec(liteTx, script),
        };
        return fn(tx);
      });
    } catch (error) {
      throw toStoreError(error);
    }
  }

  private closing: Promise<void> | null = null;

  /**
   * Closes PGlite (it writes its shutdown checkpoint), then lets the directory go. Once: a
   * second call (the CLI's forced exit racing the graceful stop) waits for the first.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      // A close that failed keeps the lock until the process exits: PGlite may still hold files.
      if (!this.lite.closed) await this.lite.close();
      this.lock?.release();
    })();
    return this.closing;
  }
}
