/**
 * Every error code the node can answer with is in the contract it serves, and the contract
 * names no code the node lacks: the `Error` schema's `code` enum in the OpenAPI document the
 * node generates from its route schemas (`/docs/openapi.json`) is the catalogue of
 * src/lib/errors.ts. (That each error response lists the codes of its status is checked in
 * test/http/contract.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE, ERROR_CODES } from '../../src/lib/errors.js';
import { serverWith } from '../http/fake-api.js';

interface ErrorSchema {
  properties: { error: { properties: { code: { enum: string[] } } } };
}

/** What is in `a` and not in `b`. */
const missing = (a: readonly string[], b: readonly string[]): string[] => a.filter((x) => !b.includes(x));

describe('the error codes', () => {
  it('are the ones in ERROR_CATALOGUE', () => {
    expect([...ERROR_CODES].sort()).toEqual(Object.keys(ERROR_CATALOGUE).sort());
    expect(ERROR_CODES.length).toBeGreaterThan(20);
  });

  it('are each in the OpenAPI document, and it names no other', async () => {
    const { app } = serverWith();
    try {
      const doc = (await app.inject({ method: 'GET', url: '/docs/openapi.json' })).json<{
        components: { schemas: { Error: ErrorSchema } };
      }>();
      const documented = doc.components.schemas.Error.properties.error.properties.code.enum;
      const undocumented = missing(ERROR_CODES, documented);
      const unknown = missing(documented, ERROR_CODES);
      expect(
        { undocumented, unknown },
        'codes in src/lib/errors.ts but not in the contract, and the other way',
      ).toEqual({ undocumented: [], unknown: [] });
      expect(new Set(documented).size, 'a code listed twice').toBe(documented.length);
    } finally {
      await app.close();
    }
  });
});
