/**
 * Array parameters written as Postgres array literals by this module rather than by `pg`.
 *
 * `pg` writes a JavaScript array parameter as the text `{"a","b",…}`: each element through its
 * value conversion and a regular-expression escape, each appended to the text so far. A
 * submit's insert carries 18 such arrays and a completion 6, one element per task, and in W1
 * that was the largest source of garbage in the node (3.6 KB of the 22 KB allocated per task,
 * sampled), with `escapeElement` and `prepareValue` among its costliest functions. Here an
 * array of strings none of which needs escaping, or of finite numbers, is one `join`; any
 * other array of strings, numbers, booleans and nulls is one pass and one `join`. The text is
 * what `pg` sends for the same array, up to quoting Postgres reads alike (a number unquoted, a
 * boolean as `t`/`f`). An array holding anything else (a nested array, a Buffer, a Date, an
 * object) is left to `pg`.
 */

/** A character that must be escaped inside a quoted element. */
const NEEDS_ESCAPE = /["\\]/;
const ESCAPED = /["\\]/g;

/** The literal for `values`, or undefined when an element is of a kind left to `pg`. */
export function arrayLiteral(values: readonly unknown[]): string | undefined {
  const n = values.length;
  if (n === 0) return '{}';
  let strings = 0;
  let numbers = 0;
  let plain = true;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (typeof v === 'string') {
      strings++;
      if (plain && NEEDS_ESCAPE.test(v)) plain = false;
    } else if (typeof v === 'number') {
      numbers++;
      if (!Number.isFinite(v)) plain = false;
    } else if (v === null || v === undefined || typeof v === 'boolean') plain = false;
    else return undefined;
  }
  if (plain && strings === n) return `{"${values.join('","')}"}`;
  if (plain && numbers === n) return `{${values.join(',')}}`;
  const parts = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (typeof v === 'string') parts[i] = `"${NEEDS_ESCAPE.test(v) ? v.replace(ESCAPED, '\\$&') : v}"`;
    else if (typeof v === 'number') parts[i] = Number.isFinite(v) ? String(v) : `"${v}"`;
    else if (typeof v === 'boolean') parts[i] = v ? 't' : 'f';
    else parts[i] = 'NULL';
  }
  return `{${parts.join(',')}}`;
}

/**
 * The parameters with each array that {@link arrayLiteral} can write replaced by its literal;
 * the same array when none is (no copy).
 */
export function withArrayLiterals(params: readonly unknown[]): readonly unknown[] {
  let out: unknown[] | null = null;
  for (let i = 0; i < params.length; i++) {
    const p = params[i];
    if (!Array.isArray(p)) continue;
    const literal = arrayLiteral(p);
    if (literal === undefined) continue;
    out ??= [...params];
    out[i] = literal;
  }
  return out ?? params;
}
