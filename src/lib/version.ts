import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

/** The version in the package.json above `from` (by default this module: src/ or dist/src/). */
export function packageVersion(from?: string): string {
  if (from === undefined) return (cached ??= findVersion(dirname(fileURLToPath(import.meta.url))));
  return findVersion(from);
}

function findVersion(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'wheelhouse' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // no package.json here: look further up
    }
    if (dirname(dir) === dir) return 'unknown';
  }
}
