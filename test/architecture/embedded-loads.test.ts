/**
 * What `wheelhouse dev` loads: the embedded default must start in ≤ 2 s (issue 32), so the
 * packages only the Postgres + Redis backend uses come in by `import('…')` when that backend
 * opens. This test follows the static imports (`import type` and `import('…')` left out, as
 * Node loads them) from what `dev` loads — src/cli.ts, then src/node/start.ts — and lists the
 * packages reached.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = join(resolve(dirname(fileURLToPath(import.meta.url)), '../..'), 'src');

/** The value imports and re-exports of a file: `import x from`, `import { a } from`, `import '…'`, `export … from`. */
function staticImports(source: string): string[] {
  const out: string[] = [];
  const pattern = /^\s*(?:import|export)\s+(?!type\s)(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm;
  for (const match of source.matchAll(pattern)) out.push(match[1]!);
  return out;
}

/** The packages a file reaches through static imports, with the files walked. */
function packagesReached(entries: string[]): { packages: Set<string>; files: Set<string> } {
  const packages = new Set<string>();
  const files = new Set<string>();
  const pending = [...entries];
  while (pending.length > 0) {
    const file = pending.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    for (const spec of staticImports(readFileSync(file, 'utf8'))) {
      if (spec.startsWith('.')) {
        const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
        if (existsSync(target)) pending.push(target);
      } else if (!spec.startsWith('node:')) {
        packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
      }
    }
  }
  return { packages, files };
}

describe('what `wheelhouse dev` loads before it knows the backend', () => {
  it('does not load ioredis: the Redis stores come in with the Postgres backend only', () => {
    const { packages, files } = packagesReached([join(SRC, 'cli.ts'), join(SRC, 'node/start.ts')]);
    expect(files.has(join(SRC, 'store/backend.ts'))).toBe(true);
    expect(packages.has('@electric-sql/pglite')).toBe(true);
    expect(packages.has('ioredis')).toBe(false);
  });
});
