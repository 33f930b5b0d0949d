import { timingSafeEqual } from 'node:crypto';
import type { Cancel } from '../runtime/clock.js';
import { defineKind, type Ask, type Behavior } from '../runtime/actor.js';
import type { BackoffPolicy, Transition } from '../domain/model.js';
import { StatementBatcher } from '../lib/statement-batcher.js';
import type { ExtendedLease, LeaseHeartbeat, TaskStore } from '../store/types.js';
import type { NodeEventSink } from '../domain/events.js';
import type { Dependents, Placing } from './ports.js';

/**
 * A worker lease: one actor per claimed task (`("lease", task_id)`). It holds the lease's
 * expiry, extends it on heartbeats, and when it runs out sends the task back to `pending`
 * (attempt + 1, after a backoff) or to `failed` once retries are spent. A heartbeat never
 * extends the lease past the attempt's deadline (the store caps it), so the lease runs out
 * at the deadline at the latest: that is how an attempt ends as a timeout, however alive its
 * worker is. A heartbeat refused because the deadline passed expires the lease at once.
 *
 * Its durable state is the task row itself (`version`, `lease_expires_at`, the token digest),
 * so it takes no snapshot: on activation after a restart it is told the lease by its
 * partition, or reads the row. Every write it makes is a compare-and-set on the version it
 * was granted, or on the token digest, so a lease that lost a race (the task completed, or
 * was handed on) changes nothing.
 *
 * A heartbeat carries the digest of the token the worker presented. A claim does not send
 * digests between nodes (most tasks end before a heartbeat), so the first heartbeat of a
 * lease goes to the store as it is: the UPDATE is itself a compare-and-set on the digest,
 * and one that extends the lease teaches the actor its digest. From then on (and after a
 * refusal, or a restart, when the actor reads the row) the actor compares digests in
 * constant time and refuses a wrong token without touching the database. Either way a
 * guessed token can neither extend a lease nor end it. Heartbeats go to the store through
 * one `StatementBatcher` per node: those of many leases that arrive together share a
 * statement.
 */
export const LEASE = defineKind<LeaseMessage>('lease');

export type LeaseMessage =
  /** The task was claimed at `version`; the lease runs until `leaseExpiresMs` (the attempt's deadline). */
  | { type: 'granted'; version: number; leaseExpiresMs: number }
  /**
   * Extend the lease whose token has this digest (hex, so that it crosses between nodes as
   * JSON), never past the attempt's deadline; with `extendSeconds`, push the deadline first.
   * null: no lease of this task is held with that token, or its deadline has passed.
   */
  | Ask<{ type: 'heartbeat'; tokenDigest: string; extendSeconds?: number }, ExtendedLease | null>
  /** The result was recorded (or the task otherwise left `running`): the lease is over. */
  | { type: 'released'; version: number }
  | { type: 'expire' };

export interface LeaseState {
  /** null until granted or read from the task row. */
  version: number | null;
  leaseExpiresMs: number;
  /** The digest of the lease's token at `version`; null until read from the row. */
  tokenDigest: Uint8Array | null;
  cancelTimer: Cancel | null;
}

export interface LeaseDeps {
  tasks: TaskStore;
  backoff: BackoffPolicy;
  /** Puts a task that went back to `pending` on its wheel partition. */
  placement: Pick<Placing, 'requeue'>;
  /** Tells the dependents of a task that failed for good. */
  dependents: Pick<Dependents, 'transitions'>;
  events: NodeEventSink;
  onError(error: unknown, context: string): void;
}

/**
 * A lease that ran out (its actor's expiry, or the safety net's) was written back: the task is
 * handed on — to its wheel partition when it went back to `pending`, to its dependents when it
 * failed for good.
 */
export function handOnExpired(
  deps: Pick<LeaseDeps, 'placement' | 'dependents' | 'events'>,
  transition: Transition,
): void {
  deps.dependents.transitions([transition]);
  deps.events.emit('lease:expired', {
    taskId: transition.taskId,
    status: transition.status,
    requeued: transition.requeued !== null,
    taskType: transition.taskType,
    startedMs: transition.startedMs,
    endedMs: transition.endedMs,
    ...(transition.limits ? { limits: transition.limits } : {}),
  });
  void deps.placement.requeue([transition]);
}

export function workerLeaseBehavior(deps: LeaseDeps): Behavior<LeaseState, LeaseMessage> {
  // Many workers heartbeat many leases at once (one request per task on the HTTP routes):
  // those arriving together share one UPDATE, extended from the latest of their clocks.
  const heartbeats = new StatementBatcher<LeaseHeartbeat & { nowMs: number }, ExtendedLease | null>((leases) => {
    let nowMs = 0;
    for (const l of leases) nowMs = Math.max(nowMs, l.nowMs);
    return deps.tasks.heartbeats(leases, nowMs);
  });
  return {
    kind: LEASE,
    persistence: 'external',
    // Kept on the node that claimed the task while that node lives: its worker's heartbeats
    // and results arrive there, so a lease costs no message between nodes. The ring's owner
    // starts it only to recover a lease whose node is gone (see `Ownership.recoverLeases`).
    placement: 'holder',
    mailboxCapacity: 1_000,

    // Activation does no I/O: a claim creates ~30 000 leases a second. A lease woken by a
    // heartbeat after a restart reads its row on demand (see `load`).
    activate: async () => ({ version: null, leaseExpiresMs: 0, tokenDigest: null, cancelTimer: null }),

    async receive(state, message, ctx) {
      const arm = (): void => {
        state.cancelTimer?.();
        state.cancelTimer = ctx.schedule(state.leaseExpiresMs - ctx.clock.now(), { type: 'expire' });
      };
      const load = async (): Promise<boolean> => {
        const lease = await deps.tasks.runningLease(ctx.key);
        if (!lease) return false;
        state.version = lease.version;
        state.leaseExpiresMs = lease.leaseExpiresMs;
        state.tokenDigest = lease.tokenDigest;
        arm();
        return true;
      };
      /** Hands the task on if its lease has run out (re-arms if not yet; stops if it is no longer running). */
      const expire = async (): Promise<void> => {
        if (state.version === null && !(await load())) {
          ctx.stop();
          return;
        }
        const now = ctx.clock.now();
        if (now < state.leaseExpiresMs) {
          arm();
          return;
        }
        const transition = await deps.tasks.expireLease(ctx.key, state.version as number, now, deps.backoff);
        if (transition) {
          handOnExpired(deps, transition);
          state.cancelTimer?.();
          ctx.stop();
          return;
        }
        // Not expired in the row (extended elsewhere) or no longer running: re-read.
        state.version = null;
        state.tokenDigest = null;
        if (!(await load())) ctx.stop();
      };

      switch (message.type) {
        case 'granted':
          if (state.version !== null && state.version > message.version) return state;
          if (state.version !== message.version) state.tokenDigest = null;
          state.version = message.version;
          state.leaseExpiresMs = message.leaseExpiresMs;
          arm();
          return state;

        case 'heartbeat': {
          const presented = Buffer.from(message.tokenDigest, 'hex');
          const extend = (): Promise<ExtendedLease | null> =>
            heartbeats.submit({
              taskId: ctx.key,
              tokenDigest: presented,
              nowMs: ctx.clock.now(),
              ...(message.extendSeconds === undefined ? {} : { extendSeconds: message.extendSeconds }),
            });
          let refused = false;
          if (state.version !== null && state.tokenDigest === null) {
            // Granted here, its digest not yet known (the first heartbeat): the heartbeat's own
            // compare-and-set on the digest is the check, with no read of the row before it. A
            // refusal may be a wrong token, a lease gone or a deadline passed: the row tells
            // which, below.
            const extended = await extend();
            if (extended) {
              state.tokenDigest = presented;
              state.leaseExpiresMs = extended.leaseExpiresMs;
              arm();
              ctx.reply(message, extended);
              return state;
            }
            refused = true;
            state.version = null;
          }
          if ((state.version === null || state.tokenDigest === null) && !(await load())) {
            ctx.reply(message, null);
            ctx.stop();
            return state;
          }
          const held = state.tokenDigest;
          if (held === null || presented.length !== held.length || !timingSafeEqual(presented, held)) {
            // Not this lease's token: the lease itself is untouched.
            ctx.reply(message, null);
            return state;
          }
          const extended = refused ? null : await extend();
          if (extended) {
            state.leaseExpiresMs = extended.leaseExpiresMs;
            arm();
            ctx.reply(message, extended);
            return state;
          }
          // Refused with the right token: the deadline passed (the attempt is over, and a lease
          // never outlives its deadline, so it has run out: expire it now rather than at the
          // timer), or the task left `running` meanwhile.
          ctx.reply(message, null);
          await expire();
          return state;
        }

        case 'released':
          if (state.version === null || state.version <= message.version) {
            state.cancelTimer?.();
            ctx.stop();
          }
          return state;

        case 'expire':
          await expire();
          return state;
      }
    },

    async deactivate(state) {
      state.cancelTimer?.();
    },

    describe(state) {
      return {
        version: state.version,
        leaseExpiresAt: state.version === null ? null : new Date(state.leaseExpiresMs).toISOString(),
      };
    },
  };
}
