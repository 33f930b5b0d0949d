/**
 * The Db abstraction and migrations: types come back the same from both drivers, an
 * unreachable or failing server is `store_unavailable`, migrations apply once, and PGlite
 * keeps its data in its directory.
 */
import { randomBytes } from 'node:crypto';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { isRetryableConflict } from '../../src/store/db-errors.js';
import { openPostgres, type Db } from '../../src/store/db.js';
import { openPglite } from '../../src/store/db-pglite.js';
import { findMigrationsDir, loadMigrations, migrate, SchemaTooNewError } from '../../src/store/migrate.js';
import { TEST_POSTGRES_URL, sqlBackends, type TestDb } from '../support/postgres.js';

/** Every migration file, in order: a new one is added here when it lands. */
const ALL_MIGRATIONS = [
  '000001_init.sql',
  '000002_cron.sql',
  '000003_dags.sql',
  '000004_cluster.sql',
  '000005_lease_tokens.sql',
  '000006_api_keys.sql',
  '000007_results_progress.sql',
  '000008_retention.sql',
  '000009_cron_wake.sql',
  '000010_running_lease_idx.sql',
  '000011_deadlines.sql',
  '000012_limits.sql',
  '000013_debounce.sql',
  '000014_limits_index_no_pending_list.sql',
  '000015_cluster_redis_reachable.sql',
  '000016_operations.sql',
  '000017_children.sql',
  '000018_waiting.sql',
  '000019_cluster_store_gap.sql',
  '000020_task_stats.sql',
  '000021_failed_idx.sql',
  '000022_traceparent.sql',
  '000023_limits_index_by_status.sql',
  '000024_running_limits_pending_list.sql',
  '000025_start_by_without_trigger.sql',
];

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => null,
    (e: unknown) => e,
  );
}

describe.each(sqlBackends)('Db on $name', ({ open }) => {
  let testDb: TestDb;
  beforeAll(async () => {
    testDb = await open();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  it('returns the same JavaScript types from both drivers', async () => {
    const { rows } = await testDb.db.query(
      `SELECT 1::int2 AS small, 2::int4 AS int, 3::int8 AS big, 9007199254740993::int8 AS huge,
              1.5::float8 AS float, '{"a":[1,"x"]}'::jsonb AS json, 'null'::jsonb AS jnull,
              true AS flag, NULL::text AS missing, '0190a0b0-0000-7000-8000-000000000001'::uuid AS id`,
    );
    expect(rows[0]).toEqual({
      small: 1,
      int: 2,
      big: 3,
      huge: '9007199254740993',
      float: 1.5,
      json: { a: [1, 'x'] },
      jnull: null,
      flag: true,
      missing: null,
      id: '0190a0b0-0000-7000-8000-000000000001',
    });
  });

  it('rolls a failed transaction back and reports rowCount', async () => {
    const db = testDb.db;
    await db.exec('CREATE TABLE IF NOT EXISTS scratch (n int)');
    const error = await errorOf(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO scratch VALUES (1), (2)');
        throw new Error('no');
      }),
    );
    expect((error as Error).message).toBe('no');
    expect((await db.query('SELECT * FROM scratch')).rows).toEqual([]);
    const value = await db.transaction(async (tx) => (await tx.query('INSERT INTO scratch VALUES (1), (2)')).rowCount);
    expect(value).toBe(2);
    expect((await db.query('UPDATE scratch SET n = n + 1')).rowCount).toBe(2);
  });

  it('finds nothing left to apply on a migrated schema', async () => {
    expect(await migrate(testDb.db)).toEqual([]);
    const { rows } = await testDb.db.query<{ id: number; name: string }>('SELECT id, name FROM schema_migrations');
    expect(rows).toEqual(ALL_MIGRATIONS.map((name, i) => ({ id: i + 1, name })));
  });
});

describe('migrations', () => {
  it('are found from src/store and from dist/src/store', () => {
    const dir = join(repoRoot, 'migrations');
    expect(findMigrationsDir()).toBe(dir);
    expect(findMigrationsDir(join(repoRoot, 'dist', 'src', 'store'))).toBe(dir);
    expect(loadMigrations(dir).map((m) => m.id)).toEqual(expect.arrayContaining([1]));
  });

  it('apply once when nodes start together', async () => {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    const dbs = [0, 1, 2].map(() => openPostgres({ url: TEST_POSTGRES_URL, schema, poolSize: 1 }));
    try {
      const applied = await Promise.all(dbs.map((db) => migrate(db)));
      expect(applied.flat()).toEqual(ALL_MIGRATIONS);
    } finally {
      await dbs[0]!.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await Promise.all(dbs.map((db) => db.close()));
    }
  });
  it('refuse a schema that a newer version migrated, applying nothing', async () => {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    const db = openPostgres({ url: TEST_POSTGRES_URL, schema, poolSize: 1 });
    try {
      await migrate(db);
      const known = loadMigrations();
      const future = { id: known.length + 1, name: '999999_from_the_future.sql', sql: 'SELECT 1' };
      // A newer version applied one more migration.
      expect(await migrate(db, schema, [...known, future])).toEqual([future.name]);
      const error = await migrate(db).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SchemaTooNewError);
      expect((error as SchemaTooNewError).unknown).toEqual([future.name]);
      expect((error as Error).message).toMatch(/migrated by a newer Wheelhouse/);
    } finally {
      await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await db.close();
    }
  });
});

describe('store_unavailable', () => {
  it('is what a deadlock becomes (a conflict to retry, not a 500)', async () => {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    const db = openPostgres({ url: TEST_POSTGRES_URL, schema, poolSize: 2 });
    try {
      await db.query(`CREATE SCHEMA ${schema}`);
      await db.query('CREATE TABLE pair (id int PRIMARY KEY, n int)');
      await db.query('INSERT INTO pair VALUES (1, 0), (2, 0)');
      // Two transactions lock the two rows in opposite orders: Postgres aborts one of them.
      // A barrier: each transaction goes on once both hold their first row.
      let arrived = 0;
      let bothArrived!: () => void;
      const both = new Promise<void>((resolve) => (bothArrived = resolve));
      const bothLockedFirst = async (): Promise<void> => {
        if (++arrived === 2) bothArrived();
        await both;
      };
      const crossing = (first: number, second: number) =>
        db.transaction(async (tx) => {
          await tx.query('UPDATE pair SET n = n + 1 WHERE id = $1', [first]);
          await bothLockedFirst();
          await tx.query('UPDATE pair SET n = n + 1 WHERE id = $1', [second]);
        });
      const outcomes = await Promise.allSettled([crossing(1, 2), crossing(2, 1)]);
      const failed = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
      expect(failed).toHaveLength(1);
      const error = failed[0]!.reason as unknown;
      expect(isWheelhouseError(error, 'store_unavailable')).toBe(true);
      expect(isRetryableConflict(error)).toBe(true);
    } finally {
      await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await db.close();
    }
  });

  it('is what a refused connection becomes, with Retry-After', async () => {
    const db = openPostgres({
      url: 'postgres://postgres@127.0.0.1:1/test',
      schema: 'wheelhouse',
      connectTimeoutMs: 2000,
    });
    try {
      for (const attempt of [db.query('SELECT 1'), db.transaction(async (tx) => tx.query('SELECT 1'))]) {
        const error = await errorOf(attempt);
        expect(isWheelhouseError(error, 'store_unavailable')).toBe(true);
        if (isWheelhouseError(error)) {
          expect(error.status).toBe(503);
          expect(error.retryAfterSeconds).toBe(1);
          expect(error.cause).toBeInstanceOf(Error);
        }
      }
    } finally {
      await db.close();
    }
  });

  it('fails a statement the server never answers after queryTimeoutMs, and does not reuse its connection', async () => {
    // A proxy to Postgres that can go silent, as a cut network does: bytes are swallowed both
    // ways and no connection is closed, so only the client's own bound ends the wait.
    let silent = false;
    const sockets = new Set<Socket>();
    const proxy = createServer((client) => {
      const server = connect(5432, '127.0.0.1');
      sockets.add(client).add(server);
      client.on('data', (chunk) => void (silent || server.write(chunk)));
      server.on('data', (chunk) => void (silent || client.write(chunk)));
      client.on('error', () => server.destroy());
      server.on('error', () => client.destroy());
      client.on('close', () => server.destroy());
      server.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const port = (proxy.address() as AddressInfo).port;
    const db = openPostgres({
      url: TEST_POSTGRES_URL.replace(/@[^/]+\//, `@127.0.0.1:${port}/`),
      schema: 'wheelhouse',
      poolSize: 1,
      queryTimeoutMs: 500,
    });
    try {
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      silent = true;
      expect(isWheelhouseError(await errorOf(db.query('SELECT 1')), 'store_unavailable')).toBe(true);
      const inTransaction = await errorOf(db.transaction(async (tx) => tx.query('SELECT 1')));
      expect(isWheelhouseError(inTransaction, 'store_unavailable')).toBe(true);
      silent = false;
      // The silent connections were closed: the next statement opens a new one and is answered.
      expect((await db.query<{ one: number }>('SELECT 2 AS one')).rows).toEqual([{ one: 2 }]);
    } finally {
      silent = false;
      await db.close().catch(() => undefined);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });

  describe('on a server that ends connections', () => {
    let db: Db;
    let admin: Db;
    let idleErrors: Error[];
    let onIdleError: (() => void) | undefined;
    beforeAll(() => {
      idleErrors = [];
      db = openPostgres({
        url: TEST_POSTGRES_URL,
        schema: 'wheelhouse',
        poolSize: 1,
        onIdleError: (error) => {
          idleErrors.push(error);
          onIdleError?.();
        },
      });
      admin = openPostgres({ url: TEST_POSTGRES_URL, schema: 'wheelhouse', poolSize: 1 });
    });
    afterAll(async () => {
      await Promise.all([db.close(), admin.close()]);
    });

    it('maps a connection killed mid-query (57P01) to store_unavailable', async () => {
      const error = await errorOf(
        db.transaction(async (tx) => {
          const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
          const sleeping = errorOf(tx.query('SELECT pg_sleep(30)'));
          await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
          throw await sleeping;
        }),
      );
      expect(isWheelhouseError(error, 'store_unavailable')).toBe(true);
      // The broken connection was discarded: the next query gets a new one.
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    });

    it('survives an idle connection being ended, and reconnects', async () => {
      const { rows } = await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const reported = new Promise<void>((resolve) => {
        onIdleError = resolve;
      });
      await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      await reported;
      expect(idleErrors.length).toBeGreaterThan(0);
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    });
  });
});

describe('PGlite on disk', () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'wheelhouse-pglite-'));
  });
  afterAll(() => {
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('keeps migrations and rows across a close and reopen', async () => {
    const first = await openPglite({ dataDir, schema: 'wheelhouse' });
    expect(await migrate(first)).toEqual(ALL_MIGRATIONS);
    await first.query(
      `INSERT INTO actor_snapshots (kind, key, epoch, version, updated_at) VALUES ('wheel', '1', 7, 0, now())`,
    );
    await first.close();

    const second = await openPglite({ dataDir, schema: 'wheelhouse' });
    try {
      expect(await migrate(second)).toEqual([]);
      const { rows } = await second.query('SELECT epoch FROM actor_snapshots');
      expect(rows).toEqual([{ epoch: 7 }]);
    } finally {
      await second.close();
    }
  }, 120_000); // two PGlite start-ups, several seconds each on a busy machine

  it('makes no directory for `memory://`, in memory', async () => {
    const cwd = process.cwd();
    process.chdir(dataDir);
    try {
      const db = await openPglite({ dataDir: 'memory://', schema: 'wheelhouse' });
      await db.close();
      expect(existsSync(join(dataDir, 'memory:'))).toBe(false);
    } finally {
      process.chdir(cwd);
    }
  });
});
