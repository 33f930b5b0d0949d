/**
 * Array parameters written by `src/store/array-literal.ts` must read back in Postgres exactly as
 * the same arrays written by `pg` do: checked against a real server for strings of any
 * characters (quotes, backslashes, braces, commas, `NULL`, empty, non-ASCII), numbers,
 * booleans and nulls, by the types the stores cast them to.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrayLiteral, withArrayLiterals } from '../../src/store/array-literal.js';
import { TEST_POSTGRES_URL } from '../support/postgres.js';

let client: pg.Client;

beforeAll(async () => {
  client = new pg.Client({ connectionString: TEST_POSTGRES_URL });
  await client.connect();
});

afterAll(async () => {
  await client.end();
});

/** What Postgres reads from our literal and from `pg`'s own writing of `values`, as `type`. */
async function bothWays(values: unknown[], type: string): Promise<{ ours: unknown; theirs: unknown }> {
  const literal = arrayLiteral(values);
  expect(literal).toBeTypeOf('string');
  const { rows } = await client.query(`SELECT $1::${type} AS ours, $2::${type} AS theirs`, [literal, values]);
  return rows[0] as { ours: unknown; theirs: unknown };
}

const tricky = fc.oneof(
  fc.string({ unit: 'binary' }),
  fc.constantFrom('', 'NULL', 'null', '"', '\\', '\\"', '{a,b}', ' spaced ', 'a,b', '{}', 'ø ✓ 漢字'),
);

describe('array literals', () => {
  it('reads back as pg writes them: text with any characters, and nulls', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.option(
            tricky.map((s) => s.replace(/\0/g, '')),
            { nil: null },
          ),
        ),
        async (values) => {
          const { ours, theirs } = await bothWays(values, 'text[]');
          expect(ours).toEqual(theirs);
          expect(ours).toEqual(values);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('reads back as pg writes them: numbers, booleans, uuids, and the empty array', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.option(fc.double({ noNaN: false }), { nil: null })),
        fc.array(fc.option(fc.integer(), { nil: null })),
        fc.array(fc.option(fc.boolean(), { nil: null })),
        fc.array(fc.uuid()),
        async (doubles, ints, bools, uuids) => {
          for (const [values, type] of [
            [doubles, 'float8[]'],
            [ints, 'int8[]'],
            [bools, 'bool[]'],
            [uuids, 'uuid[]'],
          ] as const) {
            const { ours, theirs } = await bothWays([...values], type);
            expect(ours).toEqual(theirs);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('leaves to pg an array of anything else, and the parameters that are no arrays', () => {
    expect(arrayLiteral([[1, 2]])).toBeUndefined();
    expect(arrayLiteral([Buffer.from('a')])).toBeUndefined();
    expect(arrayLiteral([new Date(0)])).toBeUndefined();
    expect(arrayLiteral([{ a: 1 }])).toBeUndefined();
    const params = ['x', 1, Buffer.from('b'), null];
    expect(withArrayLiterals(params)).toBe(params);
    const mixed = [['a', null], [[1]], 7];
    expect(withArrayLiterals(mixed)).toEqual(['{"a",NULL}', [[1]], 7]);
  });
});
