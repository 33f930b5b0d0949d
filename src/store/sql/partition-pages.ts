import { isUuid } from '../../lib/ids.js';
import type { Db } from '../db.js';
import type { PartitionCursor } from '../types.js';
import { tsParam } from './columns.js';

/**
 * Paging through one partition's rows in (time, id) order — pending tasks by due time for a
 * wheel rebuild, schedule wakes by wake time — before a bound, after a cursor: a range scan of
 * a partial index (partition, time, id), stopping after `limit` rows. The row comparison makes
 * paging exact even when thousands of rows share one millisecond. Two statements, without and
 * after a cursor, so each plan is a plain index range scan.
 */
export interface PartitionPages {
  read<R>(db: Db, partition: number, after: PartitionCursor | null, toMs: number, limit: number): Promise<R[]>;
  /**
   * The first page of each of `partitions` in one statement (the same range scan per
   * partition, under a lateral join), each row with its `part`: for the safety net's pass,
   * which read the partitions one statement each — 128 statements every 5 s for 64. With
   * `after`, a partition that has a cursor there is read after it (the net walking a backlog).
   */
  readAcross<R>(
    db: Db,
    partitions: readonly number[],
    toMs: number,
    limit: number,
    after?: ReadonlyMap<number, PartitionCursor>,
  ): Promise<(R & { part: number })[]>;
  /**
   * The first pages of several requests, each its own partition, bound and limit, in one
   * statement (the same range scan per request, under a lateral join); answers in their
   * order. Wheel partitions activating together (64 at a node's start) each read their first
   * page: one statement instead of one each on PGlite's one connection (see `FirstPages`).
   */
  readFirst<R>(db: Db, requests: readonly FirstPageRequest[]): Promise<R[][]>;
}

/** A cursor before every row: 0001-01-01 and the nil uuid. */
const BEFORE_ANY: PartitionCursor = { dueMs: -62_135_596_800_000, taskId: '00000000-0000-0000-0000-000000000000' };

/** One partition's first page: its rows before `toMs`, at most `limit`. */
export interface FirstPageRequest {
  partition: number;
  toMs: number;
  limit: number;
}

/**
 * The pages of rows matching `where` (besides the partition), ordered by `time`, answering
 * `columns`. `name` prefixes the prepared statements' names.
 */
export function partitionPages(spec: { name: string; columns: string; where: string; time: string }): PartitionPages {
  const head = `
  SELECT ${spec.columns}
  FROM tasks t
  WHERE t.partition = $1 AND ${spec.where} AND ${spec.time} < ${tsParam(2)}`;
  const tail = `
  ORDER BY ${spec.time}, t.id
  LIMIT $3`;
  const first = head + tail;
  const across = `
  SELECT p.part, x.*
  FROM unnest($1::int[]) AS p(part)
  CROSS JOIN LATERAL (${head.replace('t.partition = $1', 't.partition = p.part')}${tail}) AS x`;
  // Partitions without a cursor start before any row: year 1 and the nil uuid.
  const acrossAfter = `
  SELECT p.part, x.*
  FROM unnest($1::int[], $4::float8[], $5::uuid[]) AS p(part, after_ms, after_id)
  CROSS JOIN LATERAL (${head.replace('t.partition = $1', 't.partition = p.part')}
    AND (${spec.time}, t.id) > (to_timestamp(round(p.after_ms) / 1000), p.after_id)${tail}) AS x`;
  // `i` numbers the requests (a partition may be asked twice, with other bounds); each
  // request's rows keep the page order.
  const firstMany = `
  SELECT p.i, x.*
  FROM unnest($1::int[], $2::float8[], $3::int[]) WITH ORDINALITY AS p(part, to_ms, lim, i)
  CROSS JOIN LATERAL (
    SELECT ${spec.columns}, ${spec.time} AS page_time, t.id AS page_id
    FROM tasks t
    WHERE t.partition = p.part AND ${spec.where} AND ${spec.time} < to_timestamp(round(p.to_ms) / 1000)
    ORDER BY ${spec.time}, t.id
    LIMIT p.lim
  ) AS x
  ORDER BY p.i, x.page_time, x.page_id`;
  const afterCursor = `${head}
    AND (${spec.time}, t.id) > (${tsParam(4)}, $5::uuid)${tail}`;
  return {
    async read<R>(db: Db, partition: number, after: PartitionCursor | null, toMs: number, limit: number) {
      if (limit <= 0) return [];
      const params: unknown[] = [partition, toMs, Math.floor(limit)];
      if (after !== null) {
        if (!isUuid(after.taskId)) return [];
        params.push(after.dueMs, after.taskId);
      }
      const { rows } = await db.query<R & object>(
        after === null ? first : afterCursor,
        params,
        after === null ? spec.name : `${spec.name}_after`,
      );
      return rows;
    },
    async readAcross<R>(
      db: Db,
      partitions: readonly number[],
      toMs: number,
      limit: number,
      after?: ReadonlyMap<number, PartitionCursor>,
    ) {
      if (limit <= 0 || partitions.length === 0) return [];
      const cursors = partitions.map((p) => after?.get(p));
      if (cursors.every((c) => c === undefined || !isUuid(c.taskId))) {
        const { rows } = await db.query<R & { part: number }>(
          across,
          [partitions, toMs, Math.floor(limit)],
          `${spec.name}_across`,
        );
        return rows;
      }
      const valid = cursors.map((c) => (c !== undefined && isUuid(c.taskId) ? c : BEFORE_ANY));
      const { rows } = await db.query<R & { part: number }>(
        acrossAfter,
        [partitions, toMs, Math.floor(limit), valid.map((c) => c.dueMs), valid.map((c) => c.taskId)],
        `${spec.name}_across_after`,
      );
      return rows;
    },
    async readFirst<R>(db: Db, requests: readonly FirstPageRequest[]) {
      const pages: R[][] = requests.map(() => []);
      const asked = requests.filter((r) => r.limit > 0);
      if (asked.length === 0) return pages;
      const at = requests.flatMap((r, n) => (r.limit > 0 ? [n] : []));
      const { rows } = await db.query<R & { i: number | string; page_time?: unknown; page_id?: unknown }>(
        firstMany,
        [asked.map((r) => r.partition), asked.map((r) => r.toMs), asked.map((r) => Math.floor(r.limit))],
        `${spec.name}_first_many`,
      );
      for (const { i, page_time: _time, page_id: _id, ...row } of rows)
        pages[at[Number(i) - 1]!]!.push(row as unknown as R);
      return pages;
    },
  };
}

/** Rows of several partitions, grouped by their `part` (only partitions that have some). */
export function byPart<R extends { part: number }, T>(rows: readonly R[], map: (row: R) => T): Map<number, T[]> {
  const out = new Map<number, T[]>();
  for (const row of rows) {
    const list = out.get(row.part);
    if (list === undefined) out.set(row.part, [map(row)]);
    else list.push(map(row));
  }
  return out;
}
