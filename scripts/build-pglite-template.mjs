// The embedded default's first start skips initdb and the migrations: the build runs them once
// (the migrations into the default schema, "wheelhouse") and ships the data directory, cleanly
// shut down, as dist/src/store/pglite-template.tar.gz, which src/store/pglite-template.ts
// unpacks into a new data directory (docs/decisions/0037-embedded-data-dir-lock-and-start.md).
// Rebuilt only when the installed PGlite (its initdb, its catalog) or the migrations changed.
// Runs after tsc: it migrates with the compiled dist/src/store/ modules.
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { PGlite } from '@electric-sql/pglite';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist/src/store/pglite-template.tar.gz');
const stamp = join(root, 'dist/src/store/pglite-template.json');
const pgliteVersion = JSON.parse(
  readFileSync(join(root, 'node_modules/@electric-sql/pglite/package.json'), 'utf8'),
).version;
const migrationsDir = join(root, 'migrations');
const migrations = createHash('sha256');
for (const name of readdirSync(migrationsDir).sort())
  migrations
    .update(name)
    .update('\0')
    .update(readFileSync(join(migrationsDir, name)))
    .update('\0');
const wanted = JSON.stringify({ pgliteVersion, migrations: migrations.digest('hex') });

function stamped() {
  try {
    return JSON.stringify(JSON.parse(readFileSync(stamp, 'utf8')));
  } catch {
    return null;
  }
}

/** One ustar header block (names here are short: a data directory's paths fit in 100 bytes). */
function header(name, size, type) {
  if (Buffer.byteLength(name) > 100) throw new Error(`${name}: a path longer than 100 bytes`);
  const block = Buffer.alloc(512);
  const field = (offset, length, value) => block.write(value, offset, length, 'ascii');
  const octal = (offset, length, n) => field(offset, length, `${n.toString(8).padStart(length - 1, '0')}\0`);
  block.write(name, 0, 100, 'utf8');
  octal(100, 8, type === '5' ? 0o700 : 0o600);
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, size);
  octal(136, 12, 0);
  field(148, 8, '        ');
  field(156, 1, type);
  field(257, 6, 'ustar\0');
  field(263, 2, '00');
  let sum = 0;
  for (const byte of block) sum += byte;
  field(148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return block;
}

/** The directory as a tar: directories before what they hold, in a stable order. */
function tarOf(dir) {
  const blocks = [];
  const walk = (relative) => {
    for (const name of readdirSync(join(dir, relative)).sort()) {
      const path = relative === '' ? name : `${relative}/${name}`;
      const stat = statSync(join(dir, path));
      if (name.startsWith('wheelhouse.lock')) continue;
      if (stat.isDirectory()) {
        blocks.push(header(`${path}/`, 0, '5'));
        walk(path);
      } else if (stat.isFile()) {
        const data = readFileSync(join(dir, path));
        blocks.push(header(path, data.length, '0'), data, Buffer.alloc((512 - (data.length % 512)) % 512));
      }
    }
  };
  walk('');
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

if (stamped() === wanted) process.exit(0);
const dataDir = mkdtempSync(join(tmpdir(), 'wheelhouse-pglite-template-'));
try {
  const lite = await PGlite.create({ dataDir });
  await lite.close();
  // As a node opens it (src/store/db-pglite.ts, its lock included), then migrated.
  const { openPglite } = await import('../dist/src/store/db-pglite.js');
  const { migrate } = await import('../dist/src/store/migrate.js');
  const db = await openPglite({ dataDir, schema: 'wheelhouse' });
  try {
    await migrate(db);
  } finally {
    await db.close();
  }
  const staging = `${out}.${process.pid}`;
  writeFileSync(staging, gzipSync(tarOf(dataDir), { level: 9 }));
  renameSync(staging, out);
  writeFileSync(stamp, `${wanted}\n`);
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
