/**
 * The parser of `text[]` values Postgres sends (OID 1009), for `pg`.
 *
 * `pg`'s own parser reads every literal a character at a time and builds each element from
 * them: the completion of W1L's limited tasks (each row's `limits`, `{w1-nonbinding}`) spent
 * 45 ms a run there and allocated 30 MB per 50 000 rows, a quarter of all a non-binding limit
 * added to the node's garbage (issue 28). Most literals are one dimension of elements Postgres
 * did not quote — nothing in them needs it — so they are split on their commas here, and an
 * unquoted `NULL` is a null as Postgres writes it; any other literal (a quoted element, more
 * dimensions, explicit bounds) goes to `pg`'s parser as before.
 */
export function parseTextArray(value: string | null, fallback: (value: string) => unknown): unknown {
  if (value === null) return null;
  const n = value.length;
  if (n < 2 || value.charCodeAt(0) !== LBRACE || value.charCodeAt(n - 1) !== RBRACE) return fallback(value);
  if (n === 2) return [];
  // A quote, a backslash or a brace inside: quoted elements, or nested dimensions.
  for (let i = 1; i < n - 1; i++) {
    const c = value.charCodeAt(i);
    if (c === QUOTE || c === BACKSLASH || c === LBRACE || c === RBRACE) return fallback(value);
  }
  const items: (string | null)[] = value.slice(1, -1).split(',');
  for (let i = 0; i < items.length; i++) if (items[i] === 'NULL') items[i] = null;
  return items;
}

const LBRACE = 0x7b;
const RBRACE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
