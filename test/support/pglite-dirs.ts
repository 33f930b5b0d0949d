import { cpSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';

/**
 * A data directory for an embedded test node, already through PGlite's initdb.
 *
 * Initdb in WebAssembly takes 4–6 s on this machine, opening an initialized directory ~0.7 s,
 * and dozens of test files start embedded nodes: so the first test on a machine makes one
 * initialized directory (per PGlite version, under the OS temp dir) and every embedded node
 * then starts from a copy of it. Only initdb is shared: each node still runs the project's
 * migrations into its copy, as `wheelhouse dev` does on a first start. Made under a private
 * name and renamed into place, so test workers that race to make it never see half of one.
 */
export async function freshPgliteDir(prefix = 'wheelhouse-test-'): Promise<string> {
  const template = await templateDir();
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cpSync(template, dir, { recursive: true });
  return dir;
}

/** Fills `dir` (made if missing, expected empty) with an initialized PGlite data directory. */
export async function seedPgliteDir(dir: string): Promise<void> {
  cpSync(await templateDir(), dir, { recursive: true });
}

let making: Promise<string> | null = null;

function templateDir(): Promise<string> {
  return (making ??= makeTemplate());
}

async function makeTemplate(): Promise<string> {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  const version = manifest.dependencies['@electric-sql/pglite'] ?? 'unknown';
  const path = join(tmpdir(), `wheelhouse-pglite-initdb-${version}`);
  if (existsSync(join(path, 'PG_VERSION'))) return path;
  const building = mkdtempSync(`${path}.building-`);
  const lite = await PGlite.create({ dataDir: building });
  await lite.close();
  try {
    renameSync(building, path);
  } catch (error) {
    // Another worker put its own in place first: use that one.
    rmSync(building, { recursive: true, force: true });
    if (!existsSync(join(path, 'PG_VERSION'))) throw error;
  }
  return path;
}
