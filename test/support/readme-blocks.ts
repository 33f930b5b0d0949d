/**
 * README.md's fenced blocks, read as test/e2e/readme.test.ts runs them.
 *
 * - The sections: a `## ` heading's text up to the next `## ` heading, or, with `untilSubsection`,
 *   up to the first `### ` inside it.
 * - `<!-- readme-test: skip: <reason> -->` on the line right before a block: the block is not
 *   run (the reason says what the test does instead).
 * - A shell block (`sh`, `bash`) is a list of commands: a line, with the lines a trailing `\`
 *   or an open quote joins to it, comment lines and the comment at a line's end left out. A
 *   whole-line comment right below a command is output the block must print: `…` stands for any
 *   text, a run of spaces for any run of spaces.
 * - Another block (`js`, `ts`, …) whose first line is a comment naming a file (`// tasks.mjs …`)
 *   is that file's text.
 */

export interface ShellCommand {
  /** The command as bash will read it (continuation lines kept). */
  text: string;
  /** The README line it starts on (1-based). */
  line: number;
}

export interface ShellBlock {
  kind: 'shell';
  line: number;
  commands: ShellCommand[];
  /** Output lines the block must print, as patterns (`…` any text). */
  expected: { pattern: string; line: number }[];
}

export interface FileBlock {
  kind: 'file';
  line: number;
  /** The file it names (relative to the directory the blocks run in). */
  name: string;
  text: string;
}

export interface SkippedBlock {
  kind: 'skipped';
  line: number;
  reason: string;
}

export type ReadmeBlock = ShellBlock | FileBlock | SkippedBlock;

const SKIP = /^<!--\s*readme-test:\s*skip:?\s*(.*?)\s*-->\s*$/;
const FILE_NAME = /^\s*(?:\/\/|#)\s*([\w./-]+\.(?:mjs|cjs|js|ts|json|ndjson|py))\b/;

/** The lines of the section under the `## ` heading `title` (up to its first `### ` when asked). */
export function sectionLines(
  readme: string,
  title: string,
  options: { untilSubsection?: boolean } = {},
): { lines: string[]; firstLine: number } {
  const all = readme.split('\n');
  const start = all.findIndex((l) => l === `## ${title}`);
  if (start < 0) throw new Error(`README.md has no section "## ${title}"`);
  let end = start + 1;
  let fenced = false;
  for (; end < all.length; end++) {
    const l = all[end] as string;
    if (l.startsWith('```')) fenced = !fenced;
    if (fenced) continue;
    if (l.startsWith('## ') || (options.untilSubsection === true && l.startsWith('### '))) break;
  }
  return { lines: all.slice(start + 1, end), firstLine: start + 2 };
}

/** The fenced blocks of a section's lines, in order. */
export function readmeBlocks(lines: string[], firstLine: number): ReadmeBlock[] {
  const blocks: ReadmeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i] as string);
    if (!open) continue;
    const lang = open[1] ?? '';
    let close = i + 1;
    while (close < lines.length && !(lines[close] as string).startsWith('```')) close++;
    const body = lines.slice(i + 1, close);
    const line = firstLine + i;
    const skip = i > 0 ? SKIP.exec(lines[i - 1] as string) : null;
    if (skip) blocks.push({ kind: 'skipped', line, reason: skip[1] ?? '' });
    else if (lang === 'sh' || lang === 'bash' || lang === 'shell') blocks.push(shellBlock(body, line + 1));
    else {
      const name = FILE_NAME.exec(body[0] ?? '');
      if (name) blocks.push({ kind: 'file', line, name: name[1] as string, text: `${body.join('\n')}\n` });
      else blocks.push({ kind: 'skipped', line, reason: `a ${lang || 'plain'} block that names no file` });
    }
    i = close;
  }
  return blocks;
}

function shellBlock(body: string[], firstLine: number): ShellBlock {
  const commands: ShellCommand[] = [];
  const expected: ShellBlock['expected'] = [];
  let pending: { text: string[]; line: number } | null = null;
  let lastWasCommand = false;
  body.forEach((raw, index) => {
    const line = firstLine + index;
    if (pending !== null) {
      pending.text.push(raw);
    } else if (/^\s*#/.test(raw)) {
      if (lastWasCommand) expected.push({ pattern: raw.replace(/^\s*#\s?/, ''), line });
      return;
    } else if (raw.trim() === '') {
      lastWasCommand = false;
      return;
    } else {
      pending = { text: [raw], line };
    }
    const joined = pending.text.join('\n');
    if (raw.endsWith('\\') || openQuote(joined)) return;
    commands.push({ text: stripTrailingComment(joined), line: pending.line });
    pending = null;
    lastWasCommand = true;
  });
  if (pending !== null) throw new Error(`README.md line ${(pending as { line: number }).line}: a command never ends`);
  return { kind: 'shell', line: firstLine - 1, commands, expected };
}

/** Whether `text` ends inside a single- or double-quoted string (a comment's quotes are prose). */
function openQuote(text: string): boolean {
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === null) {
      if (c === '\\') i++;
      else if (c === "'" || c === '"') quote = c;
      else if (c === '#' && (i === 0 || /\s/.test(text[i - 1] as string))) {
        // A comment runs to the end of its line.
        const end = text.indexOf('\n', i);
        if (end < 0) return false;
        i = end;
      }
    } else if (c === quote) quote = null;
    else if (quote === '"' && c === '\\') i++;
  }
  return quote !== null;
}

/** The command without the comment at its end (a `#` after whitespace, outside quotes). */
function stripTrailingComment(text: string): string {
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === null) {
      if (c === '\\') i++;
      else if (c === "'" || c === '"') quote = c;
      else if (c === '#' && (i === 0 || /\s/.test(text[i - 1] as string))) return text.slice(0, i).trimEnd();
    } else if (c === quote) quote = null;
    else if (quote === '"' && c === '\\') i++;
  }
  return text.trimEnd();
}

/** An expected output line as a regular expression: `…` any text, spaces any run of spaces. */
export function outputPattern(pattern: string): RegExp {
  const parts = pattern
    .trim()
    .split('…')
    .map((part) =>
      part
        .split(/\s+/)
        .map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('\\s+'),
    );
  return new RegExp(parts.join('.*'));
}
