import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Db } from './db.js';

/**
 * Schema migrations: numbered, append-only SQL files in `migrations/` at the repository
 * root (`000001_init.sql`, `000002_….sql`, …), applied in order at start and recorded in
 * `schema_migrations` in the Wheelhouse schema. Never edit a migration that has landed.
 */

/** One migration file. */
export interface Migration {
  /** The number in the file name. */
  id: number;
  /** The file name. */
  name: string;
  sql: string;
}

const MIGRATION_FILE = /^(\d{6})_[a-z0-9_]+\.sql$/;

/**
 * Finds the `migrations/` folder by walking up from this module: it sits two levels above
 * `src/store/` and three above `dist/src/store/`, and must hold `000001_init.sql`.
 */
export function findMigrationsDir(from: string = dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  for (;;) {
    const candidate = join(dir, 'migrations');
    if (existsSync(join(candidate, '000001_init.sql'))) return candidate;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no migrations/000001_init.sql above ${from}`);
    dir = parent;
  }
}

/** Reads the migration files in order. Throws on a gap or a duplicate number. */
export function loadMigrations(dir: string = findMigrationsDir()): Migration[] {
  const migrations = readdirSync(dir)
    .map((name) => ({ name, match: MIGRATION_FILE.exec(name) }))
    .filter((f): f is { name: string; match: RegExpExecArray } => f.match !== null)
    .map(({ name, match }) => ({ id: Number(match[1]), name, sql: readFileSync(join(dir, name), 'utf8') }))
    .sort((a, b) => a.id - b.id);
  migrations.forEach((m, i) => {
    if (m.id !== i + 1) throw new Error(`migration ${m.name} is out of sequence: expected number ${i + 1}`);
  });
  return migrations;
}

/**
 * The database's schema has migrations this code does not know: a newer version of Wheelhouse
 * migrated it. Running older code on it could misread or corrupt what the newer one wrote, so
 * the node does not start (and `migrate` applies nothing).
 */
export class SchemaTooNewError extends Error {
  constructor(
    readonly schema: string,
    readonly unknown: string[],
    readonly newestKnown: string | null,
  ) {
    super(
      `schema "${schema}" has migrations this version does not know (${unknown.join(', ')}; ` +
        `the newest it knows is ${newestKnown ?? 'none'}): it was migrated by a newer Wheelhouse. ` +
        'Run that version, or a newer one.',
    );
    this.name = 'SchemaTooNewError';
  }
}

/** Key space of the advisory lock (the first of its two int4 keys): "wh" + "mg". */
const MIGRATION_LOCK_CLASS = 0x7768_6d67;

const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Brings `schema` (by default the one `db` runs in) up to date. Everything happens in one
 * transaction holding a transaction-scoped advisory lock keyed by the schema name, so nodes
 * starting together apply each migration once and a failed migration leaves nothing behind.
 * Works the same on Postgres and PGlite. Returns the names of the migrations it applied.
 */
export async function migrate(
  db: Db,
  schema: string = db.schema,
  migrations: Migration[] = loadMigrations(),
): Promise<string[]> {
  if (!SCHEMA_RE.test(schema)) throw new Error(`schema name "${schema}" must match ${SCHEMA_RE}`);
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [MIGRATION_LOCK_CLASS, schema]);
    // Set here too, not only on the connection: the DDL must land in this schema whatever
    // the connection's settings.
    await tx.exec(`CREATE SCHEMA IF NOT EXISTS ${schema}; SET LOCAL search_path TO ${schema};`);
    await tx.exec(
      `CREATE TABLE IF NOT EXISTS schema_migrations (
         id integer PRIMARY KEY,
         name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const { rows } = await tx.query<{ id: number; name: string }>('SELECT id, name FROM schema_migrations');
    const applied = new Set(rows.map((r) => r.id));
    const newest = migrations[migrations.length - 1];
    const ahead = rows.filter((r) => r.id > (newest?.id ?? 0)).sort((a, b) => a.id - b.id);
    if (ahead.length > 0)
      throw new SchemaTooNewError(
        schema,
        ahead.map((r) => r.name),
        newest?.name ?? null,
      );
    const done: string[] = [];
    for (const migration of migrations) {
      if (applied.has(migration.id)) continue;
      await tx.exec(migration.sql);
      await tx.query('INSERT INTO schema_migrations (id, name) VALUES ($1, $2)', [migration.id, migration.name]);
      done.push(migration.name);
    }
    return done;
  });
}
