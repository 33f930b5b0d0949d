import pg from 'pg';
import { WheelhouseError } from '../lib/errors.js';
import { isConnectionLoss, isUnavailableError, toStoreError } from './db-errors.js';
import type { ConnectionHealth } from './connection-health.js';
import { trace, tracing } from '../lib/trace.js';
import { withArrayLiterals } from './array-literal.js';
import { parseTextArray } from './text-array.js';
import { PlanGenerations } from './plan-generations.js';
import {
  checkSession,
  failedBeforeSending,
  READ_ONLY_SQLSTATE,
  HostRotation,
  hostListClient,
  parseHostList,
} from './multi-host.js';

/**
 * A small database abstraction with two real drivers: `pg` against a Postgres server (here) and
 * PGlite (Postgres compiled to WASM, embedded; src/store/db-pglite.ts). Both are Postgres, so the stores run the
 * same SQL on either. Rows come back with the same JavaScript types from both:
 * `int2`/`int4`/`float8` → number, `int8` → number (string only past 2⁵³), `jsonb` →
 * parsed JSON, `uuid`/`text` → string. Stores select times as Unix-ms numbers in SQL
 * (see `msOf` in `src/store/sql/columns.ts`), so no `Date` parsing happens on hot paths.
 */

/** One result: the rows, and how many rows the statement touched. */
export interface DbResult<R> {
  rows: R[];
  rowCount: number;
}

/** What runs statements: a pooled connection, or the connection of a transaction. */
export interface DbTx {
  /**
   * Runs one parameterised statement. `name` makes it a named prepared statement on
   * `pg` (parsed and planned once per connection); PGlite ignores it. A name must always
   * go with the same text.
   */
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[], name?: string): Promise<DbResult<R>>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(script: string): Promise<void>;
}

/** A database the stores can use. Every failure to reach it is a `store_unavailable` error. */
export interface Db extends DbTx {
  readonly driver: 'postgres' | 'pglite';
  /** The schema every statement runs in (`search_path`). */
  readonly schema: string;
  /** Runs `fn` in a transaction on one connection: committed if it resolves, rolled back if it throws. */
  transaction<T>(fn: (tx: DbTx) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** Options of {@link openPostgres}. */
export interface PostgresDbOptions {
  /**
   * A `postgres://` connection string. It may name several servers and what a connection must
   * find on one (`postgres://…@h1:5432,h2:5432/db?target_session_attrs=read-write`), as libpq
   * reads it: each connection goes to the first of them that answers and fits
   * (src/store/multi-host.ts).
   */
  url: string;
  /** Schema the tables live in; set as `search_path` of every connection. */
  schema: string;
  /** Largest number of connections. @default 10 */
  poolSize?: number;
  /** Keep every connection once opened (no idle timeout): a lane whose first use must not pay for one. */
  keepOpen?: boolean;
  /** How long to wait for a free connection or a new one, ms. @default 5000 */
  connectTimeoutMs?: number;
  /**
   * Called when an idle pooled connection fails (the server restarted, a network blip).
   * The pool has already discarded the connection; the next query opens a new one.
   * @default ignore
   */
  onIdleError?: (error: Error) => void;
  /**
   * Commit without waiting for the WAL to reach disk (`synchronous_commit = off`). For the
   * claim and completion statements only, whose loss in a Postgres crash at-least-once
   * delivery absorbs (docs/decisions/0003-asynchronous-commit-for-claims.md). Never for
   * submissions: a task is durable before its submit is answered.
   * @default false
   */
  asynchronousCommit?: boolean;
  /**
   * Postgres cancels a statement of these connections that runs longer (`statement_timeout`),
   * ms; the error is `store_unavailable`. @default none
   */
  statementTimeoutMs?: number;
  /**
   * A statement not answered this long fails (`store_unavailable`) and its connection is
   * closed, ms: a server that vanished without closing the connection (a network cut, a
   * primary gone behind a partition) would otherwise hold the statement — and whatever awaits
   * it, an actor's turn included — until the kernel gives the connection up, many minutes on.
   * Not for migrations (`exec`), which may rightly run longer. @default 60000
   */
  queryTimeoutMs?: number;
  /** `application_name` of the connections, so `pg_stat_activity` tells whose they are. @default 'wheelhouse' */
  applicationName?: string;
  /** How often the task table's size is read for the statements' names (plan-generations.ts), ms. @default 5000 */
  planCheckMs?: number;
  /**
   * Told whether each statement reached the server, so that it can tell when the database is
   * lost and when it is back. Several pools of one node share one. @default none
   */
  health?: ConnectionHealth;
}

const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,62}$/;

/** See `PostgresDbOptions.queryTimeoutMs`. */
export const QUERY_TIMEOUT_MS = 60_000;
/** The bound of a script (`exec`: migrations), ms. */
const SCRIPT_TIMEOUT_MS = 24 * 3_600_000;

export function checkSchema(schema: string): void {
  // The schema goes into a connection option and into DDL, so only plain names are allowed.
  if (!SCHEMA_RE.test(schema)) {
    throw new WheelhouseError('internal', `schema name "${schema}" must match ${SCHEMA_RE}`);
  }
}

export const INT8_OID = 20;
/** `text[]`: see src/store/text-array.ts. */
const TEXT_ARRAY_OID = 1009 as Parameters<typeof pg.types.getTypeParser>[0];

/**
 * int8 as a number while it is exactly representable; the text otherwise (pg's default;
 * PGlite's would be a BigInt).
 */
export function parseInt8(text: string): number | string {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : text;
}

/** Opens a `pg` pool on a Postgres server. Connects lazily: the first query opens a connection. */
export function openPostgres(options: PostgresDbOptions): Db {
  checkSchema(options.schema);
  const types = new pg.TypeOverrides();
  types.setTypeParser(INT8_OID, parseInt8);
  const textArray = pg.types.getTypeParser(TEXT_ARRAY_OID, 'text') as (value: string) => unknown;
  types.setTypeParser(TEXT_ARRAY_OID, (value: string) => parseTextArray(value, textArray));
  const hostList = parseHostList(options.url);
  const rotation = hostList.hosts.length > 1 || hostList.target !== 'any' ? new HostRotation(hostList) : null;
  const pool = new pg.Pool({
    connectionString: rotation === null ? options.url : hostList.singleHostUrl,
    ...(rotation === null
      ? {}
      : { Client: hostListClient(rotation), onConnect: (client: pg.ClientBase) => checkSession(client, rotation) }),
    max: options.poolSize ?? 10,
    ...(options.keepOpen ? { min: options.poolSize ?? 10 } : {}),
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
    // Idle connections to a server that is gone are found by the kernel's probes, not only by
    // the next statement.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // Every statement of a connection, the session check of a new one and a ROLLBACK included.
    query_timeout: options.queryTimeoutMs ?? QUERY_TIMEOUT_MS,
    application_name: options.applicationName ?? 'wheelhouse',
    // Every connection runs in the Wheelhouse schema, so SQL never names it.
    options: [
      `-c search_path=${options.schema}`,
      ...(options.asynchronousCommit ? ['-c synchronous_commit=off'] : []),
      ...(options.statementTimeoutMs === undefined
        ? []
        : [`-c statement_timeout=${Math.max(1, Math.round(options.statementTimeoutMs))}`]),
    ].join(' '),
    types,
  });
  // Without a listener an idle client's error would be an unhandled 'error' event and end
  // the process. The pool drops that client by itself. Whether the server is gone is for the
  // next statement to tell (`health`): an idle connection also closes when the server ends
  // idle sessions, which loses nothing.
  pool.on('error', (error) => options.onIdleError?.(error));
  return new PostgresDb(pool, options.schema, options.health, rotation?.list.hosts.length ?? 1, options.planCheckMs);
}

type PgQueryable = pg.Pool | pg.PoolClient;

/** A statement refused because the server takes no writes (raw, or mapped by {@link toStoreError}). */
function isReadOnlyRefusal(error: unknown): boolean {
  const cause = error instanceof WheelhouseError ? error.cause : error;
  return (cause as { code?: unknown } | null)?.code === READ_ONLY_SQLSTATE;
}

/**
 * Runs one round trip to the server, telling `health` whether it reached it: a connection
 * failure marks the database lost, any answer (a result, or an error the server raised)
 * marks it reachable. Failures map with {@link toStoreError}. With several servers, a
 * connection that could not be opened on one (or found it unfit) is tried on the next, up
 * to `servers` tries: no statement was sent, so nothing can run twice.
 */
async function reaching<T>(health: ConnectionHealth | undefined, run: () => Promise<T>, servers = 1): Promise<T> {
  const generation = health?.begin();
  try {
    let value: T;
    for (let attempt = 1; ; attempt++) {
      try {
        value = await run();
        break;
      } catch (error) {
        if (attempt >= servers || !failedBeforeSending(error)) throw error;
      }
    }
    health?.up(generation);
    return value;
  } catch (error) {
    if (health !== undefined) {
      if (isConnectionLoss(error)) health.down(error, generation);
      else if (!isUnavailableError(error)) health.up(generation);
    }
    throw toStoreError(error);
  }
}

function pgQuery<R>(
  on: PgQueryable,
  text: string,
  params: readonly unknown[] | undefined,
  name: string | undefined,
  health: ConnectionHealth | undefined,
  servers = 1,
): Promise<DbResult<R>> {
  return reaching(
    health,
    async () => {
      const values = params === undefined ? undefined : (withArrayLiterals(params) as unknown[]);
      const config: pg.QueryConfig = { text, values };
      if (name !== undefined) config.name = name;
      if (tracing && on instanceof pg.Pool) return tracedQuery<R>(on, config);
      const result = await on.query(config);
      return { rows: result.rows as R[], rowCount: result.rowCount ?? result.rows.length };
    },
    servers,
  );
}

/** {@link pgQuery} with the wait for a connection and the statement's time traced apart. */
async function tracedQuery<R>(pool: pg.Pool, config: pg.QueryConfig): Promise<DbResult<R>> {
  const t0 = Date.now();
  const queued = pool.waitingCount;
  const client = await pool.connect();
  const t1 = Date.now();
  let failed: Error | undefined;
  try {
    const result = await client.query(config).catch((error: unknown) => {
      failed = error instanceof Error ? error : new Error(String(error));
      throw error;
    });
    trace('db', {
      name: config.name ?? config.text.slice(0, 40),
      queued,
      waitMs: t1 - t0,
      runMs: Date.now() - t1,
      max: (pool as unknown as { options: { max: number } }).options.max,
    });
    return { rows: result.rows as R[], rowCount: result.rowCount ?? result.rows.length };
  } finally {
    // A failed connection (a timed-out statement may still be running on it) is not reused.
    client.release(failed);
  }
}

/** A script of several statements goes over the simple query protocol: no parameters, many results. */
function pgExec(on: PgQueryable, script: string, health: ConnectionHealth | undefined, servers = 1): Promise<void> {
  return reaching(
    health,
    async () => {
      // Migrations may rightly run long: past the connections' own bound (`queryTimeoutMs`).
      await on.query({ text: script, query_timeout: SCRIPT_TIMEOUT_MS } as pg.QueryConfig);
    },
    servers,
  );
}

/** The task table's size in pages; the size class of the statement names is read from it. */
const TASK_PAGES = `SELECT pg_relation_size('tasks') / 8192 AS pages`;

class PostgresDb implements Db {
  readonly driver = 'postgres' as const;
  /** Statement names by the task table's size class (plan-generations.ts). */
  private readonly plans: PlanGenerations;

  constructor(
    private readonly pool: pg.Pool,
    readonly schema: string,
    private readonly health: ConnectionHealth | undefined,
    /** How many servers the connection string names: how often opening a connection is tried. */
    private readonly servers: number,
    planCheckMs?: number,
  ) {
    this.plans = new PlanGenerations(async () => {
      const { rows } = await pgQuery<{ pages: number }>(pool, TASK_PAGES, undefined, undefined, undefined);
      return Number(rows[0]?.pages ?? 0);
    }, planCheckMs);
  }

  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[], name?: string): Promise<DbResult<R>> {
    return pgQuery<R>(this.pool, text, params, name && this.plans.name(name), this.health, this.servers);
  }

  exec(script: string): Promise<void> {
    return pgExec(this.pool, script, this.health, this.servers);
  }

  async transaction<T>(fn: (tx: DbTx) => Promise<T>): Promise<T> {
    const health = this.health;
    const client = await reaching(health, () => this.pool.connect(), this.servers);
    const tx: DbTx = {
      query: <R>(text: string, params?: readonly unknown[], name?: string) =>
        pgQuery<R>(client, text, params, name && this.plans.name(name), health),
      exec: (script: string) => pgExec(client, script, health),
    };
    // A connection that dies while checked out emits 'error' on the client (besides failing
    // the query in flight); unheard, that event would end the process. Hear it, and destroy
    // the connection on release instead of returning it to the pool.
    let broken: Error | undefined;
    const onError = (error: Error): void => {
      broken = error;
    };
    client.on('error', onError);
    try {
      await pgQuery(client, 'BEGIN', undefined, undefined, health);
      const value = await fn(tx);
      await pgQuery(client, 'COMMIT', undefined, undefined, health);
      return value;
    } catch (error) {
      // A server that refused a write as read-only was demoted (or is being promoted): this
      // connection must not serve another transaction; the next one looks for the primary.
      if (isReadOnlyRefusal(error)) broken ??= error as Error;
      try {
        await client.query('ROLLBACK');
      } catch (rollbackError) {
        // The connection is gone (the transaction with it): do not return it to the pool.
        broken ??= rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      }
      throw error;
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
