import type { FastifyBaseLogger } from 'fastify';
import { isWheelhouseError } from '../lib/errors.js';
import type { ActorErrorInfo } from '../runtime/host.js';

/** How often, at most, the node logs the told messages it could not deliver, ms. */
const DROPPED_LOG_MS = 1_000;

/**
 * Told messages the transport gave up on (no node took them before their deadline: their
 * owner died and the ring had not dropped it yet) are counted and logged once a second with
 * a count, not one error line each: a dead peer can cost thousands in the seconds before the
 * failure timeout. They are hints; what they carried is in Postgres. Returns whether it took
 * the error.
 */
export function droppedTells(
  log: FastifyBaseLogger,
  count: (n: number, labels: { kind: string }) => void,
): (error: unknown, info: ActorErrorInfo) => boolean {
  const pending = new Map<string, number>();
  let last: unknown = null;
  let timer: NodeJS.Timeout | null = null;
  const flush = (): void => {
    timer = null;
    const byKind = Object.fromEntries(pending);
    pending.clear();
    log.warn(
      { byKind, last: last instanceof Error ? last.message : String(last) },
      'told messages no node accepted before their deadline (dropped)',
    );
  };
  return (error, info) => {
    if (info.during !== 'deliver' || !isWheelhouseError(error, 'ask_timeout')) return false;
    const n = info.droppedTells ?? 1;
    count(n, { kind: info.kind });
    pending.set(info.kind, (pending.get(info.kind) ?? 0) + n);
    last = error;
    timer ??= setTimeout(flush, DROPPED_LOG_MS).unref();
    return true;
  };
}
