import pg from 'pg';
import { WheelhouseError } from '../lib/errors.js';

/**
 * Connection strings that name several servers, as libpq reads them
 * (`postgres://user@h1:5432,h2:5433/db?target_session_attrs=read-write`), for `pg`, which
 * reads one host only: a high-availability Postgres (pg_auto_failover, Patroni) moves its
 * primary between servers, and a node must find it by itself after a failover
 * (docs/decisions/0025-postgres-failover.md).
 *
 * Each new connection goes to the server the last good one went to; one that cannot be
 * reached, or that is read-only where `read-write` is asked for, is closed and the next one
 * tried, in order, before the statement waiting for it fails (`store_unavailable`).
 */

/** One server of the list. */
export interface PostgresHost {
  host: string;
  port: number;
}

/**
 * What a connection must find on its server (libpq's `target_session_attrs`): `any`, or
 * `read-write` (`transaction_read_only` is off: a primary that takes writes — a standby, or a
 * primary pg_auto_failover holds read-only while it promotes, does not), or `primary` (not
 * in recovery).
 */
export type TargetSessionAttrs = 'any' | 'read-write' | 'primary';

/** A connection string split into the servers and what `pg` reads for each of them. */
export interface HostList {
  hosts: PostgresHost[];
  target: TargetSessionAttrs;
  /** The connection string with the first host only and no `target_session_attrs`, for `pg`. */
  singleHostUrl: string;
}

const URL_RE = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/;
const HOST_RE = /^(?:\[([^\]]+)\]|([^:]*))(?::(\d+))?$/;
const TARGETS: readonly TargetSessionAttrs[] = ['any', 'read-write', 'primary'];

/** Splits a `postgres://` URL with one host or several. A URL it cannot read is given back as one host. */
export function parseHostList(url: string): HostList {
  const match = URL_RE.exec(url);
  if (match === null) return { hosts: [], target: 'any', singleHostUrl: url };
  const [, scheme, userinfo = '', hostPart = '', rest = ''] = match;
  const queryAt = rest.indexOf('?');
  const params = new URLSearchParams(queryAt < 0 ? '' : rest.slice(queryAt + 1));
  const target = params.get('target_session_attrs') ?? 'any';
  if (!(TARGETS as readonly string[]).includes(target)) {
    throw new WheelhouseError(
      'internal',
      `postgresUrl: target_session_attrs=${target} is not supported (one of ${TARGETS.join(', ')})`,
    );
  }
  params.delete('target_session_attrs');
  const defaultPort = Number(params.get('port') ?? 5432);
  const hosts = hostPart.split(',').map((entry): PostgresHost => {
    const parts = HOST_RE.exec(entry);
    const host = parts?.[1] ?? parts?.[2] ?? '';
    return { host: host === '' ? '127.0.0.1' : host, port: parts?.[3] === undefined ? defaultPort : Number(parts[3]) };
  });
  const query = params.toString();
  const path = queryAt < 0 ? rest : rest.slice(0, queryAt);
  const first = hostPart.split(',')[0] ?? '';
  return {
    hosts,
    target: target as TargetSessionAttrs,
    singleHostUrl: `${scheme}${userinfo}${first}${path}${query === '' ? '' : `?${query}`}`,
  };
}

/**
 * The server each new connection goes to: where the last one that worked went. A connection
 * that fails moves it on to the next server, once per failure seen there (two connections
 * failing on one server move it once).
 */
export class HostRotation {
  private index = 0;

  constructor(readonly list: HostList) {}

  /** The index of the server new connections go to now. */
  get current(): number {
    return this.index;
  }

  host(index: number): PostgresHost {
    return this.list.hosts[index % this.list.hosts.length]!;
  }

  /** A connection to server `index` failed or found the server unfit: the next one is tried. */
  failed(index: number): void {
    if (index === this.index) this.index = (this.index + 1) % this.list.hosts.length;
  }
}

/** Errors of connections that never ran a statement of ours: trying the next server is safe. */
const unsentFailures = new WeakSet<object>();

/** True when `error` (or its cause) is a failure to open a connection, before any statement was sent. */
export function failedBeforeSending(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  if (unsentFailures.has(error)) return true;
  const cause = (error as { cause?: unknown }).cause;
  return typeof cause === 'object' && cause !== null && unsentFailures.has(cause);
}

/** `read_only_sql_transaction`: the server takes no writes (a standby, or a primary being demoted or promoted). */
export const READ_ONLY_SQLSTATE = '25006';

/** A server that does not meet `target_session_attrs`, found when a connection opened. */
class UnfitServerError extends Error {
  readonly code = READ_ONLY_SQLSTATE;
}

/**
 * A `pg.Client` class whose connections go to the rotation's current server; a connection
 * that cannot be opened moves the rotation on.
 */
export function hostListClient(rotation: HostRotation): new (config?: pg.ClientConfig) => pg.Client {
  return class HostListClient extends pg.Client {
    readonly hostIndex: number;

    constructor(config?: pg.ClientConfig) {
      super(config);
      this.hostIndex = rotation.current;
      const { host, port } = rotation.host(this.hostIndex);
      this.host = host;
      this.port = port;
    }

    override connect(): Promise<pg.Client>;
    override connect(callback: (err: Error) => void): void;
    override connect(callback?: (err: Error) => void): Promise<pg.Client> | void {
      const failed = (error: Error | null | undefined): void => {
        if (!error) return;
        unsentFailures.add(error);
        rotation.failed(this.hostIndex);
      };
      if (callback === undefined) {
        return super.connect().catch((error: Error) => {
          failed(error);
          throw error;
        });
      }
      super.connect((error: Error) => {
        failed(error);
        callback(error);
      });
    }
  };
}

/**
 * Checks a new connection against `target_session_attrs` (the pool's `onConnect`); an unfit
 * server moves the rotation on and fails the connection, which the pool then closes.
 */
export async function checkSession(client: pg.ClientBase, rotation: HostRotation): Promise<void> {
  const target = rotation.list.target;
  if (target === 'any') return;
  const { rows } = await client.query<{ read_only: string; standby: boolean }>(
    "SELECT current_setting('transaction_read_only') AS read_only, pg_is_in_recovery() AS standby",
  );
  const row = rows[0];
  const unfit = target === 'primary' ? row?.standby !== false : row?.read_only !== 'off';
  if (!unfit) return;
  const index = (client as unknown as { hostIndex?: number }).hostIndex ?? rotation.current;
  const { host, port } = rotation.host(index);
  rotation.failed(index);
  const error = new UnfitServerError(
    `the server at ${host}:${port} is ${row?.standby ? 'a standby' : 'read-only'}, not ${target} (target_session_attrs)`,
  );
  unsentFailures.add(error);
  throw error;
}
