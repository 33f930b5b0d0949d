/**
 * The documents a user gets with a clone (README.md, CHANGELOG.md, docs/**) link only to files
 * that are in the repository: every relative Markdown link `[text](path)` names a file or
 * folder that exists, inside the repository. Web links, mail links and links to an anchor of
 * the same page are not checked; a `#fragment` is stripped before the path is looked up.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The Markdown files checked, relative to the root. */
function documents(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.md'))
    .map((name) => join('docs', name))
    .sort();
  return ['README.md', 'CHANGELOG.md', ...docs];
}

/**
 * The targets of the inline links `[text](target)` in a Markdown text, in order. Code (fenced
 * blocks and `inline spans`) is not prose, so links written in it are not links. A target may
 * be in angle brackets and may carry a title (`[a](b "title")`).
 */
function linkTargets(markdown: string): string[] {
  const prose = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
  const targets: string[] = [];
  for (const match of prose.matchAll(/!?\[[^\]]*\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+"[^"]*")?\s*\)/g)) {
    const raw = match[1] ?? '';
    targets.push(raw.startsWith('<') ? raw.slice(1, -1) : raw);
  }
  return targets;
}

/** The path a target names, without its fragment, or null when it is not a relative link. */
function relativePath(target: string): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null; // http:, https:, mailto:, …
  if (target.startsWith('#') || target.length === 0) return null; // an anchor of this page
  const path = target.split('#', 1)[0] ?? '';
  return decodeURIComponent(path.split('?', 1)[0] ?? '');
}

/** Every relative link of a document that names nothing in the repository, as `file: target`. */
function brokenLinks(document: string): string[] {
  const text = readFileSync(join(ROOT, document), 'utf8');
  const broken: string[] = [];
  for (const target of linkTargets(text)) {
    const path = relativePath(target);
    if (path === null) continue;
    const absolute = path.startsWith('/') ? join(ROOT, path) : resolve(ROOT, dirname(document), path);
    const inside = absolute === ROOT || absolute.startsWith(ROOT + sep);
    if (!inside) broken.push(`${document}: ${target} (outside the repository: ${relative(ROOT, absolute)})`);
    else if (!existsSync(absolute)) broken.push(`${document}: ${target} (no such file: ${relative(ROOT, absolute)})`);
  }
  return broken;
}

describe('links in the documents', () => {
  it('finds the documents', () => {
    const names = documents();
    expect(names).toContain('docs/api.md');
    expect(names).toContain('docs/design.md');
    expect(names).toContain('docs/architecture.md');
  });

  it.each(documents())('%s links only to files in the repository', (document) => {
    expect(brokenLinks(document)).toEqual([]);
  });
});

describe('the link reader', () => {
  it('reads inline links and images, not code', () => {
    const text = [
      'See [the API](docs/api.md#errors) and ![a chart](<docs/a chart.png> "chart").',
      '`[not](a-link.md)` and',
      '```md',
      '[not either](b.md)',
      '```',
      '[last](../shared/API.md)',
    ].join('\n');
    expect(linkTargets(text)).toEqual(['docs/api.md#errors', 'docs/a chart.png', '../shared/API.md']);
  });

  it('keeps relative paths, without fragment, and skips the rest', () => {
    expect(relativePath('docs/api.md#errors')).toBe('docs/api.md');
    expect(relativePath('a%20b.md')).toBe('a b.md');
    expect(relativePath('#errors')).toBeNull();
    expect(relativePath('https://example.com/x.md')).toBeNull();
    expect(relativePath('http://example.com')).toBeNull();
    expect(relativePath('mailto:someone@example.com')).toBeNull();
  });
});
