/**
 * The folders are the architecture, and imports point down only. This test reads every
 * src/**\/*.ts, finds its import and export-from specifiers (`import type` and `import('…')`
 * included), and fails on any import cycle and on any arrow that points the wrong way:
 *
 *   cli → node → (http, executors) → services → actors → store → runtime
 *
 * with domain/ and lib/ below everything that uses them: domain imports only domain and lib,
 * lib only lib. runtime/ knows nothing of tasks (runtime and lib only); worker/ and client/ are
 * the SDKs and import nothing of the server (themselves and lib only), nor does the server
 * import them. What an SDK reaches, followed import by import, stays in its folder and lib, and
 * the lib files it reaches import no package but Node's own (`node:…`): nothing of the server
 * comes in with them.
 * src/index.ts, the library's face, may import anything; nothing imports it or cli.ts.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SRC = join(ROOT, 'src');

/** What each layer may import besides itself. A layer not in this table is an error. */
const MAY_IMPORT: Readonly<Record<string, readonly string[]>> = {
  index: ['cli', 'node', 'http', 'executors', 'services', 'actors', 'store', 'runtime', 'domain', 'lib', 'worker'],
  // cli/ runs both SDKs: the client verbs on `wheelhouse/client`, `wheelhouse worker` on `wheelhouse/worker`.
  cli: ['node', 'http', 'executors', 'services', 'actors', 'store', 'runtime', 'domain', 'lib', 'client', 'worker'],
  node: ['http', 'executors', 'services', 'actors', 'store', 'runtime', 'domain', 'lib'],
  http: ['services', 'actors', 'store', 'runtime', 'domain', 'lib'],
  executors: ['services', 'actors', 'store', 'runtime', 'domain', 'lib'],
  services: ['actors', 'store', 'runtime', 'domain', 'lib'],
  actors: ['store', 'runtime', 'domain', 'lib'],
  store: ['runtime', 'domain', 'lib'],
  runtime: ['lib'],
  domain: ['lib'],
  lib: [],
  worker: ['lib'],
  client: ['lib'],
  // The dashboard's browser code (its own tsconfig, built to dist/src/dashboard/): it talks to
  // the node over HTTP only.
  dashboard: [],
};

/** The folders shipped as SDKs (`wheelhouse/worker`, `wheelhouse/client`): what they reach is checked file by file. */
const SDKS: readonly string[] = ['worker', 'client'];

/** One import arrow between two src files, as paths relative to the repository root. */
interface Arrow {
  from: string;
  to: string;
}

const IMPORT_PATTERNS = [
  // import x from '…', import type { X } from '…', export { x } from '…', export * from '…'
  /^\s*(?:import|export)\s+(?:type\s+)?[^;'"]*?\bfrom\s*['"]([^'"]+)['"]/gm,
  // import '…' (for its side effects)
  /^\s*import\s*['"]([^'"]+)['"]/gm,
  // import('…'), in code or in a type
  /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
];

/** The specifiers a module imports, comments removed first so an example in a doc does not count. */
function importSpecifiers(source: string): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const found = new Set<string>();
  for (const pattern of IMPORT_PATTERNS) for (const match of code.matchAll(pattern)) found.add(match[1] as string);
  return [...found];
}

/** The layer of a repository-relative src path: the folder under src/, or `cli` / `index`. */
function layerOf(path: string): string {
  const parts = relative('src', path).split(/[\\/]/);
  if (parts.length === 1) return (parts[0] as string).replace(/\.ts$/, '');
  return parts[0] as string;
}

/** Arrows that point the wrong way, written `from → to (from layer → to layer)`. */
function wrongWay(arrows: readonly Arrow[]): string[] {
  const out: string[] = [];
  for (const { from, to } of arrows) {
    const a = layerOf(from);
    const b = layerOf(to);
    const allowed = MAY_IMPORT[a];
    if (allowed === undefined) out.push(`${from} → ${to} (${a} is not a known layer)`);
    else if (a !== b && !allowed.includes(b)) out.push(`${from} → ${to} (${a} may not import ${b})`);
  }
  return out.sort();
}

/**
 * For each SDK, the files it reaches (following relative imports) that lie outside its folder
 * and lib, and the lib files it reaches that import a package other than Node's own.
 * `packagesOf` gives a file's non-relative specifiers.
 */
function sdkLeaks(arrows: readonly Arrow[], packagesOf: (file: string) => readonly string[]): string[] {
  const next = new Map<string, string[]>();
  for (const { from, to } of arrows) next.set(from, [...(next.get(from) ?? []), to]);
  const out: string[] = [];
  for (const sdk of SDKS) {
    const seen = new Set<string>();
    const todo = [...next.keys(), ...arrows.map((a) => a.to)].filter((f) => layerOf(f) === sdk);
    while (todo.length > 0) {
      const file = todo.pop() as string;
      if (seen.has(file)) continue;
      seen.add(file);
      for (const to of next.get(file) ?? []) todo.push(to);
    }
    for (const file of [...seen].sort()) {
      const layer = layerOf(file);
      if (layer !== sdk && layer !== 'lib') out.push(`${sdk} reaches ${file}`);
      if (layer === 'lib') {
        for (const pkg of packagesOf(file))
          if (!pkg.startsWith('node:')) out.push(`${sdk} reaches ${file}, which imports ${pkg}`);
      }
    }
  }
  return out;
}

/** The strongly connected components with more than one file (or a file importing itself), by Tarjan. */
function cycles(arrows: readonly Arrow[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of arrows) {
    if (!next.has(from)) next.set(from, []);
    if (!next.has(to)) next.set(to, []);
    next.get(from)?.push(to);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[][] = [];
  let counter = 0;
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (next.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** Every `.ts` file under a directory, as absolute paths. */
function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return tsFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

const toPosix = (path: string): string => path.split(sep).join('/');

/** The import graph of src/: arrows between src files, and relative specifiers that name no file. */
function readGraph(): { files: string[]; arrows: Arrow[]; unresolved: string[] } {
  const files = tsFiles(SRC).map((f) => toPosix(relative(ROOT, f)));
  const known = new Set(files);
  const arrows: Arrow[] = [];
  const unresolved: string[] = [];
  for (const from of files) {
    for (const specifier of importSpecifiers(readFileSync(join(ROOT, from), 'utf8'))) {
      if (!specifier.startsWith('.')) continue;
      const target = toPosix(relative(ROOT, resolve(ROOT, dirname(from), specifier)));
      const candidates = [target.replace(/\.js$/, '.ts'), target, `${target}.ts`, `${target}/index.ts`];
      const to = candidates.find((c) => known.has(c));
      if (to === undefined) unresolved.push(`${from}: '${specifier}'`);
      else arrows.push({ from, to });
    }
  }
  return { files, arrows, unresolved };
}

describe('the import graph of src/', () => {
  const { files, arrows, unresolved } = readGraph();

  it('is read whole: every relative import names a src file', () => {
    expect(files.length).toBeGreaterThan(50);
    expect(arrows.length).toBeGreaterThan(files.length);
    expect(unresolved, `imports that name no file:\n${unresolved.join('\n')}`).toEqual([]);
  });

  it('has no cycles', () => {
    const found = cycles(arrows);
    const report = found.map((component) => {
      const members = new Set(component);
      const inside = arrows.filter((a) => members.has(a.from) && members.has(a.to));
      return `cycle of ${component.length}:\n${inside.map((a) => `  ${a.from} → ${a.to}`).join('\n')}`;
    });
    expect(found, report.join('\n')).toEqual([]);
  });

  it('points down only', () => {
    const wrong = wrongWay(arrows);
    expect(wrong, `${wrong.length} imports point the wrong way:\n${wrong.join('\n')}`).toEqual([]);
  });

  it('keeps the SDKs apart from the server, however far their imports are followed', () => {
    expect(files.filter((f) => layerOf(f) === 'client').length).toBeGreaterThan(0);
    const packagesOf = (file: string): string[] =>
      importSpecifiers(readFileSync(join(ROOT, file), 'utf8')).filter((s) => !s.startsWith('.'));
    const leaks = sdkLeaks(arrows, packagesOf);
    expect(leaks, leaks.join('\n')).toEqual([]);
  });
});

describe('the checks themselves', () => {
  it('read import type, export-from, side-effect and dynamic imports, not comments', () => {
    const source = [
      "import type { A } from './a.js';",
      'import {',
      '  b,',
      '  type C,',
      "} from '../b.js';",
      "export * from './c.js';",
      "export { d } from './d.js';",
      "import './e.js';",
      "type F = import('./f.js').F;",
      "// import { g } from './g.js';",
      "/** import { h } from './h.js'; */",
      "const s = 'from ./i.js';",
    ].join('\n');
    expect(importSpecifiers(source).sort()).toEqual(['../b.js', './a.js', './c.js', './d.js', './e.js', './f.js']);
  });

  it('flag an arrow up the layers, one from an SDK into the server and one from the server into an SDK', () => {
    expect(
      wrongWay([
        { from: 'src/store/db.ts', to: 'src/actors/ports.ts' },
        { from: 'src/runtime/cell.ts', to: 'src/domain/model.ts' },
        { from: 'src/worker/worker.ts', to: 'src/http/server.ts' },
        { from: 'src/client/client.ts', to: 'src/domain/model.ts' },
        { from: 'src/http/serialize.ts', to: 'src/client/types.ts' },
        { from: 'src/services/support.ts', to: 'src/store/db.ts' },
        { from: 'src/index.ts', to: 'src/node/start.ts' },
      ]),
    ).toEqual([
      'src/client/client.ts → src/domain/model.ts (client may not import domain)',
      'src/http/serialize.ts → src/client/types.ts (http may not import client)',
      'src/runtime/cell.ts → src/domain/model.ts (runtime may not import domain)',
      'src/store/db.ts → src/actors/ports.ts (store may not import actors)',
      'src/worker/worker.ts → src/http/server.ts (worker may not import http)',
    ]);
  });

  it('follow an SDK through lib to what lib pulls in', () => {
    const arrows = [
      { from: 'src/client/client.ts', to: 'src/lib/ids.ts' },
      { from: 'src/lib/ids.ts', to: 'src/lib/config.ts' },
      { from: 'src/lib/config.ts', to: 'src/http/server.ts' },
      { from: 'src/worker/worker.ts', to: 'src/worker/http.ts' },
    ];
    const packages: Record<string, string[]> = { 'src/lib/config.ts': ['node:fs', 'fastify'] };
    expect(sdkLeaks(arrows, (file) => packages[file] ?? [])).toEqual([
      'client reaches src/http/server.ts',
      'client reaches src/lib/config.ts, which imports fastify',
    ]);
  });

  it('find a cycle through three files and leave a chain alone', () => {
    const chain = [
      { from: 'x', to: 'y' },
      { from: 'y', to: 'z' },
    ];
    expect(cycles(chain)).toEqual([]);
    expect(cycles([...chain, { from: 'z', to: 'x' }])).toEqual([['x', 'y', 'z']]);
  });
});
