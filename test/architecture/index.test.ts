/**
 * The library's entry points: `wheelhouse` (src/index.ts), `wheelhouse/worker` and `wheelhouse/client`. The
 * package's `exports` must name files the build emits, each with its type declarations, and
 * the main entry must give what an embedding application needs to start a node.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as wheelhouse from '../../src/index.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

interface PackageJson {
  types?: string;
  exports: Record<string, { types: string; default: string }>;
  files?: string[];
}

const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as PackageJson;

/** The source file tsc builds `./dist/src/x.js` (or `.d.ts`) from. */
function sourceOf(built: string): string {
  const match = /^\.\/dist\/(src\/.+)\.(?:js|d\.ts)$/.exec(built);
  if (match === null) throw new Error(`${built} is not under ./dist/src`);
  return resolve(ROOT, `${match[1]}.ts`);
}

describe('the main entry point', () => {
  it('starts a node and compiles options', () => {
    expect(typeof wheelhouse.startNode).toBe('function');
    expect(typeof wheelhouse.compileOptions).toBe('function');
    expect(wheelhouse.compileOptions({ port: 7071 }).port).toBe(7071);
  });

  it('gives the coded errors', () => {
    const error = new wheelhouse.WheelhouseError('task_not_found');
    expect(wheelhouse.isWheelhouseError(error, 'task_not_found')).toBe(true);
    expect(error.status).toBe(404);
    expect(wheelhouse.ERROR_CODES).toContain('task_not_found');
  });
});

describe('package.json', () => {
  it('maps each entry point to built JavaScript and its declarations, from one source file', () => {
    expect(Object.keys(pkg.exports).sort()).toEqual(['.', './client', './worker']);
    for (const [name, target] of Object.entries(pkg.exports)) {
      expect(Object.keys(target), name).toEqual(['types', 'default']);
      expect(target.types, name).toBe(target.default.replace(/\.js$/, '.d.ts'));
      expect(existsSync(sourceOf(target.default)), `${name} → ${target.default}`).toBe(true);
    }
    expect(pkg.exports['.']?.default).toBe('./dist/src/index.js');
    expect(pkg.exports['./worker']?.default).toBe('./dist/src/worker/index.js');
    expect(pkg.exports['./client']?.default).toBe('./dist/src/client/index.js');
    expect(pkg.types).toBe(pkg.exports['.']?.types);
  });

  it('ships the build and the migrations, not the tests', () => {
    expect(pkg.files).toEqual(expect.arrayContaining(['dist/src/', 'migrations/']));
    for (const entry of pkg.files ?? []) expect(entry).not.toMatch(/^(test|bench|\.ci|dist\/test|dist\/bench)/);
  });
});
