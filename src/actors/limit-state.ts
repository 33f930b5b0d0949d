import type { Cancel } from '../runtime/clock.js';
import { RateWindow, type ResolvedLimit } from '../domain/limits.js';
import type { NodeEventSink } from '../domain/events.js';
import type { LimitStore, LiveTasks } from '../store/limit-types.js';
import type { ReadyQueue } from '../store/fast-index-types.js';
import { WaitingTasks } from './limit-waiting.js';
import { LimitInbox } from './limit-inbox.js';
import type { DueEntry } from '../domain/model.js';

/** A limit actor's snapshot: the declaration it applies (null: none applies any more). */
export type LimitSnapshot = ResolvedLimit | null;

/** What a limit key's actor holds in memory (src/actors/limit-key.ts). */
export interface LimitKeyState {
  limit: ResolvedLimit | null;
  /** Tasks holding a permit (granted; running unless the claim has yet to land), with when. */
  holders: Map<string, number>;
  /**
   * No holder took its permit before this (+Infinity: none has): a bound, not the oldest — the
   * holders that left may have been. `anyHolderOlder` tightens it when it must look.
   */
  holdersFloorMs: number;
  /** Tasks pushed to the ready queue and not yet granted, with when. */
  admitted: Map<string, number>;
  waiting: WaitingTasks;
  /** Holders asked to stop by `cancel_running`, not yet back. */
  cancelling: Set<string>;
  /**
   * Tasks offered again while the key counted them holders, with when (see `duplicateOf`):
   * taken in if their permit comes back soon after, instead of being forgotten.
   */
  offeredWhileHeld: Map<string, { entry: DueEntry; atMs: number }>;
  /** The rate's pacing and its log of starts (null: no rate). */
  rate: RateWindow | null;
  tickAtMs: number | null;
  cancelTick: Cancel | null;
  lastReconcileMs: number;
  /** Waiting tasks of the key may be in the task table that its reads have not brought yet. */
  unread: boolean;
  /** A read of the next waiting tasks is under way (`readMore`). */
  reading: boolean;
  /** The activation's first read of its waiting tasks has landed. */
  readOnce: boolean;
  /** Admitted entries not yet sent to the ready queue: they go with the next push (`pushAdmitted`). */
  unsent: DueEntry[];
  /** A push of admitted entries is under way. */
  pushing: boolean;
  /** When the key last checked that it owns itself (`verify`). */
  verifiedAtMs: number;
  /** Offered entries not yet taken in (a large offer, a slice a message). */
  inbox: LimitInbox;
}

/** A key's state as an activation starts it: its declaration and its holders, read back. */
export function freshState(limit: ResolvedLimit | null, running: LiveTasks['running'], now: number): LimitKeyState {
  return {
    limit,
    holders: new Map(running.map((r) => [r.taskId, r.startedMs ?? now])),
    holdersFloorMs: running.reduce((floor, r) => Math.min(floor, r.startedMs ?? now), Number.POSITIVE_INFINITY),
    admitted: new Map(),
    waiting: new WaitingTasks(),
    cancelling: new Set(),
    offeredWhileHeld: new Map(),
    rate: limit?.rate ? new RateWindow(limit.rate) : null,
    tickAtMs: null,
    cancelTick: null,
    lastReconcileMs: now,
    unread: true,
    reading: false,
    readOnce: false,
    unsent: [],
    pushing: false,
    verifiedAtMs: Number.NEGATIVE_INFINITY,
    inbox: new LimitInbox(),
  };
}

export interface LimitKeyDeps {
  store: Pick<LimitStore, 'stillRunning'>;
  /** A key's holders, its running tasks: all an activation reads (the node merges the reads of keys activating together). */
  holders(key: string): Promise<LiveTasks['running']>;
  /**
   * A key's most urgent due waiting tasks (the node merges reads made together), as many as
   * the node reads at once and `beyond` more, and whether more wait.
   */
  waitingTasks(key: string, nowMs: number, beyond?: number): Promise<Omit<LiveTasks, 'running'>>;
  /** The node's catalog of declarations. */
  resolve(key: string): ResolvedLimit | null;
  /** Reads the declarations again now (a key its catalog did not know yet). */
  reload(): Promise<void>;
  /**
   * Offers entries to their home key wherever the ring puts it now (the gate's `offer`): the
   * waiting tasks of an activation that ends, so that none is left only in a memory that goes.
   */
  handOn(entries: DueEntry[]): void;
  /** The ready queue itself (not the wheel's gate). */
  ready: Pick<ReadyQueue, 'push'>;
  /** Cancels tasks for a strategy of `on_limit` (a running one is told to stop). Never rejects. */
  cancel(taskIds: string[], reason: string): void;
  events: NodeEventSink;
  /** Most tasks of a key (of weight 1) in the ready queue at once, not yet granted. */
  admitWindow: number;
  /** A key with unread waiting tasks reads the next batch once fewer than this wait here. */
  readMoreBelow: number;
  idlePassivationMs: number;
  /** How often holders are checked against the task table while tasks wait. */
  reconcileMs: number;
}

/**
 * How long a key that holds nothing stays in memory once idle (`idlePassivationMs` for the
 * others). A family such as `customer:*` names a key per customer, most of which run a task
 * now and then: kept for the full idle time, every key touched in the last 30 s stayed live,
 * ≈ 7 KB each (issue 28). Short enough that live keys are those at work; long enough that a key
 * whose tasks come one after another is not activated again for each.
 */
export const QUIET_PASSIVATION_MS = 2_000;

/**
 * How long an idle key stays in memory: {@link QUIET_PASSIVATION_MS} once it holds nothing —
 * no permit out, nothing admitted or waiting, no waiting task left unread in the table — and
 * `idleMs` (the kind's idle time) while it holds something; and in either case until its rate,
 * if it has one, remembers no start that still limits it: a new activation starts with a fresh
 * window (its log of starts is in this memory only), so one that came sooner could start more
 * than the rate allows. A key that leaves reads its live tasks again when a message brings it
 * back.
 */
export function idleForMs(state: LimitKeyState, nowMs: number, idleMs: number): number {
  const holds =
    state.holders.size > 0 ||
    state.admitted.size > 0 ||
    state.waiting.size > 0 ||
    state.inbox.size > 0 ||
    state.cancelling.size > 0 ||
    state.unread ||
    state.reading ||
    state.pushing;
  const rateMs = state.rate === null ? 0 : state.rate.forgottenAtMs - nowMs;
  return Math.max(holds ? idleMs : Math.min(idleMs, QUIET_PASSIVATION_MS), rateMs);
}

/** Whether the key knows nothing of this task yet: not a holder, not admitted, not waiting. */
export function isNew(state: LimitKeyState, taskId: string): boolean {
  return !state.holders.has(taskId) && !state.admitted.has(taskId) && !state.waiting.has(taskId);
}

/** What `inspect` answers (GET /api/limits/{name}, the dashboard, explain). */
export interface LimitLiveView {
  key: string;
  declaredAs: string | null;
  running: number;
  /** Tasks of the key that may not start yet: parked here, or admitted and not yet claimed. */
  waiting: number;
  startsLastPeriod: number | null;
  /** While the rate holds its waiting tasks back: when the next start is allowed (Unix ms). */
  throttledUntilMs: number | null;
}

/** The live view `inspect` answers. */
export function view(state: LimitKeyState, key: string, now: number): LimitLiveView {
  const rate = state.limit?.rate ?? null;
  const throttled =
    state.rate !== null && state.waiting.size + state.inbox.size > 0 && state.rate.available(now, 1) === 0;
  return {
    key,
    declaredAs: state.limit?.declaredAs ?? null,
    running: state.holders.size,
    waiting: state.waiting.size + state.inbox.size + state.admitted.size,
    startsLastPeriod: rate && state.rate ? state.rate.startsInPeriod(now) : null,
    throttledUntilMs: throttled && state.rate ? state.rate.nextAllowedMs(now) : null,
  };
}
