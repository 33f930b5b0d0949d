/**
 * `engines` says what is true (issue 32): package.json asks for Node ≥ 20.19, this machine and CI
 * run Node 20, and every dependency the package installs (package-lock.json, devDependencies
 * left out) declares a Node range that admits 20.19 — but the ones listed in NEEDS_22_DECLARED,
 * each with where it is loaded and why it works on 20.19 all the same, which is checked here by
 * loading it the way its dependent does.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const FLOOR = '20.19.0';

/**
 * Installed dependencies whose `engines.node` excludes Node 20, and why the package runs on
 * 20.19 with them.
 */
const NEEDS_22_DECLARED: Record<string, string> = {
  // fastify → light-my-request → cookie: loaded only by `fastify.inject()` (tests; the node never
  // calls it), through `require()` of an ES module, which Node has done without a flag since
  // 20.19; its code uses nothing newer than Node 20.
  'node_modules/cookie': 'light-my-request, for fastify.inject() only',
};

type Version = [number, number, number];

function version(text: string): Version {
  const [a = 0, b = 0, c = 0] = text.replace(/^v/, '').split('.').map(Number);
  return [a, b, c];
}

function compare(a: Version, b: Version): number {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return (a[i] as number) - (b[i] as number);
  return 0;
}

/**
 * Whether the npm range `range` admits `v`: `||` alternatives of space-separated comparators
 * (`>=`, `>`, `<=`, `<`, `=`, `^`, `~`, a bare or partial version, `*`) — what engines fields
 * use; anything else throws, so the test is never silently wrong.
 */
function admits(range: string, v: Version): boolean {
  return range.split('||').some((alternative) =>
    alternative
      .replace(/(>=|<=|>|<|=|\^|~)\s+/g, '$1')
      .trim()
      .split(/\s+/)
      .filter((c) => c !== '')
      .every((comparator) => {
        if (comparator === '*' || comparator === 'x') return true;
        const m = /^(>=|<=|>|<|=|\^|~)?\s*v?(\d+)(?:\.(\d+|x))?(?:\.(\d+|x))?$/.exec(comparator);
        if (!m) throw new Error(`engines range "${range}": cannot read "${comparator}"`);
        const [, op = '', major, minor, patch] = m;
        const lower: Version = [Number(major), Number(minor ?? 0) || 0, Number(patch ?? 0) || 0];
        const cmp = compare(v, lower);
        switch (op) {
          case '>=':
            return cmp >= 0;
          case '>':
            return cmp > 0;
          case '<=':
            return cmp <= 0;
          case '<':
            return cmp < 0;
          case '^':
            return cmp >= 0 && v[0] === lower[0];
          case '~':
            return cmp >= 0 && v[0] === lower[0] && v[1] === lower[1];
          default:
            // `20`, `20.19`, `=20.19.0`: that version, or any in its partial range.
            return (
              v[0] === lower[0] && (minor === undefined || v[1] === lower[1]) && (patch === undefined || cmp === 0)
            );
        }
      }),
  );
}

describe('engines', () => {
  const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };

  it('asks for Node 20.19 or later, which this machine runs', () => {
    expect(pkg.engines.node).toBe('>=20.19');
    expect(admits(pkg.engines.node, version(process.version))).toBe(true);
    expect(admits(pkg.engines.node, version('20.18.3'))).toBe(false);
  });

  it('reads ranges as npm does', () => {
    expect(admits('^20.19.0 || >=22.12.0', version('20.19.0'))).toBe(true);
    expect(admits('^20.19.0 || >=22.12.0', version('21.0.0'))).toBe(false);
    expect(admits('18 || 20 || >=22', version('20.1.0'))).toBe(true);
    expect(admits('>=22', version('20.20.2'))).toBe(false);
    expect(admits('>= 0.8', version('20.19.0'))).toBe(true);
  });

  it('is not contradicted by a dependency the package installs, but the ones known to run on 20.19', () => {
    const lock = JSON.parse(readFileSync(resolve(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean; engines?: { node?: string } | string[] }>;
    };
    const excluding: Record<string, string> = {};
    for (const [path, entry] of Object.entries(lock.packages)) {
      if (path === '' || entry.dev === true || Array.isArray(entry.engines)) continue;
      const range = entry.engines?.node;
      if (range !== undefined && !admits(range, version(FLOOR))) excluding[path] = range;
    }
    expect(Object.keys(excluding).sort()).toEqual(Object.keys(NEEDS_22_DECLARED).sort());
  });

  it('runs cookie where light-my-request loads it: fastify.inject() with cookies', async () => {
    const require = createRequire(resolve(ROOT, 'node_modules/fastify/fastify.js'));
    const inject = require('light-my-request') as (
      handler: (req: { headers: Record<string, string> }, res: { end(body: string): void }) => void,
      options: { url: string; cookies: Record<string, string> },
    ) => Promise<{ payload: string }>;
    const answer = await inject((req, res) => res.end(req.headers.cookie ?? ''), {
      url: '/',
      cookies: { session: 'a b' },
    });
    expect(answer.payload).toBe('session=a%20b');
  });
});
