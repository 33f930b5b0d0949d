/**
 * `text[]` values as Postgres sends them, read by the node's parser (src/store/text-array.ts):
 * the same arrays as `pg`'s own parser, for the literals it splits itself and those it leaves.
 * The literals are Postgres's own output, not written by hand.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { parseTextArray } from '../../src/store/text-array.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';

const pgParser = pg.types.getTypeParser(1009 as Parameters<typeof pg.types.getTypeParser>[0], 'text') as (
  value: string,
) => unknown;
const postgres = sqlBackends.find((b) => b.name === 'postgres')!;

describe('the text[] parser', () => {
  let testDb: TestDb;
  beforeAll(async () => {
    testDb = await postgres.open();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  const cases: [string, string][] = [
    ['one name', `ARRAY['w1-nonbinding']`],
    ['two names', `ARRAY['customer:42', 'stripe-api']`],
    ['empty', `ARRAY[]::text[]`],
    ['a null element', `ARRAY['a', NULL, 'b']`],
    ['the word NULL, quoted by Postgres', `ARRAY['NULL', 'null']`],
    ['an empty string', `ARRAY['', 'x']`],
    ['spaces, commas and quotes', `ARRAY['a b', 'c,d', 'e"f', 'g\\h', '{i}']`],
    ['two dimensions', `ARRAY[ARRAY['a','b'], ARRAY['c','d']]`],
    ['explicit bounds', `'[2:3]={x,y}'::text[]`],
    ['unicode', `ARRAY['kunde:ü', '顧客']`],
  ];

  it.each(cases)('reads %s as pg does', async (_name, expression) => {
    const { rows } = await testDb.db.query<{ v: string }>(`SELECT (${expression})::text AS v`);
    const literal = rows[0]!.v;
    expect(parseTextArray(literal, pgParser)).toEqual(pgParser(literal));
  });

  it('splits a plain literal itself and leaves a quoted one to the fallback', () => {
    const asked: string[] = [];
    const fallback = (value: string): unknown => {
      asked.push(value);
      return pgParser(value);
    };
    expect(parseTextArray('{customer:42,stripe-api}', fallback)).toEqual(['customer:42', 'stripe-api']);
    expect(parseTextArray('{a,NULL}', fallback)).toEqual(['a', null]);
    expect(asked).toEqual([]);
    expect(parseTextArray('{"a b",c}', fallback)).toEqual(['a b', 'c']);
    expect(asked).toEqual(['{"a b",c}']);
  });

  it('answers null for a null value', () => {
    expect(parseTextArray(null, pgParser)).toBeNull();
  });

  it('is the parser the store’s connections use for text[]', async () => {
    const { rows } = await testDb.db.query<{ v: (string | null)[] }>(`SELECT ARRAY['w1-nonbinding', NULL, 'x y'] AS v`);
    expect(rows[0]!.v).toEqual(['w1-nonbinding', null, 'x y']);
  });
});
