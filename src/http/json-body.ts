import { WheelhouseError } from '../lib/errors.js';

/**
 * Request bodies as JSON, with their nesting bounded. `JSON.parse` itself copes with any depth,
 * but what handles the value afterwards recurses (`JSON.stringify` for the size check and the
 * insert, Postgres's jsonb parser, canonical JSON for an idempotent replay's hash): a payload
 * nested a few thousand levels deep overflowed the stack there and answered 500. The depth is
 * measured on the text before anything is parsed, in one pass that skips string contents.
 */

/**
 * True when arrays and objects in `text` nest deeper than `maxDepth`: `[]` is 1 deep,
 * `{"a":[1]}` 2. Text that is not JSON is measured as if it were (the parser refuses it next).
 */
export function nestsDeeperThan(text: string, maxDepth: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > maxDepth) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** The index of the quote that closes the string opening at `start` (the text's end if none). */
function stringEnd(text: string, start: number): number {
  let at = start;
  for (;;) {
    at = text.indexOf('"', at + 1);
    if (at === -1) return text.length;
    // Escaped when an odd number of backslashes comes before it.
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
  }
}

/**
 * Parses a request body: undefined for an empty (or blank) body, the value otherwise. Throws
 * the catalogue's `validation_failed` for nesting deeper than `maxDepth`, `malformed_json` for
 * text that is not JSON. `JSON.parse` does not touch prototypes: a `__proto__` member is data.
 */
export function parseJsonBody(text: string, maxDepth: number): unknown {
  if (text.trim().length === 0) return undefined;
  if (nestsDeeperThan(text, maxDepth)) {
    throw new WheelhouseError(
      'validation_failed',
      `body: arrays and objects nest deeper than ${maxDepth} levels, the most a request may (maxJsonDepth)`,
      { details: { field: 'body', max_depth: maxDepth } },
    );
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new WheelhouseError('malformed_json', `The request body is not valid JSON: ${(error as Error).message}`, {
      cause: error,
    });
  }
}
