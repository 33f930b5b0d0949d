import { hash } from 'node:crypto';
import { BODY, FieldPath, type JsonObject } from '../../domain/field-path.js';
import { WheelhouseError } from '../../lib/errors.js';

export { BODY, FieldPath, type JsonObject };

/**
 * What request validation needs besides the schemas: an ISO-8601 parser, canonical JSON and its
 * hash for idempotent replays, cutting text to a byte length, and describing a value in an
 * error message.
 */

const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|z|[+-]\d{2}(?::?\d{2})?)?)?$/;
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * Parses an ISO-8601 date-time (`2026-11-30T12:00:00.000Z`, `…+02:00`, `…T12:00`) or date
 * (`2026-11-30`, midnight UTC) to Unix milliseconds. A time without an offset is read as UTC,
 * as API.md says all times are. Calendar-checked: `2026-02-30` is refused (Date.parse would
 * roll it over to March). Fractions past milliseconds are truncated. null when it does not parse.
 */
export function parseIsoTime(text: string): number | null {
  const m = ISO_TIME.exec(text);
  if (!m) return null;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const hour = Number(m[4] ?? 0);
  const minute = Number(m[5] ?? 0);
  const second = Number(m[6] ?? 0);
  const ms = Number(((m[7] ?? '') + '000').slice(0, 3));
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) return null;
  const leap = month === 2 && year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (day < 1 || day > (DAYS_IN_MONTH[month - 1] ?? 31) + (leap ? 1 : 0)) return null;
  let offsetMinutes = 0;
  const offset = m[8];
  if (offset !== undefined && offset !== 'Z' && offset !== 'z') {
    const digits = offset.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2));
    const om = Number(digits.slice(2) || '0');
    if (oh > 23 || om > 59) return null;
    offsetMinutes = (offset.startsWith('-') ? -1 : 1) * (oh * 60 + om);
  }
  const date = new Date(Date.UTC(2000, month - 1, day, hour, minute, second, ms));
  date.setUTCFullYear(year); // Date.UTC maps years 0–99 to 1900–1999
  return date.getTime() - offsetMinutes * 60_000;
}

/**
 * JSON with object keys sorted at every level, so two bodies that differ only in key order
 * serialise identically. Otherwise as `JSON.stringify` (undefined members are dropped,
 * non-finite numbers become null). It recurses: a value nested deeper than
 * `CANONICAL_MAX_DEPTH` is the catalogue's `validation_failed`, not a stack overflow (bodies
 * that reach it through the routes are already held to `maxJsonDepth`; callers of the
 * validators with a value of their own are not).
 */
export function canonicalJson(value: unknown): string {
  return canonical(value, 0);
}

/** Deepest nesting `canonicalJson` writes. */
export const CANONICAL_MAX_DEPTH = 1000;

function canonical(value: unknown, depth: number): string {
  if (value === null || typeof value !== 'object') {
    return JSON.stringify(value) ?? 'null';
  }
  if (depth >= CANONICAL_MAX_DEPTH) {
    throw new WheelhouseError('validation_failed', `body: nests deeper than ${CANONICAL_MAX_DEPTH} levels`, {
      details: { field: 'body', max_depth: CANONICAL_MAX_DEPTH },
    });
  }
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ',';
      out += canonical(value[i], depth + 1);
    }
    return out + ']';
  }
  const object = value as JsonObject;
  const keys = Object.keys(object);
  if (!isSorted(keys)) keys.sort();
  let out = '{';
  let first = true;
  for (const key of keys) {
    const member = object[key];
    if (member === undefined || typeof member === 'function') continue;
    if (!first) out += ',';
    first = false;
    out += JSON.stringify(key) + ':' + canonical(member, depth + 1);
  }
  return out + '}';
}

function isSorted(keys: string[]): boolean {
  for (let i = 1; i < keys.length; i++) if ((keys[i - 1] as string) > (keys[i] as string)) return false;
  return true;
}

/** Hex sha256 of a string (one-shot `crypto.hash`: about twice as fast as `createHash` for small inputs). */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}

/** Cuts a string to at most `maxBytes` of UTF-8 without splitting a character. */
export function truncateUtf8(text: string, maxBytes: number): string {
  if (text.length * 3 <= maxBytes || Buffer.byteLength(text) <= maxBytes) return text;
  const bytes = Buffer.from(text).subarray(0, maxBytes);
  let end = bytes.length;
  // Step back over a partial multi-byte sequence at the cut (continuation bytes are 10xxxxxx).
  let back = 0;
  while (back < 4 && end - back - 1 >= 0 && ((bytes[end - back - 1] ?? 0) & 0xc0) === 0x80) back++;
  const lead = bytes[end - back - 1] ?? 0;
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  if (need > back + 1) end -= back + 1;
  return bytes.subarray(0, end).toString('utf8');
}

/** A short description of a value for messages: `a string`, `null`, `an array`. */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `the string "${clip(value)}"`;
  if (typeof value === 'number' || typeof value === 'boolean') return `${typeof value} ${String(value)}`;
  return `an ${typeof value}`;
}

function clip(text: string, max = 60): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/**
 * What `JSON.stringify` writes as an escape and Postgres jsonb refuses: U+0000 (`\\u0000`)
 * and a lone surrogate (`\\ud800`; a pair is written as itself), each not after an escaping
 * backslash.
 */
const UNSTORABLE_ESCAPE = /(?<!\\)(?:\\\\)*\\u(?:0000|[dD][89abcdefABCDEF][0-9a-fA-F]{2})/;

/** JSON (as `JSON.stringify` writes it) that Postgres jsonb cannot keep: see above. */
export function unstorable(json: string): boolean {
  return json.includes('\\u') && UNSTORABLE_ESCAPE.test(json);
}
