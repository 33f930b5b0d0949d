import type { FastifyBaseLogger } from 'fastify';
import { isWheelhouseError } from '../lib/errors.js';
import type { ConnectionHealth, StoreName } from '../store/connection-health.js';
import { seconds } from './duty-log.js';

/**
 * What losing each store means for a node, as its code paths have it: the text of the one line
 * logged when the store is lost.
 *
 * Postgres: every route that reads or writes a task answers 503 `store_unavailable` (a poll
 * that finds an entry fails at its claim, and puts the entry back); the actors' writes — a
 * wheel's cascade (its snapshot), a lease's expiry, a cron fire — fail and are retried as
 * duties; membership heartbeats fail and are sent again each interval. Entries already on a
 * wheel are still pushed to the ready queues (Redis).
 *
 * Redis: a poll's take fails, so polls answer 503 and nothing is handed out; a submission
 * still answers 201 (the task is in Postgres, a far entry whose bucket write failed is kept
 * by its partition and written later); entries falling due stay on their wheel (the push is
 * retried every second) and far minutes are not loaded (the cascade is retried), so due tasks
 * wait until Redis is back.
 */
export const STORE_OUTAGE_EFFECTS: Readonly<Record<StoreName, string>> = Object.freeze({
  postgres:
    'submissions, claims, heartbeats, results and task reads answer 503; wheel cascades, lease expiries, cron fires and membership heartbeats are retried until it is back',
  redis:
    'ready queues and time buckets unreachable; polls answer 503 and no task is handed out; submissions are still accepted (written to Postgres) and due tasks wait until Redis is back',
});

/** The node's view of its stores' outages. */
export interface StoreOutages {
  /**
   * True when `error` is a store being unreachable while a store is logged as lost: the
   * `lost` line has said what fails meanwhile, so the failure itself need not be a warning.
   */
  explains(error: unknown): boolean;
  /** Stops watching (the node closes). */
  stop(): void;
}

/**
 * Logs each store's outages as two lines: an error when it is lost, naming what that stops and
 * that the node reconnects, and an info line when it is back, with how long it was gone.
 */
export function watchStoreOutages(stores: readonly ConnectionHealth[], log: FastifyBaseLogger): StoreOutages {
  const stops = stores.map((health) =>
    health.watch({
      lost: ({ store, error }) =>
        log.error({ store, err: error }, `${store} connection lost: ${STORE_OUTAGE_EFFECTS[store]}; reconnecting`),
      restored: ({ store, downMs, failures }) =>
        log.info({ store, downMs, failures }, `${store} connection restored after ${seconds(downMs)}`),
    }),
  );
  return {
    explains: (error) => isStoreUnavailable(error) && stores.some((health) => !health.available),
    stop: () => {
      for (const stop of stops) stop();
    },
  };
}

/** A `store_unavailable` error, or an aggregate of failures one of which is. */
function isStoreUnavailable(error: unknown): boolean {
  if (isWheelhouseError(error, 'store_unavailable')) return true;
  return error instanceof AggregateError && error.errors.some(isStoreUnavailable);
}
