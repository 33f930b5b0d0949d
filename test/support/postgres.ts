/**
 * SQL databases for tests: a fresh random schema on the shared Postgres server per test file
 * (dropped afterwards), or an in-memory PGlite. Both migrated. `sqlBackends` lets one
 * conformance suite run on both with `describe.each(sqlBackends)`.
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { openPostgres, type Db } from '../../src/store/db.js';
import { openPglite } from '../../src/store/db-pglite.js';
import { migrate } from '../../src/store/migrate.js';
import { freshPgliteDir } from './pglite-dirs.js';

export const TEST_POSTGRES_URL = process.env.WHEELHOUSE_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A migrated database for one test file. */
export interface TestDb {
  db: Db;
  schema: string;
  /** Drops what the test created and closes the database. */
  drop(): Promise<void>;
}

/** A new schema `t_<random>` on the test Postgres, migrated. */
export async function createTestSchema(poolSize = 4): Promise<TestDb> {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const db = openPostgres({ url: TEST_POSTGRES_URL, schema, poolSize });
  try {
    await migrate(db);
  } catch (error) {
    await db.close();
    throw error;
  }
  return {
    db,
    schema,
    drop: async () => {
      try {
        await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await db.close();
      }
    },
  };
}

/** A PGlite in a directory of its own (a copy of an initialized one: see pglite-dirs.ts), migrated. */
export async function createTestPglite(): Promise<TestDb> {
  const schema = 'wheelhouse';
  const dataDir = await freshPgliteDir('wheelhouse-store-');
  const db = await openPglite({ dataDir, schema });
  await migrate(db);
  return {
    db,
    schema,
    drop: async () => {
      try {
        await db.close();
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
  };
}

/** A SQL backend a conformance suite runs against. */
export interface SqlBackend {
  name: 'postgres' | 'pglite';
  open: () => Promise<TestDb>;
}

export const sqlBackends: SqlBackend[] = [
  { name: 'postgres', open: () => createTestSchema() },
  { name: 'pglite', open: createTestPglite },
];
