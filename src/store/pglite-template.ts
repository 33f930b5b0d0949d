import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';

/**
 * A new embedded data directory starts as a copy of one the build made: initdb in WebAssembly
 * (a second PGlite in memory, then the whole directory written out) and the migrations are most
 * of a first start's time and memory, and they are the same for every directory. `npm run build`
 * runs them once (scripts/build-pglite-template.mjs; the migrations into the default schema,
 * `wheelhouse`) and ships the result, cleanly shut down, next to this module as
 * `pglite-template.tar.gz` (docs/decisions/0037-embedded-data-dir-lock-and-start.md). Without
 * it (a test run from the sources) PGlite runs initdb as before, and the node its migrations.
 */

/** Where the build puts the template: next to the compiled module. */
export const TEMPLATE_PATH = fileURLToPath(new URL('./pglite-template.tar.gz', import.meta.url));

/** Postgres's own mark of an initialized data directory; PGlite runs initdb where it is missing. */
const MARK = 'PG_VERSION';

/**
 * Unpacks the template into `dataDir` unless it already holds a database (or no template
 * ships). `PG_VERSION` is written last: a copy cut short (a kill, a full disk) is not taken
 * for a database, and the next start unpacks over it. Returns whether it unpacked.
 */
export function seedFromTemplate(dataDir: string, template: string = TEMPLATE_PATH): boolean {
  if (existsSync(join(dataDir, MARK)) || !existsSync(template)) return false;
  let mark: Buffer | null = null;
  for (const entry of tarEntries(gunzipSync(readFileSync(template)))) {
    const path = insideOf(dataDir, entry.name);
    if (entry.directory) mkdirSync(path, { recursive: true, mode: 0o700 });
    else if (entry.name === MARK) mark = entry.data;
    else {
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      writeFileSync(path, entry.data, { mode: 0o600 });
    }
  }
  if (mark === null) throw new Error(`${template} holds no ${MARK}: not a data directory`);
  writeFileSync(join(dataDir, MARK), mark, { mode: 0o600 });
  return true;
}

interface TarEntry {
  name: string;
  directory: boolean;
  data: Buffer;
}

/** The entries of a ustar archive (regular files and directories; the build writes nothing else). */
function* tarEntries(tar: Buffer): Generator<TarEntry> {
  let offset = 0;
  while (offset + 512 <= tar.length) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((byte) => byte === 0)) return;
    const name = field(header, 0, 100);
    const prefix = field(header, 345, 155);
    const size = parseInt(field(header, 124, 12).trim() || '0', 8);
    const type = String.fromCharCode(header[156] ?? 0);
    const start = offset + 512;
    offset = start + Math.ceil(size / 512) * 512;
    if (type !== '0' && type !== '\0' && type !== '5') continue;
    const full = (prefix === '' ? name : `${prefix}/${name}`).replace(/\/+$/, '');
    yield { name: full, directory: type === '5', data: tar.subarray(start, start + size) };
  }
}

function field(header: Buffer, offset: number, length: number): string {
  const bytes = header.subarray(offset, offset + length);
  const end = bytes.indexOf(0);
  return bytes.subarray(0, end === -1 ? length : end).toString('utf8');
}

/** `name` under `dir`, refusing a name that would leave it. */
function insideOf(dir: string, name: string): string {
  const path = normalize(join(dir, name));
  if (!path.startsWith(normalize(dir) + sep) && path !== normalize(dir))
    throw new Error(`the template names ${name}, outside the data directory`);
  return path;
}
