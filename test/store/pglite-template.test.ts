/**
 * A new embedded data directory is unpacked from the template the build ships
 * (src/store/pglite-template.ts) instead of running initdb and the migrations: the copy is a
 * database PGlite opens, every migration applied, a copy cut short is unpacked again, and a directory that holds a database is
 * left alone.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openPglite } from '../../src/store/db-pglite.js';
import { migrate } from '../../src/store/migrate.js';
import { seedFromTemplate } from '../../src/store/pglite-template.js';

/** The template `npm run build` makes (scripts/build-pglite-template.mjs); `npm test` builds first. */
const TEMPLATE = resolve(import.meta.dirname, '../../dist/src/store/pglite-template.tar.gz');
if (!existsSync(TEMPLATE))
  throw new Error(`${TEMPLATE} is missing: npm test builds it; alone, run npm run build first`);

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function emptyDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'wheelhouse-template-'));
  dirs.push(dir);
  return dir;
}

/** Postgres's system identifier (the first 8 bytes of pg_control): initdb draws a new one each time. */
function systemIdentifier(dir: string): bigint {
  return readFileSync(join(dir, 'global', 'pg_control')).readBigUInt64LE(0);
}

describe('the PGlite template', () => {
  it('unpacks into an empty directory a database that PGlite opens, already migrated', async () => {
    const [a, b] = [emptyDir(), emptyDir()];
    expect(seedFromTemplate(a, TEMPLATE)).toBe(true);
    expect(seedFromTemplate(b, TEMPLATE)).toBe(true);
    // Both copies of one initdb, not two runs of it.
    expect(systemIdentifier(a)).toBe(systemIdentifier(b));
    const db = await openPglite({ dataDir: a, schema: 'wheelhouse' });
    try {
      expect(await migrate(db)).toEqual([]);
      expect((await db.query('SELECT count(*)::int AS n FROM tasks')).rows).toEqual([{ n: 0 }]);
    } finally {
      await db.close();
    }
    expect(systemIdentifier(a)).toBe(systemIdentifier(b));
  }, 60_000);

  it('unpacks again over a copy cut short (no PG_VERSION yet)', async () => {
    const dir = emptyDir();
    seedFromTemplate(dir, TEMPLATE);
    unlinkSync(join(dir, 'PG_VERSION'));
    writeFileSync(join(dir, 'global', 'pg_control'), 'half');
    expect(seedFromTemplate(dir, TEMPLATE)).toBe(true);
    const db = await openPglite({ dataDir: dir, schema: 'wheelhouse' });
    try {
      expect((await db.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await db.close();
    }
  }, 60_000);

  it('leaves a directory that holds a database alone', () => {
    const dir = emptyDir();
    seedFromTemplate(dir, TEMPLATE);
    writeFileSync(join(dir, 'global', 'pg_control'), 'mine');
    expect(seedFromTemplate(dir, TEMPLATE)).toBe(false);
    expect(readFileSync(join(dir, 'global', 'pg_control'), 'utf8')).toBe('mine');
  });
});
