/**
 * Every error code the node can answer with is in the contract it serves, and the contract
 * names no code the node lacks. The contract in the repository is the OpenAPI document
 * (`/docs/openapi.json`, built by src/http/openapi.ts): the `Error` schema's `code` enum is
 * the catalogue, and each error response lists the codes it carries, which must be the codes
 * of that status in src/lib/errors.ts.
 */
import { describe, expect, it } from 'vitest';
import { OPENAPI_DOCUMENT } from '../../src/http/openapi.js';
import { ERROR_CATALOGUE, ERROR_CODES, type ErrorCode } from '../../src/lib/errors.js';

interface ErrorComponents {
  schemas: { Error: { properties: { error: { properties: { code: { enum: string[] } } } } } };
  responses: Record<string, { description: string }>;
}

const components = OPENAPI_DOCUMENT.components as unknown as ErrorComponents;
const documented = components.schemas.Error.properties.error.properties.code.enum;

/** What is in `a` and not in `b`. */
const missing = (a: readonly string[], b: readonly string[]): string[] => a.filter((x) => !b.includes(x));

describe('the error codes', () => {
  it('are the ones in ERROR_CATALOGUE', () => {
    expect([...ERROR_CODES].sort()).toEqual(Object.keys(ERROR_CATALOGUE).sort());
    expect(ERROR_CODES.length).toBeGreaterThan(20);
  });

  it('are each in the OpenAPI document, and it names no other', () => {
    const undocumented = missing(ERROR_CODES, documented);
    const unknown = missing(documented, ERROR_CODES);
    expect({ undocumented, unknown }, 'codes in src/lib/errors.ts but not in the contract, and the other way').toEqual({
      undocumented: [],
      unknown: [],
    });
    expect(new Set(documented).size, 'a code listed twice').toBe(documented.length);
  });

  it('are listed under the error response of their status', () => {
    const wrong: string[] = [];
    for (const [name, response] of Object.entries(components.responses)) {
      const status = Number(/^E(\d{3})$/.exec(name)?.[1]);
      const listed = [...response.description.matchAll(/`([a-z_]+)`/g)].map((m) => m[1] as string);
      const expected = ERROR_CODES.filter((code: ErrorCode) => ERROR_CATALOGUE[code].status === status);
      for (const code of missing(expected, listed)) wrong.push(`${name} does not list ${code}`);
      for (const code of missing(listed, expected)) wrong.push(`${name} lists ${code}, which is not a ${status}`);
    }
    expect(wrong, wrong.join('\n')).toEqual([]);
  });
});
